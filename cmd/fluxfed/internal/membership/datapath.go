package membership

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
	"github.com/fluxfed/fluxfed/hub/probe"
)

// DefaultCheckTimeout bounds the data-path check: the pod must have run and ended within it.
const DefaultCheckTimeout = 60 * time.Second

// ProbeTimeout bounds the greeting of one endpoint from the check's pod.
const ProbeTimeout = 5 * time.Second

// ManagerDeployment is the Deployment of fluxfed's manager on a cluster, whose image the
// data-path check runs.
const ManagerDeployment = "fluxfed-manager"

// maxRootEndpoints is how many lead broker endpoints of the hub's roots the check tries, at most.
const maxRootEndpoints = 3

// ProbeCommand is the hidden command of fluxfed the check's pod runs: `fluxfed member probe
// HOST:PORT...`.
var ProbeCommand = []string{"/fluxfed", "member", "probe"}

// terminationLog is where a container's program writes what its pod's status carries back.
const terminationLog = "/dev/termination-log"

// DataPath is the result of the data-path check.
type DataPath struct {
	// Checked is true when a pod on the member ran the check; Why says why not otherwise.
	Checked bool
	Why     string
	// Endpoints are the endpoints the check was for.
	Endpoints []string
	// Report is what the pod reported, one line per endpoint.
	Report []string
	// OK is true when every endpoint answered as a Flux broker.
	OK bool
}

// Probe greets every endpoint (HOST:PORT) as the hub greets a lead broker, writes one line per
// endpoint to w, and returns an error naming those that did not answer as a Flux broker. It is
// what the data-path check's pod runs on the member.
func Probe(ctx context.Context, endpoints []string, w io.Writer) error {
	var failed []string
	for _, e := range endpoints {
		host, port, err := splitEndpoint(e)
		if err == nil {
			gctx, cancel := context.WithTimeout(ctx, ProbeTimeout)
			err = probe.Greet(gctx, host, port)
			cancel()
		}
		if err != nil {
			failed = append(failed, e)
			fmt.Fprintf(w, "%s: no Flux broker answers from the member: %v\n", e, err)
			continue
		}
		fmt.Fprintf(w, "%s: answers as a Flux broker (ZMTP, CURVE)\n", e)
	}
	if len(failed) > 0 {
		return fmt.Errorf("%d of %d endpoints did not answer as a Flux broker: %s", len(failed), len(endpoints), strings.Join(failed, ", "))
	}
	return nil
}

// ProbeAndRecord runs Probe and also writes its report where the pod's status carries it back
// (the container's termination message), when that file exists.
func ProbeAndRecord(ctx context.Context, endpoints []string, w io.Writer) error {
	var report strings.Builder
	err := Probe(ctx, endpoints, io.MultiWriter(w, &report))
	if f, openErr := os.OpenFile(terminationLog, os.O_WRONLY|os.O_TRUNC, 0); openErr == nil {
		_, _ = f.WriteString(report.String())
		_ = f.Close()
	}
	return err
}

func splitEndpoint(e string) (string, int32, error) {
	host, p, err := net.SplitHostPort(e)
	if err != nil {
		return "", 0, fmt.Errorf("%q is not HOST:PORT: %w", e, err)
	}
	port, err := strconv.ParseInt(p, 10, 32)
	if err != nil || port < 1 || port > 65535 {
		return "", 0, fmt.Errorf("%q: port %q is not a TCP port (1-65535)", e, p)
	}
	return host, int32(port), nil
}

// ValidateEndpoints checks --check-endpoint values before anything is done.
func ValidateEndpoints(endpoints []string) error {
	for _, e := range endpoints {
		if _, _, err := splitEndpoint(e); err != nil {
			return fmt.Errorf("--check-endpoint %w", err)
		}
	}
	return nil
}

// rootEndpoints returns the lead broker endpoints the hub advertises for its roots now, at most
// maxRootEndpoints, in order.
func rootEndpoints(ctx context.Context, hubClient client.Client) []string {
	var list fluxv1alpha2.MiniClusterList
	if err := hubClient.List(ctx, &list); err != nil {
		return nil
	}
	var out []string
	for _, mc := range list.Items {
		if lb := mc.Status.LeadBroker; lb != nil && lb.Endpoint != "" && !slices.Contains(out, lb.Endpoint) {
			out = append(out, lb.Endpoint)
		}
	}
	slices.Sort(out)
	return out[:min(len(out), maxRootEndpoints)]
}

