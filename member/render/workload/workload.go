// Package workload renders the Kubernetes workload of a MiniCluster as typed apply
// configurations, for server-side apply: the indexed Job of broker pods, the headless Service
// that names them, and the Job of the services pod.
//
// A broker pod is the flux-view init container, which provisions the volume shared with the
// application containers (see package scripts for what it writes there), and the application
// containers of spec.containers, each running its rendered entrypoint from the entrypoint
// ConfigMap. Pod index 0 of a root MiniCluster is the lead broker. A burst child renders the
// same shape; its scripts make every pod a follower.
//
// Scaling changes only spec.completions and spec.parallelism of the Job. Nothing in the pod
// template depends on spec.size, because the API server rejects any change to the template of
// a Job that is not suspended; it accepts new completions on an Indexed Job as long as they
// change together with, and equal, parallelism (k8s.io/kubernetes pkg/apis/batch/validation,
// validateCompletions). Lowering both removes the pods with the highest indexes, raising them
// adds pods, and the running pods stay.
//
// Spec fields this package deliberately gives no effect, and why:
//   - pod.resources: the Flux Operator puts it in the pods' overhead, but the RuntimeClass
//     admission plugin (on by default) rejects every pod whose overhead is not the one its
//     RuntimeClass defines, so the Job could not create a single pod. Pod overhead can only come
//     from a RuntimeClass (pod.runtimeClassName).
//   - containers[].cores, fluxUser, diagnostics, commands.runFluxAsRoot: see package scripts.
//   - cleanup: deleting the pods once the lead broker finished is the reconciler's job, since a
//     Job that deleted itself would be applied again.
package workload

import (
	"fmt"
	"maps"
	"slices"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	batchv1ac "k8s.io/client-go/applyconfigurations/batch/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"

	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
	"github.com/fluxfed/fluxfed/member/render/names"
)

// Defaults the schema fills in, applied here too so that an object that was not defaulted by an
// API server renders the same.
const (
	// DefaultViewImage is spec.flux.container.image when it is empty.
	DefaultViewImage = "ghcr.io/converged-computing/flux-view-rocky:tag-9"
	// DefaultViewName is spec.flux.container.name when it is empty.
	DefaultViewName = "flux-view"
)

// Names of the volumes fluxfed adds to the pods. Volume names of the spec must not use them.
const (
	// VolumeView is the emptyDir at spec.flux.container.mountPath that the init container
	// fills and every container of a broker pod shares.
	VolumeView = "fluxfed-view"
	// VolumeConfig is the flux ConfigMap (broker.toml, hostlist).
	VolumeConfig = "fluxfed-config"
	// VolumeCurve is the Secret with the CURVE certificate; only the init container mounts it.
	VolumeCurve = "fluxfed-curve"
	// VolumeEntrypoint is the entrypoint ConfigMap with the scripts.
	VolumeEntrypoint = "fluxfed-entrypoint"
	// VolumeMunge is the Secret of spec.flux.mungeSecret.
	VolumeMunge = "fluxfed-munge"
)

// reservedVolumes are the volume names of reservedVolume* that a spec volume may not take.
var reservedVolumes = []string{VolumeView, VolumeConfig, VolumeCurve, VolumeEntrypoint, VolumeMunge}

// File modes of the volumes fluxfed mounts.
const (
	// curveMode keeps the certificate readable by its owner only; the broker refuses anything
	// more open, and the init container copies it with the same mode.
	curveMode int32 = 0o400
	// entrypointMode makes the scripts readable and executable by any user the image runs as.
	entrypointMode int32 = 0o555
)

// Well-known Kubernetes keys.
const (
	// labelJobCompletionIndex is the label the Job controller puts on each pod of an Indexed
	// Job with its index (also used as an annotation).
	labelJobCompletionIndex = batchv1.JobCompletionIndexAnnotation
	// labelJobName is the label the Job controller puts on each pod with its Job's name.
	labelJobName = batchv1.JobNameLabel
	// annotationDefaultContainer makes kubectl logs and exec pick the container that runs
	// Flux, wherever it is in the list.
	annotationDefaultContainer = "kubectl.kubernetes.io/default-container"
	// mungeMountPath is where spec.flux.mungeSecret is mounted (munge.key inside).
	mungeMountPath = "/etc/munge"
)

