package clusters

import (
	"bytes"
	"encoding/json"
	"flag"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"text/template"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

func TestRenderStagesGolden(t *testing.T) {
	got, err := renderStages(nodeResources)
	require.NoError(t, err)
	path := filepath.Join("testdata", "kwok-stages.golden.yaml")
	if *update {
		require.NoError(t, os.WriteFile(path, got, 0o644))
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "run go test -update to create %s", path)
	require.Equal(t, string(want), string(got))
}

// kwokDoc is the part of a kwok configuration document the tests look at.
type kwokDoc struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Options map[string]any `json:"options"`
	Spec    struct {
		ResourceRef struct {
			APIGroup string `json:"apiGroup"`
			Kind     string `json:"kind"`
		} `json:"resourceRef"`
		Selector struct {
			MatchExpressions []struct {
				Key      string   `json:"key"`
				Operator string   `json:"operator"`
				Values   []string `json:"values"`
			} `json:"matchExpressions"`
		} `json:"selector"`
		Delay *struct {
			DurationMilliseconds       int64 `json:"durationMilliseconds"`
			JitterDurationMilliseconds int64 `json:"jitterDurationMilliseconds"`
		} `json:"delay"`
		Next struct {
			StatusTemplate string `json:"statusTemplate"`
			Delete         bool   `json:"delete"`
		} `json:"next"`
	} `json:"spec"`
}

func parseStages(t *testing.T) map[string]kwokDoc {
	t.Helper()
	data, err := renderStages(nodeResources)
	require.NoError(t, err)
	docs := map[string]kwokDoc{}
	for _, raw := range strings.Split(string(data), "\n---\n") {
		var d kwokDoc
		require.NoError(t, yaml.UnmarshalStrict([]byte(raw), &d), raw)
		docs[d.Kind+"/"+d.Metadata.Name] = d
	}
	return docs
}

func TestStagesConfig(t *testing.T) {
	docs := parseStages(t)
	names := make([]string, 0, len(docs))
	for name := range docs {
		names = append(names, name)
	}
	require.ElementsMatch(t, []string{
		"KwokConfiguration/fluxfed-e2e",
		"Stage/fluxfed-node-initialize",
		"Stage/fluxfed-node-heartbeat",
		"Stage/fluxfed-pod-running",
		"Stage/fluxfed-pod-succeeded",
		"Stage/fluxfed-pod-failed",
		"Stage/fluxfed-pod-stopped",
		"Stage/fluxfed-pod-delete",
		"Stage/fluxfed-pod-delete-ended",
		"Stage/fluxfed-pod-delete-stopped",
	}, names)
	conf := docs["KwokConfiguration/fluxfed-e2e"]
	require.Equal(t, "config.kwok.x-k8s.io/v1alpha1", conf.APIVersion)
	require.InDelta(t, 1, conf.Options["podPlayStageParallelism"], 0, "one pod worker, or pods share IPs")
	for name, d := range docs {
		if d.Kind != "Stage" {
			continue
		}
		require.Equal(t, "kwok.x-k8s.io/v1alpha1", d.APIVersion, name)
		require.Equal(t, "v1", d.Spec.ResourceRef.APIGroup, name)
		require.NotEmpty(t, d.Spec.Selector.MatchExpressions, name)
		require.True(t, d.Spec.Next.Delete || d.Spec.Next.StatusTemplate != "", name)
	}
	// The finishing stages react to the documented annotation and to nothing else.
	for _, name := range []string{"Stage/fluxfed-pod-succeeded", "Stage/fluxfed-pod-failed"} {
		var keys []string
		for _, e := range docs[name].Spec.Selector.MatchExpressions {
			keys = append(keys, e.Key)
		}
		require.Contains(t, keys, `.metadata.annotations["`+AnnotationExitCode+`"]`, name)
	}
	// A deleted pod matches exactly one of the stages that handle deletion, whatever its phase
	// and annotations: kwok would otherwise pick one of them at random. The one exception is a
	// running pod whose containers run for real and have not stopped yet: it waits for them.
	deleting := []string{"Stage/fluxfed-pod-stopped", "Stage/fluxfed-pod-delete", "Stage/fluxfed-pod-delete-ended", "Stage/fluxfed-pod-delete-stopped"}
	for _, phase := range []corev1.PodPhase{corev1.PodPending, corev1.PodRunning, corev1.PodSucceeded, corev1.PodFailed} {
		for _, stop := range []bool{false, true} {
			for _, real := range []bool{false, true} {
				var matched []string
				for _, name := range deleting {
					if selects(t, docs[name], phase, stop, real) {
						matched = append(matched, name)
					}
				}
				want := 1
				if real && phase == corev1.PodRunning && !stop {
					want = 0
				}
				require.Len(t, matched, want, "a deleted %s pod, stop annotation %v, real containers %v", phase, stop, real)
			}
		}
	}
	require.True(t, selects(t, docs["Stage/fluxfed-pod-stopped"], corev1.PodRunning, true, true))
}

