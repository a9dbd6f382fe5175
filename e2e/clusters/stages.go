package clusters

import (
	"bytes"
	_ "embed"
	"fmt"
	"slices"
	"strings"
	"text/template"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// AnnotationExitCode on a Running pod of a local cluster makes kwok finish the pod: "0" makes it
// Succeeded, any other value Failed with that exit code (1 when the value is not a number). Without
// it a pod stays Running and Ready. Kind clusters run real containers and ignore it.
const AnnotationExitCode = "e2e.fluxfed.io/exit-code"

// AnnotationStopExitCode on a pod of a local cluster is the exit code its containers end with when
// the pod is deleted, as a program that handles SIGTERM would: "0" makes the pod Succeeded, any
// other value Failed with that code (1 when the value is not a number), and then the pod goes.
// Without it a deleted pod goes at once, with no terminal phase, as one killed would.
const AnnotationStopExitCode = "e2e.fluxfed.io/exit-code-on-stop"

// AnnotationTerminationMessage on a pod of a local cluster is the termination message of its
// containers when they end, through either annotation above: what a container's program would
// have written to its terminationMessagePath.
const AnnotationTerminationMessage = "e2e.fluxfed.io/termination-message"

// AnnotationRealContainers on a pod of a local cluster says that its containers run for real on
// this machine (e2e/realflux): deleted, the pod is not deleted at once, but once its containers
// ended and AnnotationStopExitCode says how, as a kubelet waits for a pod's containers to stop.
const AnnotationRealContainers = "e2e.fluxfed.io/real-containers"

// annotationKwokNode marks the nodes that kwok manages (--manage-nodes-with-annotation-selector);
// the key is kwok's own convention.
const (
	annotationKwokNode = "kwok.x-k8s.io/node"
	kwokNodeValue      = "fake"
)

// nodeResources is what every simulated node offers: room for tens of MiniCluster pods. The
// scheduler places pods by these numbers; nothing is actually consumed.
var nodeResources = corev1.ResourceList{
	corev1.ResourceCPU:              resource.MustParse("32"),
	corev1.ResourceMemory:           resource.MustParse("128Gi"),
	corev1.ResourcePods:             resource.MustParse("110"),
	corev1.ResourceEphemeralStorage: resource.MustParse("500Gi"),
}

//go:embed stages.yaml.tmpl
var stagesTemplateText string

// stagesTemplate uses [[ ]] so that kwok's own {{ }} templates pass through untouched.
var stagesTemplate = template.Must(template.New("stages").Delims("[[", "]]").Parse(stagesTemplateText))

// stageParams fill in the stages template.
type stageParams struct {
	// Resources are the allocatable and capacity of a node created without them.
	Resources []namedQuantity
	// ExitCodeAnnotation, StopExitCodeAnnotation, MessageAnnotation and RealAnnotation are
	// AnnotationExitCode, AnnotationStopExitCode, AnnotationTerminationMessage and
	// AnnotationRealContainers.
	ExitCodeAnnotation, StopExitCodeAnnotation, MessageAnnotation, RealAnnotation string
	// HeartbeatMillis and HeartbeatJitterMillis space the refreshes of a Ready node's conditions.
	HeartbeatMillis, HeartbeatJitterMillis int64
}

type namedQuantity struct {
	Name, Value string
}

// renderStages returns the file kwok reads with --config: its options and the Stage objects that
// drive nodes and pods.
func renderStages(resources corev1.ResourceList) ([]byte, error) {
	p := stageParams{
		ExitCodeAnnotation:     AnnotationExitCode,
		StopExitCodeAnnotation: AnnotationStopExitCode,
		MessageAnnotation:      AnnotationTerminationMessage,
		RealAnnotation:         AnnotationRealContainers,
		// kwok renews the node Leases, which is what keeps a node Ready; the status refresh only
		// keeps lastHeartbeatTime plausible for people reading `kubectl describe node`.
		HeartbeatMillis:       300_000,
		HeartbeatJitterMillis: 360_000,
	}
	for name, q := range resources {
		p.Resources = append(p.Resources, namedQuantity{Name: string(name), Value: q.String()})
	}
	slices.SortFunc(p.Resources, func(a, b namedQuantity) int { return strings.Compare(a.Name, b.Name) })
	var buf bytes.Buffer
	if err := stagesTemplate.Execute(&buf, p); err != nil {
		return nil, fmt.Errorf("rendering the kwok stages: %w", err)
	}
	return buf.Bytes(), nil
}
