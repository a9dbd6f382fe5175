package workload

import (
	"fmt"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	batchv1ac "k8s.io/client-go/applyconfigurations/batch/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"

	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
	"github.com/fluxfed/fluxfed/member/render/names"
	"github.com/fluxfed/fluxfed/member/render/scripts"
)

// BrokerPortName names the broker port on the headless Service.
const BrokerPortName = "broker"

// HeadlessService returns the headless Service mc.HeadlessName() (spec.network.headlessName, or
// the MiniCluster's name), which gives pod i the DNS name
// '<name>-<i>.<headlessName>.<namespace>.svc.cluster.local' (the Job sets each pod's hostname
// and subdomain) and the services pod '<name>-services.<headlessName>...'.
//
// It selects the MiniCluster's pods by names.SelectorLabels, and publishes them before they
// are ready, because brokers must resolve each other while they start. With
// spec.flux.minimalService it selects only the pod of completion index 0, the lead broker,
// which is all the other brokers of a flat tree dial; the services pod then has no name either.
func HeadlessService(mc *fluxv1alpha2.MiniCluster) *corev1ac.ServiceApplyConfiguration {
	selector := names.SelectorLabels(mc)
	if mc.Spec.Flux.MinimalService {
		selector[labelJobCompletionIndex] = "0"
	}
	return corev1ac.Service(mc.HeadlessName(), mc.Namespace).
		WithLabels(names.SelectorLabels(mc)).
		WithSpec(corev1ac.ServiceSpec().
			WithClusterIP(corev1.ClusterIPNone).
			WithSelector(selector).
			WithPublishNotReadyAddresses(true).
			WithPorts(corev1ac.ServicePort().
				WithName(BrokerPortName).
				WithProtocol(corev1.ProtocolTCP).
				WithPort(names.DefaultBrokerPort).
				WithTargetPort(intstr.FromInt32(names.DefaultBrokerPort))))
}

// Services returns the Job names.ServicesName(mc) that runs spec.services, or nil when there
// are none. Its single pod has the hostname '<name>-services' and the MiniCluster's selector
// labels, so it is reachable through the headless Service like the brokers. spec.pod applies
// to it as to every pod of the MiniCluster, except the broker affinity rules; it runs as long
// as the MiniCluster may (deadlineSeconds) and is restarted on failure.
func Services(mc *fluxv1alpha2.MiniCluster) (*batchv1ac.JobApplyConfiguration, error) {
	spec := &mc.Spec
	if len(spec.Services) == 0 {
		return nil, nil
	}
	name := names.ServicesName(mc)
	if errs := validation.IsDNS1123Label(name); len(errs) > 0 {
		return nil, fmt.Errorf("metadata.name: the services pod's hostname %q is not a DNS label: %v", name, errs)
	}
	vols, err := collectVolumes(spec.Services, "spec.services", spec.Volumes) //nolint:staticcheck // the deprecated spec.volumes keeps its meaning
	if err != nil {
		return nil, err
	}
	podSpec := corev1ac.PodSpec().
		WithHostname(name).
		WithSubdomain(mc.HeadlessName())
	if err := podOptions(mc, podSpec, true); err != nil {
		return nil, err
	}
	if na := nodeAffinity(mc); na != nil {
		podSpec.WithAffinity(corev1ac.Affinity().WithNodeAffinity(na))
	}
	entrypoints := false
	for i := range spec.Services {
		c, err := serviceContainer(mc, i)
		if err != nil {
			return nil, err
		}
		podSpec.WithContainers(c)
		entrypoints = entrypoints || wrapped(scripts.ServiceCommand(mc, i))
	}
	if entrypoints {
		podSpec.WithVolumes(corev1ac.Volume().WithName(VolumeEntrypoint).WithConfigMap(corev1ac.ConfigMapVolumeSource().
			WithName(names.EntrypointConfigMapName(mc)).
			WithDefaultMode(entrypointMode)))
	}
	podSpec.WithVolumes(vols...)
	podSpec.WithImagePullSecrets(pullSecrets(pullSecretNames(spec.Services)...)...)

	jobSpec := batchv1ac.JobSpec().
		WithCompletionMode(batchv1.NonIndexedCompletion).
		WithCompletions(1).
		WithParallelism(1).
		WithBackoffLimit(mc.BackoffLimit()).
		WithTemplate(corev1ac.PodTemplateSpec().
			WithLabels(podLabels(mc)).
			WithSpec(podSpec))
	if len(spec.Pod.Annotations) > 0 {
		jobSpec.Template.WithAnnotations(spec.Pod.Annotations)
	}
	if spec.DeadlineSeconds > 0 {
		jobSpec.WithActiveDeadlineSeconds(spec.DeadlineSeconds)
	}
	return batchv1ac.Job(name, mc.Namespace).
		WithLabels(names.SelectorLabels(mc)).
		WithSpec(jobSpec), nil
}