// Job returns the indexed Job of the MiniCluster's broker pods, '<name>-<index>' for index 0 to
// spec.size-1. Owner references are the caller's. It returns an error for a spec the schema
// admits that cannot make a valid pod.
func Job(mc *fluxv1alpha2.MiniCluster) (*batchv1ac.JobApplyConfiguration, error) {
	if mc.FluxContainer() == nil {
		return nil, fmt.Errorf("spec.containers: no container runs Flux")
	}
	spec := &mc.Spec
	if spec.ShareProcessNamespace && spec.Pod.HostPID {
		return nil, fmt.Errorf("spec.shareProcessNamespace and spec.pod.hostPID cannot both be set: Kubernetes rejects the pod")
	}
	podSpec, err := brokerPodSpec(mc)
	if err != nil {
		return nil, err
	}
	size := max(spec.Size, 1)

	annotations := maps.Clone(spec.Pod.Annotations)
	if annotations == nil {
		annotations = map[string]string{}
	}
	if _, set := annotations[annotationDefaultContainer]; !set {
		annotations[annotationDefaultContainer] = names.FluxContainerName(mc)
	}

	jobSpec := batchv1ac.JobSpec().
		WithCompletionMode(batchv1.IndexedCompletion).
		WithCompletions(size).
		WithParallelism(size).
		WithBackoffLimit(mc.BackoffLimit()).
		// A replacement broker pod has the same hostname, and so the same rank, as the one it
		// replaces: it starts only once that one is gone, so that two brokers never claim a rank.
		WithPodReplacementPolicy(batchv1.Failed).
		WithTemplate(corev1ac.PodTemplateSpec().
			WithLabels(podLabels(mc)).
			WithAnnotations(annotations).
			WithSpec(podSpec))
	if spec.DeadlineSeconds > 0 {
		jobSpec.WithActiveDeadlineSeconds(spec.DeadlineSeconds)
	}
	endWithTheLead(mc, jobSpec)

	return batchv1ac.Job(names.JobName(mc), mc.Namespace).
		WithLabels(merge(spec.JobLabels, names.SelectorLabels(mc))).
		WithSpec(jobSpec), nil
}

// endWithTheLead makes the Job end as the lead broker's work does (docs/minicluster.md, "How a
// MiniCluster ends"):
//   - with restartPolicy Never (the default), a Flux container that exits with a status other
//     than 0 fails the Job at once (podFailurePolicy FailJob): the lead's job failed, or it was
//     stopped, or a broker could not be set up; a follower ends with 0 when it is stopped;
//   - the Job succeeds when the lead's pod (index 0) does, and its remaining pods stop
//     (successPolicy): a follower that missed the instance's shutdown does not keep the
//     MiniCluster running.
//
// A burst child has no lead: it ends when its followers do. pod.restartPolicy OnFailure keeps
// the kubelet restarting containers; Kubernetes admits no podFailurePolicy with it.
func endWithTheLead(mc *fluxv1alpha2.MiniCluster, jobSpec *batchv1ac.JobSpecApplyConfiguration) {
	if restartPolicy(mc) == corev1.RestartPolicyNever {
		jobSpec.WithPodFailurePolicy(batchv1ac.PodFailurePolicy().WithRules(
			batchv1ac.PodFailurePolicyRule().
				WithAction(batchv1.PodFailurePolicyActionFailJob).
				WithOnExitCodes(batchv1ac.PodFailurePolicyOnExitCodesRequirement().
					WithContainerName(names.FluxContainerName(mc)).
					WithOperator(batchv1.PodFailurePolicyOnExitCodesOpNotIn).
					WithValues(0))))
	}
	if !mc.IsBurstChild() {
		jobSpec.WithSuccessPolicy(batchv1ac.SuccessPolicy().WithRules(
			batchv1ac.SuccessPolicyRule().WithSucceededIndexes("0")))
	}
}

// restartPolicy is pod.restartPolicy, Never when unset.
func restartPolicy(mc *fluxv1alpha2.MiniCluster) corev1.RestartPolicy {
	if p := mc.Spec.Pod.RestartPolicy; p != "" {
		return corev1.RestartPolicy(p)
	}
	return corev1.RestartPolicyNever
}

// podLabels are the labels of every pod of the MiniCluster: spec.pod.labels, and the selector
// labels, which the user cannot override because the Services and status.selector rely on them.
func podLabels(mc *fluxv1alpha2.MiniCluster) map[string]string {
	return merge(mc.Spec.Pod.Labels, names.SelectorLabels(mc))
}

