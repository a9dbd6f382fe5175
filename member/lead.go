package member

import (
	"context"
	"fmt"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
	"github.com/fluxfed/fluxfed/member/render/names"
	"github.com/fluxfed/fluxfed/member/render/scripts"
)

// leadEnd is how the lead broker's container ended, as its pod reports it.
type leadEnd struct {
	pod      string
	exitCode int32
	// message is the container's termination message: why the entrypoint says it ended.
	message string
}

// jobStatus returns the exit status of the lead broker's job when the termination message
// reports one (scripts.JobStatusMessage); a lead that is not known (nil) reports none.
func (l *leadEnd) jobStatus() (int, bool) {
	if l == nil {
		return 0, false
	}
	var status int
	if _, err := fmt.Sscanf(l.message, scripts.JobStatusMessage, &status); err != nil {
		return 0, false
	}
	return status, true
}

// describe says how the lead ended, for a condition's message.
func (l *leadEnd) describe() string {
	if l.message == "" {
		return fmt.Sprintf("the Flux container of pod %s exited with code %d", l.pod, l.exitCode)
	}
	return fmt.Sprintf("%s (pod %s, exit code %d)", l.message, l.pod, l.exitCode)
}

// readLeadEnd reads how the lead broker's container ended once the Job has, from the pod of
// completion index 0 whose Flux container terminated last. It returns nil for a burst child
// (no lead), a Job that has not ended, or when no such pod is left (spec.cleanup deleted it).
func (r *Reconciler) readLeadEnd(ctx context.Context, mc *fluxv1alpha2.MiniCluster, job *batchv1.Job) (*leadEnd, error) {
	if mc.IsBurstChild() || job == nil ||
		(jobCondition(job, batchv1.JobComplete) == nil && jobCondition(job, batchv1.JobFailed) == nil) {
		return nil, nil
	}
	pods := &corev1.PodList{}
	if err := r.apiReader.List(ctx, pods, client.InNamespace(mc.Namespace), client.MatchingLabels{
		batchv1.JobNameLabel: job.Name,
		// The pods carry the completion index as a label too.
		batchv1.JobCompletionIndexAnnotation: "0",
	}); err != nil {
		return nil, fmt.Errorf("reading the lead broker's pod: %w", err)
	}
	container := names.FluxContainerName(mc)
	var end *leadEnd
	var at int64
	for i := range pods.Items {
		p := &pods.Items[i]
		if !metav1.IsControlledBy(p, job) {
			continue
		}
		for _, cs := range p.Status.ContainerStatuses {
			if cs.Name != container {
				continue
			}
			for _, t := range []*corev1.ContainerStateTerminated{cs.State.Terminated, cs.LastTerminationState.Terminated} {
				if t == nil || t.FinishedAt.Unix() < at {
					continue
				}
				at = t.FinishedAt.Unix()
				end = &leadEnd{pod: p.Name, exitCode: t.ExitCode, message: lastLine(t.Message)}
				break
			}
		}
	}
	return end, nil
}

// lastLine is the last line of a termination message that is not blank: the entrypoint's own
// message, or the last line of the log when the container ended without one.
func lastLine(message string) string {
	lines := strings.Split(strings.TrimSpace(message), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}
