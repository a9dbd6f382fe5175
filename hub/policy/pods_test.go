package policy_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	fedv1alpha1 "github.com/fluxfed/fluxfed/api/fluxfed/v1alpha1"
	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
	"github.com/fluxfed/fluxfed/api/v1alpha2/v1alpha2test"
	"github.com/fluxfed/fluxfed/bursting"
	"github.com/fluxfed/fluxfed/hub/policy"
)

// child returns the child MiniCluster the hub would push for burst "burst-a" of a root whose
// spec is changed by change: the root's pod settings and containers travel to the child.
func child(t *testing.T, change func(*fluxv1alpha2.MiniClusterSpec)) *fluxv1alpha2.MiniCluster {
	t.Helper()
	root := v1alpha2test.MiniCluster("lammps").Namespace("research").Size(2).
		Burst("burst-a", 2, "member-a").Spec(change).Obj()
	plan, err := bursting.NewPlan(root, bursting.Endpoint{Address: "127.0.2.10", Port: 30050}, "hub-a")
	require.NoError(t, err)
	require.Len(t, plan.Children, 1)
	return plan.Children[0].MiniCluster
}

func securityContext(sc corev1.SecurityContext) *fluxv1alpha2.ContainerSecurityContext {
	return &fluxv1alpha2.ContainerSecurityContext{SecurityContext: sc}
}