// merge returns the union of the maps, later ones winning.
func merge(ms ...map[string]string) map[string]string {
	out := map[string]string{}
	for _, m := range ms {
		maps.Copy(out, m)
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	return slices.Sorted(maps.Keys(m))
}

// brokerPodSpec is the pod spec of the indexed Job.
func brokerPodSpec(mc *fluxv1alpha2.MiniCluster) (*corev1ac.PodSpecApplyConfiguration, error) {
	spec := &mc.Spec
	vols, err := collectVolumes(spec.Containers, "spec.containers", spec.Volumes) //nolint:staticcheck // the deprecated spec.volumes keeps its meaning
	if err != nil {
		return nil, err
	}
	podSpec := corev1ac.PodSpec().WithSubdomain(mc.HeadlessName())
	if err := podOptions(mc, podSpec, false); err != nil {
		return nil, err
	}
	if !spec.Network.DisableAffinity {
		podSpec.WithAffinity(brokerAffinity(mc))
	} else if na := nodeAffinity(mc); na != nil {
		podSpec.WithAffinity(corev1ac.Affinity().WithNodeAffinity(na))
	}
	if spec.ShareProcessNamespace {
		podSpec.WithShareProcessNamespace(true)
	}

	initContainer, err := viewContainer(mc)
	if err != nil {
		return nil, err
	}
	podSpec.WithInitContainers(initContainer)
	for i := range spec.Containers {
		c, err := appContainer(mc, i)
		if err != nil {
			return nil, err
		}
		podSpec.WithContainers(c)
	}

	podSpec.WithVolumes(
		corev1ac.Volume().WithName(VolumeView).WithEmptyDir(corev1ac.EmptyDirVolumeSource()),
		corev1ac.Volume().WithName(VolumeConfig).WithConfigMap(corev1ac.ConfigMapVolumeSource().
			WithName(names.ConfigMapName(mc))),
		corev1ac.Volume().WithName(VolumeCurve).WithSecret(corev1ac.SecretVolumeSource().
			WithSecretName(names.CurveSecretName(mc)).
			WithDefaultMode(curveMode).
			WithItems(corev1ac.KeyToPath().WithKey(names.KeyCurveCert).WithPath(names.KeyCurveCert))),
		corev1ac.Volume().WithName(VolumeEntrypoint).WithConfigMap(corev1ac.ConfigMapVolumeSource().
			WithName(names.EntrypointConfigMapName(mc)).
			WithDefaultMode(entrypointMode)),
	)
	if spec.Flux.MungeSecret != "" {
		podSpec.WithVolumes(corev1ac.Volume().WithName(VolumeMunge).WithSecret(corev1ac.SecretVolumeSource().
			WithSecretName(spec.Flux.MungeSecret).
			WithDefaultMode(curveMode)))
	}
	podSpec.WithVolumes(vols...)

	podSpec.WithImagePullSecrets(pullSecrets(append(
		pullSecretNames(spec.Containers), spec.Flux.Container.ImagePullSecret)...)...)
	return podSpec, nil
}

// podOptions applies spec.pod (and spec.resourceClaims) to a pod spec; they hold for every pod
// of the MiniCluster, the services pod included.
func podOptions(mc *fluxv1alpha2.MiniCluster, podSpec *corev1ac.PodSpecApplyConfiguration, services bool) error {
	pod := &mc.Spec.Pod
	podSpec.WithRestartPolicy(restartPolicy(mc))
	if pod.RestartPolicy == "" && services {
		// The services keep the Flux Operator's default: the kubelet restarts a service that
		// fails.
		podSpec.WithRestartPolicy(corev1.RestartPolicyOnFailure)
	}
	// Set even when false: the API server's default would mount the token.
	podSpec.WithAutomountServiceAccountToken(pod.AutomountServiceAccountToken)
	if pod.ServiceAccountName != "" {
		podSpec.WithServiceAccountName(pod.ServiceAccountName)
	}
	if pod.RuntimeClassName != "" {
		podSpec.WithRuntimeClassName(pod.RuntimeClassName)
	}
	if pod.SchedulerName != "" {
		podSpec.WithSchedulerName(pod.SchedulerName)
	}
	if len(pod.NodeSelector) > 0 {
		podSpec.WithNodeSelector(pod.NodeSelector)
	}
	for _, t := range pod.Tolerations {
		tol := corev1ac.Toleration()
		if t.Key != "" {
			tol.WithKey(t.Key)
		}
		if t.Operator != "" {
			tol.WithOperator(corev1.TolerationOperator(t.Operator))
		}
		if t.Value != "" {
			tol.WithValue(t.Value)
		}
		if t.Effect != "" {
			tol.WithEffect(corev1.TaintEffect(t.Effect))
		}
		podSpec.WithTolerations(tol)
	}
	if pod.DNSPolicy != "" {
		podSpec.WithDNSPolicy(corev1.DNSPolicy(pod.DNSPolicy))
	}
	if pod.HostIPC {
		podSpec.WithHostIPC(true)
	}
	if pod.HostPID {
		podSpec.WithHostPID(true)
	}
	if pod.SecurityContext != nil {
		sc, err := convert[corev1ac.PodSecurityContextApplyConfiguration](pod.SecurityContext)
		if err != nil {
			return fmt.Errorf("spec.pod.securityContext: %w", err)
		}
		podSpec.WithSecurityContext(sc)
	}
	for i := range mc.Spec.ResourceClaims {
		claim, err := convert[corev1ac.PodResourceClaimApplyConfiguration](&mc.Spec.ResourceClaims[i])
		if err != nil {
			return fmt.Errorf("spec.resourceClaims[%d]: %w", i, err)
		}
		podSpec.WithResourceClaims(claim)
	}
	return nil
}

// brokerAffinity keeps the broker pods apart, one per node, and together in one zone, as the
// Flux Operator does. Both are preferences: a MiniCluster larger than the cluster (a kind
// cluster of one node, say) still starts, with several brokers on a node. They select only
// this MiniCluster's broker pods (not its services pod).
func brokerAffinity(mc *fluxv1alpha2.MiniCluster) *corev1ac.AffinityApplyConfiguration {
	selector := merge(names.SelectorLabels(mc), map[string]string{labelJobName: names.JobName(mc)})
	term := func(topologyKey string) *corev1ac.WeightedPodAffinityTermApplyConfiguration {
		return corev1ac.WeightedPodAffinityTerm().
			WithWeight(100).
			WithPodAffinityTerm(corev1ac.PodAffinityTerm().
				WithLabelSelector(labelSelector(selector)).
				WithTopologyKey(topologyKey))
	}
	affinity := corev1ac.Affinity().
		WithPodAffinity(corev1ac.PodAffinity().
			WithPreferredDuringSchedulingIgnoredDuringExecution(term(corev1.LabelTopologyZone))).
		WithPodAntiAffinity(corev1ac.PodAntiAffinity().
			WithPreferredDuringSchedulingIgnoredDuringExecution(term(corev1.LabelHostname)))
	if na := nodeAffinity(mc); na != nil {
		affinity.WithNodeAffinity(na)
	}
	return affinity
}

// nodeAffinity requires nodes whose labels have one of the listed values, for every key of
// spec.pod.nodeAffinity. It holds whether or not network.disableAffinity is set: that option is
// about how brokers spread, not about which nodes they may use.
func nodeAffinity(mc *fluxv1alpha2.MiniCluster) *corev1ac.NodeAffinityApplyConfiguration {
	na := mc.Spec.Pod.NodeAffinity
	if len(na) == 0 {
		return nil
	}
	term := corev1ac.NodeSelectorTerm()
	for _, key := range sortedKeys(na) {
		term.WithMatchExpressions(corev1ac.NodeSelectorRequirement().
			WithKey(key).
			WithOperator(corev1.NodeSelectorOpIn).
			WithValues(na[key]...))
	}
	return corev1ac.NodeAffinity().WithRequiredDuringSchedulingIgnoredDuringExecution(
		corev1ac.NodeSelector().WithNodeSelectorTerms(term))
}

func pullSecretNames(containers []fluxv1alpha2.Container) []string {
	var names []string
	for i := range containers {
		names = append(names, containers[i].ImagePullSecret)
	}
	return names
}

// pullSecrets returns the pull secrets of the pod, once each, in order.
func pullSecrets(names ...string) []*corev1ac.LocalObjectReferenceApplyConfiguration {
	var refs []*corev1ac.LocalObjectReferenceApplyConfiguration
	seen := map[string]bool{}
	for _, n := range names {
		if n == "" || seen[n] {
			continue
		}
		seen[n] = true
		refs = append(refs, corev1ac.LocalObjectReference().WithName(n))
	}
	return refs
}
