package workload

import (
	"cmp"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"

	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
	"github.com/fluxfed/fluxfed/member/render/names"
	"github.com/fluxfed/fluxfed/member/render/scripts"
)

// viewContainer is the init container that provisions the shared volume (package scripts'
// provisioner). It is the only container that mounts the CURVE Secret.
func viewContainer(mc *fluxv1alpha2.MiniCluster) (*corev1ac.ContainerApplyConfiguration, error) {
	view := &mc.Spec.Flux.Container
	c := corev1ac.Container().
		WithName(cmp.Or(view.Name, DefaultViewName)).
		WithImage(cmp.Or(view.Image, DefaultViewImage)).
		WithImagePullPolicy(pullPolicy("", view.PullAlways)).
		WithCommand(scripts.ProvisionerCommand()...).
		WithVolumeMounts(
			corev1ac.VolumeMount().WithName(VolumeView).WithMountPath(names.MountPath(mc)),
			corev1ac.VolumeMount().WithName(VolumeConfig).WithMountPath(names.ConfigMountPath).WithReadOnly(true),
			corev1ac.VolumeMount().WithName(VolumeCurve).WithMountPath(names.CurveMountPath).WithReadOnly(true),
			corev1ac.VolumeMount().WithName(VolumeEntrypoint).WithMountPath(names.EntrypointMountPath).WithReadOnly(true),
		)
	if view.WorkingDir != "" {
		c.WithWorkingDir(view.WorkingDir)
	}
	if err := setResources(c, view.Resources, "spec.flux.container.resources"); err != nil {
		return nil, err
	}
	if view.SecurityContext != nil {
		sc, err := convert[corev1ac.SecurityContextApplyConfiguration](view.SecurityContext)
		if err != nil {
			return nil, fmt.Errorf("spec.flux.container.securityContext: %w", err)
		}
		c.WithSecurityContext(sc)
	}
	return c, nil
}

// appContainer is spec.containers[i] in a broker pod. Every one of them sees the shared volume
// (the other containers reach the broker through its socket there) and the entrypoints.
func appContainer(mc *fluxv1alpha2.MiniCluster, i int) (*corev1ac.ContainerApplyConfiguration, error) {
	spec := &mc.Spec.Containers[i]
	field := fmt.Sprintf("spec.containers[%d]", i)
	c, err := container(spec, names.ContainerName(mc, i), scripts.ContainerCommand(mc, i), field)
	if err != nil {
		return nil, err
	}
	c.WithVolumeMounts(
		corev1ac.VolumeMount().WithName(VolumeView).WithMountPath(names.MountPath(mc)),
		corev1ac.VolumeMount().WithName(VolumeEntrypoint).WithMountPath(names.EntrypointMountPath).WithReadOnly(true),
	)
	if mc.Spec.Flux.MungeSecret != "" && mc.FluxContainer() == spec {
		c.WithVolumeMounts(corev1ac.VolumeMount().WithName(VolumeMunge).WithMountPath(mungeMountPath).WithReadOnly(true))
	}
	c.WithVolumeMounts(volumeMounts(spec)...)
	// The entrypoints write why they ended as the termination message; a container that ends
	// otherwise shows the end of its log.
	c.WithTerminationMessagePolicy(corev1.TerminationMessageFallbackToLogsOnError)
	return c, nil
}

// serviceContainer is spec.services[i] in the services pod; it mounts the entrypoints only
// when it runs one.
func serviceContainer(mc *fluxv1alpha2.MiniCluster, i int) (*corev1ac.ContainerApplyConfiguration, error) {
	spec := &mc.Spec.Services[i]
	command := scripts.ServiceCommand(mc, i)
	c, err := container(spec, spec.Name, command, fmt.Sprintf("spec.services[%d]", i))
	if err != nil {
		return nil, err
	}
	if wrapped(command) {
		c.WithVolumeMounts(corev1ac.VolumeMount().WithName(VolumeEntrypoint).WithMountPath(names.EntrypointMountPath).WithReadOnly(true))
	}
	c.WithVolumeMounts(volumeMounts(spec)...)
	return c, nil
}

// wrapped reports whether a container command runs a rendered entrypoint.
func wrapped(command []string) bool {
	return len(command) == 2 && command[0] == "/bin/bash"
}