// hardened is what a MiniCluster sets to meet restricted: every container of the pod, the
// flux view's init container included, and the pod.
func hardened(s *fluxv1alpha2.MiniClusterSpec) {
	s.Pod.SecurityContext = &corev1.PodSecurityContext{
		RunAsNonRoot:   ptr.To(true),
		RunAsUser:      ptr.To[int64](1000),
		SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
	restricted := corev1.SecurityContext{
		AllowPrivilegeEscalation: ptr.To(false),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
	}
	s.Containers[0].SecurityContext = securityContext(restricted)
	s.Flux.Container.SecurityContext = restricted.DeepCopy()
}

func TestPods(t *testing.T) {
	type check struct{ name, detail string }
	tests := []struct {
		name   string
		level  fedv1alpha1.PodSecurityLevel
		change func(*fluxv1alpha2.MiniClusterSpec)
		// want are the checks failed, each with a part of its detail.
		want []check
	}{
		{name: "a plain child meets baseline", level: fedv1alpha1.PodSecurityBaseline},
		{name: "a plain child meets the default level, baseline", level: ""},
		{name: "a privileged container", level: fedv1alpha1.PodSecurityBaseline,
			change: func(s *fluxv1alpha2.MiniClusterSpec) {
				s.Containers[0].SecurityContext = securityContext(corev1.SecurityContext{Privileged: ptr.To(true)})
			},
			want: []check{{"privileged", `container "burst-a" must not set securityContext.privileged=true`}}},
		{name: "a privileged flux view", level: fedv1alpha1.PodSecurityBaseline,
			change: func(s *fluxv1alpha2.MiniClusterSpec) {
				s.Flux.Container.SecurityContext = &corev1.SecurityContext{Privileged: ptr.To(true)}
			},
			want: []check{{"privileged", `container "flux-view"`}}},
		{name: "hostPID", level: fedv1alpha1.PodSecurityBaseline,
			change: func(s *fluxv1alpha2.MiniClusterSpec) { s.Pod.HostPID = true },
			want:   []check{{"host namespaces", "hostPID=true"}}},
		{name: "hostIPC", level: fedv1alpha1.PodSecurityBaseline,
			change: func(s *fluxv1alpha2.MiniClusterSpec) { s.Pod.HostIPC = true },
			want:   []check{{"host namespaces", "hostIPC=true"}}},
		{name: "a hostPath volume", level: fedv1alpha1.PodSecurityBaseline,
			change: func(s *fluxv1alpha2.MiniClusterSpec) {
				s.Containers[0].Volumes = map[string]fluxv1alpha2.ContainerVolume{"host": {HostPath: "/", Path: "/host"}}
			},
			want: []check{{"hostPath volumes", `volume "host"`}}},
		{name: "addCapabilities SYS_ADMIN", level: fedv1alpha1.PodSecurityBaseline,
			change: func(s *fluxv1alpha2.MiniClusterSpec) {
				s.Containers[0].SecurityContext = &fluxv1alpha2.ContainerSecurityContext{AddCapabilities: []string{"SYS_ADMIN"}}
			},
			want: []check{{"non-default capabilities", `"SYS_ADMIN"`}}},
		{name: "capabilities.add NET_ADMIN", level: fedv1alpha1.PodSecurityBaseline,
			change: func(s *fluxv1alpha2.MiniClusterSpec) {
				s.Containers[0].SecurityContext = securityContext(corev1.SecurityContext{Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"NET_ADMIN"}}})
			},
			want: []check{{"non-default capabilities", `"NET_ADMIN"`}}},
		{name: "SYS_PTRACE, the capability debuggers ask for", level: fedv1alpha1.PodSecurityBaseline,
			change: func(s *fluxv1alpha2.MiniClusterSpec) {
				s.Containers[0].SecurityContext = &fluxv1alpha2.ContainerSecurityContext{AddCapabilities: []string{"SYS_PTRACE"}}
			},
			want: []check{{"non-default capabilities", `"SYS_PTRACE"`}}},
		{name: "an unconfined seccomp profile", level: fedv1alpha1.PodSecurityBaseline,
			change: func(s *fluxv1alpha2.MiniClusterSpec) {
				s.Pod.SecurityContext = &corev1.PodSecurityContext{SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeUnconfined}}
			},
			want: []check{{"seccompProfile", "Unconfined"}}},
		{name: "an SELinux type that escapes the container", level: fedv1alpha1.PodSecurityBaseline,
			change: func(s *fluxv1alpha2.MiniClusterSpec) {
				s.Pod.SecurityContext = &corev1.PodSecurityContext{SELinuxOptions: &corev1.SELinuxOptions{Type: "spc_t"}}
			},
			want: []check{{"seLinuxOptions", "spc_t"}}},
		{name: "an unmasked /proc", level: fedv1alpha1.PodSecurityBaseline,
			change: func(s *fluxv1alpha2.MiniClusterSpec) {
				s.Containers[0].SecurityContext = securityContext(corev1.SecurityContext{ProcMount: ptr.To(corev1.UnmaskedProcMount)})
			},
			want: []check{{"procMount", "Unmasked"}}},
		{name: "an unconfined AppArmor annotation on the pods", level: fedv1alpha1.PodSecurityBaseline,
			change: func(s *fluxv1alpha2.MiniClusterSpec) {
				s.Pod.Annotations = map[string]string{"container.apparmor.security.beta.kubernetes.io/burst-a": "unconfined"}
			},
			want: []check{{"forbidden AppArmor profile", "unconfined"}}},
		{name: "all of it at once", level: fedv1alpha1.PodSecurityBaseline,
			change: func(s *fluxv1alpha2.MiniClusterSpec) {
				s.Pod.HostPID, s.Pod.HostIPC = true, true
				s.Containers[0].SecurityContext = &fluxv1alpha2.ContainerSecurityContext{
					SecurityContext: corev1.SecurityContext{Privileged: ptr.To(true)}, AddCapabilities: []string{"SYS_ADMIN"}}
				s.Containers[0].Volumes = map[string]fluxv1alpha2.ContainerVolume{"host": {HostPath: "/", Path: "/host"}}
			},
			want: []check{{"non-default capabilities", "SYS_ADMIN"}, {"host namespaces", "hostPID=true, hostIPC=true"}, {"hostPath volumes", "host"}, {"privileged", "burst-a"}}},
		{name: "a privileged member takes all of it", level: fedv1alpha1.PodSecurityPrivileged,
			change: func(s *fluxv1alpha2.MiniClusterSpec) {
				s.Pod.HostPID = true
				s.Containers[0].SecurityContext = &fluxv1alpha2.ContainerSecurityContext{
					SecurityContext: corev1.SecurityContext{Privileged: ptr.To(true)}, AddCapabilities: []string{"SYS_ADMIN"}}
				s.Containers[0].Volumes = map[string]fluxv1alpha2.ContainerVolume{"host": {HostPath: "/", Path: "/host"}}
			}},
		{name: "a restricted member refuses a plain child", level: fedv1alpha1.PodSecurityRestricted,
			want: []check{
				{"allowPrivilegeEscalation != false", `containers "flux-view", "burst-a" must set securityContext.allowPrivilegeEscalation=false`},
				{"unrestricted capabilities", `containers "flux-view", "burst-a" must set securityContext.capabilities.drop=["ALL"]`},
				{"runAsNonRoot != true", `pod or containers "flux-view", "burst-a" must set securityContext.runAsNonRoot=true`},
				{"seccompProfile", `pod or containers "flux-view", "burst-a" must set securityContext.seccompProfile.type`},
			}},
		{name: "a restricted member takes a hardened child", level: fedv1alpha1.PodSecurityRestricted, change: hardened},
		{name: "restricted: a hardened app container is not enough, the flux view counts", level: fedv1alpha1.PodSecurityRestricted,
			change: func(s *fluxv1alpha2.MiniClusterSpec) { hardened(s); s.Flux.Container.SecurityContext = nil },
			want: []check{
				{"allowPrivilegeEscalation != false", `container "flux-view" must set`},
				{"unrestricted capabilities", `container "flux-view" must set`},
			}},
		{name: "restricted: running as root", level: fedv1alpha1.PodSecurityRestricted,
			change: func(s *fluxv1alpha2.MiniClusterSpec) { hardened(s); s.Pod.SecurityContext.RunAsUser = ptr.To[int64](0) },
			want:   []check{{"runAsUser=0", "pod must not set runAsUser=0"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			change := tt.change
			if change == nil {
				change = func(*fluxv1alpha2.MiniClusterSpec) {}
			}
			mc := child(t, change)
			violations, err := policy.Pods(tt.level, mc)
			require.NoError(t, err)
			var got []check
			for _, v := range violations {
				require.Equal(t, "burst-a", v.Pod, "the Job of the brokers")
				got = append(got, check{name: v.Check, detail: v.Detail})
			}
			require.Len(t, got, len(tt.want), "violations: %v", violations)
			for i, w := range tt.want {
				require.Equal(t, w.name, got[i].name, "violations: %v", violations)
				require.Contains(t, got[i].detail, w.detail)
			}

			err = policy.PodSecurity(tt.level, mc)
			if len(tt.want) == 0 {
				require.NoError(t, err)
				return
			}
			var refusal *policy.PodSecurityError
			require.True(t, errors.As(err, &refusal), "want a *PodSecurityError, got %v", err)
			require.Equal(t, violations, refusal.Violations)
			require.Contains(t, err.Error(), "spec.podSecurity.level")
			for _, w := range tt.want {
				require.Contains(t, err.Error(), w.name)
			}
			require.LessOrEqual(t, len(err.Error()), policy.MaxMessageLength)
		})
	}
}