// selects evaluates the selector of a stage that handles deleted pods against a deleted pod in
// phase, with or without AnnotationStopExitCode and AnnotationRealContainers.
func selects(t *testing.T, stage kwokDoc, phase corev1.PodPhase, stop, real bool) bool {
	t.Helper()
	for _, e := range stage.Spec.Selector.MatchExpressions {
		var present bool
		var value string
		switch e.Key {
		case ".metadata.deletionTimestamp":
			present = true
		case ".status.phase":
			present, value = true, string(phase)
		case `.metadata.annotations["` + AnnotationStopExitCode + `"]`:
			present, value = stop, "0"
		case `.metadata.annotations["` + AnnotationRealContainers + `"]`:
			present, value = real, "true"
		default:
			t.Fatalf("%s: a selector on %s that this test does not know", stage.Metadata.Name, e.Key)
		}
		var ok bool
		switch e.Operator {
		case "Exists":
			ok = present
		case "DoesNotExist":
			ok = !present
		case "In":
			ok = present && slices.Contains(e.Values, value)
		case "NotIn":
			ok = !present || !slices.Contains(e.Values, value)
		default:
			t.Fatalf("%s: operator %s", stage.Metadata.Name, e.Operator)
		}
		if !ok {
			return false
		}
	}
	return true
}

// kwokFuncs stand in for the template functions kwok gives stage templates, enough to render them
// as kwok would.
// testPodIP is an address of node 2's pod range in the first cluster, as kwok would give one.
var testPodIP = netip.MustParsePrefix(planFor(0).podCIDR(2)).Addr().Next().String()