// container holds what every container of the spec gets, in a broker pod or the services pod.
func container(spec *fluxv1alpha2.Container, name string, command []string, field string) (*corev1ac.ContainerApplyConfiguration, error) {
	c := corev1ac.Container().
		WithName(name).
		WithImage(spec.Image).
		WithImagePullPolicy(pullPolicy(spec.ImagePullPolicy, spec.PullAlways))
	if len(command) > 0 {
		c.WithCommand(command...)
	}
	if spec.WorkingDir != "" {
		c.WithWorkingDir(spec.WorkingDir)
	}
	for _, p := range spec.Ports {
		c.WithPorts(corev1ac.ContainerPort().WithContainerPort(p).WithProtocol(corev1.ProtocolTCP))
	}
	for _, k := range sortedKeys(spec.Environment) {
		c.WithEnv(corev1ac.EnvVar().WithName(k).WithValue(spec.Environment[k]))
	}
	for _, k := range sortedKeys(spec.Secrets) {
		s := spec.Secrets[k]
		c.WithEnv(corev1ac.EnvVar().WithName(k).WithValueFrom(corev1ac.EnvVarSource().
			WithSecretKeyRef(corev1ac.SecretKeySelector().WithName(s.Name).WithKey(s.Key))))
	}
	if lc := lifecycle(spec.LifeCycle); lc != nil {
		c.WithLifecycle(lc)
	}
	if err := setResources(c, spec.Resources, field+".resources"); err != nil {
		return nil, err
	}
	if spec.SecurityContext != nil {
		sc, err := securityContext(spec.SecurityContext)
		if err != nil {
			return nil, fmt.Errorf("%s.securityContext: %w", field, err)
		}
		c.WithSecurityContext(sc)
	}
	return c, nil
}

// pullPolicy is imagePullPolicy when set, else Always for pullAlways, else IfNotPresent (the
// Flux Operator's default, whatever the image tag).
func pullPolicy(policy fluxv1alpha2.PullPolicy, always bool) corev1.PullPolicy {
	switch {
	case policy != "":
		return corev1.PullPolicy(policy)
	case always:
		return corev1.PullAlways
	default:
		return corev1.PullIfNotPresent
	}
}

// lifecycle runs each hook through /bin/sh -c, so that a hook can be a command line with
// arguments (the Flux Operator passed the whole string as the program's name).
func lifecycle(lc fluxv1alpha2.LifeCycle) *corev1ac.LifecycleApplyConfiguration {
	if lc.PostStartExec == "" && lc.PreStopExec == "" {
		return nil
	}
	out := corev1ac.Lifecycle()
	if lc.PostStartExec != "" {
		out.WithPostStart(corev1ac.LifecycleHandler().WithExec(corev1ac.ExecAction().
			WithCommand("/bin/sh", "-c", lc.PostStartExec)))
	}
	if lc.PreStopExec != "" {
		out.WithPreStop(corev1ac.LifecycleHandler().WithExec(corev1ac.ExecAction().
			WithCommand("/bin/sh", "-c", lc.PreStopExec)))
	}
	return out
}

func setResources(c *corev1ac.ContainerApplyConfiguration, r corev1.ResourceRequirements, field string) error {
	if len(r.Limits) == 0 && len(r.Requests) == 0 && len(r.Claims) == 0 {
		return nil
	}
	res, err := convert[corev1ac.ResourceRequirementsApplyConfiguration](&r)
	if err != nil {
		return fmt.Errorf("%s: %w", field, err)
	}
	c.WithResources(res)
	return nil
}

// securityContext is the container's security context with addCapabilities merged into
// capabilities.add.
func securityContext(sc *fluxv1alpha2.ContainerSecurityContext) (*corev1ac.SecurityContextApplyConfiguration, error) {
	typed := sc.SecurityContext.DeepCopy()
	for _, name := range sc.AddCapabilities {
		if typed.Capabilities == nil {
			typed.Capabilities = &corev1.Capabilities{}
		}
		capability := corev1.Capability(name)
		if !slices.Contains(typed.Capabilities.Add, capability) {
			typed.Capabilities.Add = append(typed.Capabilities.Add, capability)
		}
	}
	return convert[corev1ac.SecurityContextApplyConfiguration](typed)
}