// checkDataPath runs a pod on the member, in namespace ns, that greets every endpoint as the
// hub greets a lead broker, and returns what it reported. It ends within o.CheckTimeout: a pod
// that does not run (no image, a cluster whose pods never start) is reported as not checked,
// with why. The pod is deleted in every case.
func checkDataPath(ctx context.Context, member client.Client, o Options, ns string, endpoints []string) DataPath {
	res := DataPath{Endpoints: endpoints}
	image := o.CheckImage
	if image == "" {
		dep := &appsv1.Deployment{}
		err := member.Get(ctx, client.ObjectKey{Namespace: AccessNamespace, Name: ManagerDeployment}, dep)
		switch {
		case apierrors.IsNotFound(err):
			res.Why = fmt.Sprintf("no Deployment %s/%s on the member, whose fluxfed image the check runs: is fluxfed installed there? (--check-image IMAGE names one)",
				AccessNamespace, ManagerDeployment)
			return res
		case err != nil:
			res.Why = fmt.Sprintf("reading Deployment %s/%s on the member: %v", AccessNamespace, ManagerDeployment, err)
			return res
		case len(dep.Spec.Template.Spec.Containers) == 0:
			res.Why = fmt.Sprintf("Deployment %s/%s on the member has no container", AccessNamespace, ManagerDeployment)
			return res
		}
		image = dep.Spec.Template.Spec.Containers[0].Image
	}
	ctx, cancel := context.WithTimeout(ctx, o.CheckTimeout)
	defer cancel()
	pod := checkPod(ns, image, endpoints, o.CheckTimeout)
	if err := member.Create(ctx, pod); err != nil {
		res.Why = fmt.Sprintf("creating a pod in namespace %s of the member: %v", ns, err)
		return res
	}
	defer func() {
		// A fresh context: the check's may be over.
		dctx, dcancel := context.WithTimeout(context.Background(), DefaultReachTimeout)
		defer dcancel()
		_ = member.Delete(dctx, pod, client.GracePeriodSeconds(0), client.PropagationPolicy(metav1.DeletePropagationBackground))
	}()
	where := fmt.Sprintf("pod %s/%s (image %s)", ns, pod.Name, image)
	for {
		got := &corev1.Pod{}
		err := member.Get(ctx, client.ObjectKeyFromObject(pod), got)
		if err == nil {
			if done, why := podOutcome(got, &res); done {
				if why != "" {
					res.Why = where + ": " + why
				}
				return res
			}
		}
		select {
		case <-ctx.Done():
			phase := "not read"
			if err == nil {
				phase = podSummary(got)
			}
			res.Why = fmt.Sprintf("%s did not finish within %v (%s): the member's pods may not start (no node can run it, the image is not pullable, or a simulated cluster that runs no containers)",
				where, o.CheckTimeout, phase)
			return res
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// podOutcome reads what the check's pod says once it ended, or why it never will.
func podOutcome(pod *corev1.Pod, res *DataPath) (done bool, why string) {
	for _, cs := range pod.Status.ContainerStatuses {
		if w := cs.State.Waiting; w != nil && slices.Contains([]string{"ErrImagePull", "ImagePullBackOff", "InvalidImageName", "CreateContainerConfigError", "CreateContainerError"}, w.Reason) {
			return true, fmt.Sprintf("its container cannot start: %s: %s", w.Reason, w.Message)
		}
		t := cs.State.Terminated
		if t == nil || (pod.Status.Phase != corev1.PodSucceeded && pod.Status.Phase != corev1.PodFailed) {
			continue
		}
		lines := strings.Split(strings.TrimSpace(t.Message), "\n")
		if len(lines) == 1 && lines[0] == "" {
			return true, fmt.Sprintf("it ended with exit code %d and reported nothing (is the image's fluxfed older than this one, without `member probe`?)", t.ExitCode)
		}
		res.Checked, res.Report, res.OK = true, lines, t.ExitCode == 0
		return true, ""
	}
	if pod.Status.Phase == corev1.PodFailed {
		return true, fmt.Sprintf("it failed: %s %s", pod.Status.Reason, pod.Status.Message)
	}
	return false, ""
}

func podSummary(pod *corev1.Pod) string {
	s := "phase " + string(pod.Status.Phase)
	if pod.Spec.NodeName == "" {
		s += ", not scheduled"
	}
	return s
}

// checkPod is the pod of the data-path check: the fluxfed image greeting the endpoints, under
// the restricted pod security standard, gone after timeout whatever happens.
func checkPod(ns, image string, endpoints []string, timeout time.Duration) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName: "fluxfed-data-path-check-",
			Namespace:    ns,
			Labels:       map[string]string{LabelManagedBy: ManagedByCLI},
		},
		Spec: corev1.PodSpec{
			RestartPolicy:                 corev1.RestartPolicyNever,
			ActiveDeadlineSeconds:         ptr.To(int64(max(timeout/time.Second, 1))),
			AutomountServiceAccountToken:  ptr.To(false),
			TerminationGracePeriodSeconds: ptr.To(int64(0)),
			SecurityContext: &corev1.PodSecurityContext{
				RunAsNonRoot:   ptr.To(true),
				RunAsUser:      ptr.To(int64(65532)),
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			},
			Containers: []corev1.Container{{
				Name:                     "check",
				Image:                    image,
				Command:                  append(slices.Clone(ProbeCommand), endpoints...),
				TerminationMessagePolicy: corev1.TerminationMessageReadFile,
				SecurityContext: &corev1.SecurityContext{
					AllowPrivilegeEscalation: ptr.To(false),
					ReadOnlyRootFilesystem:   ptr.To(true),
					Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
				},
			}},
		},
	}
}

// ErrDataPath is returned (wrapped) by Add when the data-path check ran and an endpoint did not
// answer as a Flux broker from the member.
var ErrDataPath = errors.New("the member's pods cannot reach the lead broker")