var kwokFuncs = template.FuncMap{
	"Now":     func() string { return "2026-01-02T03:04:05Z" },
	"Version": func() string { return "v0.8.0" },
	"Quote": func(v any) string {
		data, err := json.Marshal(v)
		if err != nil || len(data) == 0 || data[0] != '"' {
			return strconv.Quote(string(data))
		}
		return string(data)
	},
	"NodeConditions": func() []map[string]any {
		return []map[string]any{
			{"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "ready"},
			{"type": "MemoryPressure", "status": "False", "reason": "KubeletHasSufficientMemory", "message": "ok"},
		}
	},
	"NodeIPsWith": func(string) []string { return []string{"127.101.0.2"} },
	"PodIPsWith":  func(string, bool, string, string, string) []string { return []string{testPodIP} },
	"dict":        func() map[string]any { return map[string]any{} },
	"atoi": func(s string) int {
		i, _ := strconv.Atoi(s)
		return i
	},
}

// renderStatus renders a stage's status template against obj the way kwok does (the object as
// JSON numbers-as-strings data) and decodes the result into status.
func renderStatus(t *testing.T, stage kwokDoc, obj, status any) {
	t.Helper()
	tmpl, err := template.New("status").Funcs(kwokFuncs).Parse(strings.TrimSpace(stage.Spec.Next.StatusTemplate))
	require.NoError(t, err)
	raw, err := json.Marshal(obj)
	require.NoError(t, err)
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var data any
	require.NoError(t, dec.Decode(&data))
	var out bytes.Buffer
	require.NoError(t, tmpl.Execute(&out, data))
	require.NoError(t, yaml.UnmarshalStrict(out.Bytes(), status), out.String())
}

func TestPodStages(t *testing.T) {
	docs := parseStages(t)
	start := metav1.Date(2026, 1, 1, 0, 0, 0, 0, metav1.Now().Location())
	pod := func(annotations ...string) *corev1.Pod {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "mc-0", Namespace: "default", UID: "u1"},
			Spec: corev1.PodSpec{
				NodeName: "hub-node-2",
				InitContainers: []corev1.Container{
					{Name: "setup", Image: "setup:1"},
					{Name: "sidecar", Image: "side:1", RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways)},
				},
				Containers:     []corev1.Container{{Name: "broker", Image: "flux:1"}, {Name: "log", Image: "log:1"}},
				ReadinessGates: []corev1.PodReadinessGate{{ConditionType: "example.com/gate"}},
			},
			Status: corev1.PodStatus{Phase: corev1.PodRunning, StartTime: &start},
		}
		for i := 0; i+1 < len(annotations); i += 2 {
			metav1.SetMetaDataAnnotation(&p.ObjectMeta, annotations[i], annotations[i+1])
		}
		return p
	}
	condition := func(s corev1.PodStatus, typ corev1.PodConditionType) corev1.ConditionStatus {
		for _, c := range s.Conditions {
			if c.Type == typ {
				return c.Status
			}
		}
		return ""
	}

	t.Run("running", func(t *testing.T) {
		p := pod()
		p.Status = corev1.PodStatus{Phase: corev1.PodPending}
		var s corev1.PodStatus
		renderStatus(t, docs["Stage/fluxfed-pod-running"], p, &s)
		require.Equal(t, corev1.PodRunning, s.Phase)
		require.Equal(t, corev1.ConditionTrue, condition(s, corev1.PodReady))
		require.Equal(t, corev1.ConditionTrue, condition(s, "example.com/gate"))
		require.Equal(t, testPodIP, s.PodIP)
		require.Equal(t, "127.101.0.2", s.HostIP)
		require.Len(t, s.ContainerStatuses, 2)
		for _, c := range s.ContainerStatuses {
			require.True(t, c.Ready, c.Name)
			require.NotNil(t, c.State.Running, c.Name)
		}
		require.Len(t, s.InitContainerStatuses, 2)
		require.NotNil(t, s.InitContainerStatuses[0].State.Terminated, "a plain init container has finished")
		require.NotNil(t, s.InitContainerStatuses[1].State.Running, "a sidecar runs")
	})

	const message = "the job exited with status 3"
	for _, tc := range []struct {
		name        string
		stage       string
		annotations []string
		phase       corev1.PodPhase
		exitCode    int32
		message     string
	}{
		{"succeeded", "Stage/fluxfed-pod-succeeded", []string{AnnotationExitCode, "0"}, corev1.PodSucceeded, 0, ""},
		{"failed 3", "Stage/fluxfed-pod-failed", []string{AnnotationExitCode, "3"}, corev1.PodFailed, 3, ""},
		{"failed 137", "Stage/fluxfed-pod-failed", []string{AnnotationExitCode, "137"}, corev1.PodFailed, 137, ""},
		{"failed not a number", "Stage/fluxfed-pod-failed", []string{AnnotationExitCode, "oops"}, corev1.PodFailed, 1, ""},
		{"failed with a message", "Stage/fluxfed-pod-failed", []string{AnnotationExitCode, "3", AnnotationTerminationMessage, message}, corev1.PodFailed, 3, message},
		{"succeeded with a message", "Stage/fluxfed-pod-succeeded", []string{AnnotationExitCode, "0", AnnotationTerminationMessage, `"quoted": yes`}, corev1.PodSucceeded, 0, `"quoted": yes`},
		{"stopped 0", "Stage/fluxfed-pod-stopped", []string{AnnotationStopExitCode, "0"}, corev1.PodSucceeded, 0, ""},
		{"stopped 143", "Stage/fluxfed-pod-stopped", []string{AnnotationStopExitCode, "143", AnnotationTerminationMessage, "stopped"}, corev1.PodFailed, 143, "stopped"},
		{"stopped not a number", "Stage/fluxfed-pod-stopped", []string{AnnotationStopExitCode, "zero"}, corev1.PodFailed, 1, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var s corev1.PodStatus
			renderStatus(t, docs[tc.stage], pod(tc.annotations...), &s)
			require.Equal(t, tc.phase, s.Phase)
			require.Equal(t, corev1.ConditionFalse, condition(s, corev1.PodReady))
			require.Len(t, s.ContainerStatuses, 2)
			for _, c := range s.ContainerStatuses {
				require.Nil(t, c.State.Running, c.Name)
				require.NotNil(t, c.State.Terminated, c.Name)
				require.Equal(t, tc.exitCode, c.State.Terminated.ExitCode, c.Name)
				require.Equal(t, tc.message, c.State.Terminated.Message, c.Name)
				require.Equal(t, start.UTC(), c.State.Terminated.StartedAt.UTC(), c.Name)
			}
		})
	}
}

func TestNodeStages(t *testing.T) {
	docs := parseStages(t)

	t.Run("initialize keeps what the node was created with", func(t *testing.T) {
		n := simulatedNode("hub", planFor(0), 1)
		var s corev1.NodeStatus
		renderStatus(t, docs["Stage/fluxfed-node-initialize"], n, &s)
		require.Equal(t, corev1.NodeRunning, s.Phase)
		require.True(t, nodeReady(&corev1.Node{Status: s}))
		require.Nil(t, s.Addresses, "unchanged")
		require.Nil(t, s.Allocatable, "unchanged")
		require.Equal(t, "linux", s.NodeInfo.OperatingSystem)
	})

	t.Run("initialize fills in a bare node", func(t *testing.T) {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "bare"}}
		var s corev1.NodeStatus
		renderStatus(t, docs["Stage/fluxfed-node-initialize"], n, &s)
		require.Equal(t, []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: "bare"}}, s.Addresses)
		for name, q := range nodeResources {
			require.Zero(t, q.Cmp(s.Allocatable[name]), name)
			require.Zero(t, q.Cmp(s.Capacity[name]), name)
		}
	})

	t.Run("heartbeat", func(t *testing.T) {
		n := simulatedNode("hub", planFor(0), 1)
		var s corev1.NodeStatus
		renderStatus(t, docs["Stage/fluxfed-node-heartbeat"], n, &s)
		require.True(t, nodeReady(&corev1.Node{Status: s}))
		require.Empty(t, s.Phase, "only conditions")
	})
}