// TestPodsOfAllJobs checks a MiniCluster with services (a root's: a child has none): the
// services pod is checked too, and named by its Job.
func TestPodsOfAllJobs(t *testing.T) {
	mc := v1alpha2test.MiniCluster("lammps").Namespace("research").Spec(func(s *fluxv1alpha2.MiniClusterSpec) {
		s.Services = []fluxv1alpha2.Container{{Name: "db", Image: "postgres:17",
			SecurityContext: securityContext(corev1.SecurityContext{Privileged: ptr.To(true)})}}
	}).Obj()
	violations, err := policy.Pods(fedv1alpha1.PodSecurityBaseline, mc)
	require.NoError(t, err)
	require.Len(t, violations, 1)
	require.Equal(t, "lammps-services", violations[0].Pod)
	require.Equal(t, "privileged", violations[0].Check)
}

// TestPodTemplate checks what no MiniCluster can ask for today (host network, host ports), in
// case the spec grows them: the pod template itself is checked, not a list of known fields.
func TestPodTemplate(t *testing.T) {
	template := &corev1.PodTemplateSpec{Spec: corev1.PodSpec{
		HostNetwork: true,
		Containers:  []corev1.Container{{Name: "c", Image: "x", Ports: []corev1.ContainerPort{{ContainerPort: 80, HostPort: 80}}}},
	}}
	violations, err := policy.PodTemplate(fedv1alpha1.PodSecurityBaseline, "job", template)
	require.NoError(t, err)
	require.Equal(t, []policy.Violation{
		{Pod: "job", Check: "host namespaces", Detail: "hostNetwork=true"},
		{Pod: "job", Check: "hostPort", Detail: `container "c" uses hostPort 80`},
	}, violations)

	_, err = policy.PodTemplate("Baseline", "job", template)
	require.ErrorContains(t, err, `pod security level "Baseline"`, "an unknown level is an error, not a pass")
	_, err = policy.PodTemplate("none", "job", &corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Name: "x"}})
	require.Error(t, err)
}

func TestPodsOfAnInvalidMiniCluster(t *testing.T) {
	mc := child(t, func(*fluxv1alpha2.MiniClusterSpec) {})
	mc.Spec.Pod.HostPID, mc.Spec.ShareProcessNamespace = true, true
	err := policy.PodSecurity(fedv1alpha1.PodSecurityBaseline, mc)
	require.Error(t, err)
	require.False(t, errors.As(err, new(*policy.PodSecurityError)), "not a violation: %v", err)
}

func TestPodSecurityMessageIsBounded(t *testing.T) {
	err := &policy.PodSecurityError{Level: fedv1alpha1.PodSecurityBaseline}
	for range 100 {
		err.Violations = append(err.Violations, policy.Violation{Pod: "burst-a", Check: "privileged", Detail: strings.Repeat("é", 100)})
	}
	msg := err.Error()
	require.LessOrEqual(t, len(msg), policy.MaxMessageLength)
	require.True(t, strings.HasSuffix(msg, "..."))
	require.True(t, strings.ToValidUTF8(msg, "?") == msg, "cut at a rune boundary")
	require.Contains(t, msg, `level "baseline" (MemberCluster spec.podSecurity.level)`)
}

// BenchmarkPods measures checking one child: admitting it with the schema's defaults,
// rendering it and evaluating its pods.
func BenchmarkPods(b *testing.B) {
	root := v1alpha2test.MiniCluster("lammps").Namespace("research").Size(2).Burst("burst-a", 2, "member-a").Obj()
	plan, err := bursting.NewPlan(root, bursting.Endpoint{Address: "127.0.2.10", Port: 30050}, "hub-a")
	require.NoError(b, err)
	mc := plan.Children[0].MiniCluster
	for b.Loop() {
		if err := policy.PodSecurity(fedv1alpha1.PodSecurityBaseline, mc); err != nil {
			b.Fatal(err)
		}
	}
}
