package member

import (
	"errors"
	"fmt"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
	"github.com/fluxfed/fluxfed/internal/report"
	"github.com/fluxfed/fluxfed/internal/text"
	"github.com/fluxfed/fluxfed/member/render/names"
)

// memberConditions are the condition types this reconciler owns. The hub owns the others
// (Bursting, BurstsReady, LeadBrokerReachable); both write status with server-side apply under
// their own field owner, so neither overwrites the other's conditions.
var memberConditions = report.Conditions{
	Types: []string{fluxv1alpha2.ConditionReady, fluxv1alpha2.ConditionComplete, fluxv1alpha2.ConditionFailed},
	// A failure warns, and so does a MiniCluster that is not Ready for another reason than
	// having finished its work.
	Warning: func(c metav1.Condition) bool {
		return (c.Type == fluxv1alpha2.ConditionFailed && c.Status == metav1.ConditionTrue) ||
			(c.Type == fluxv1alpha2.ConditionReady && c.Status == metav1.ConditionFalse && c.Reason != fluxv1alpha2.ReasonJobComplete)
	},
}

// observation is what one reconcile saw and did, the input of the status.
type observation struct {
	// job is the indexed Job as last read or applied; nil when it does not exist.
	job *batchv1.Job
	// lead is how the lead broker's container ended, once the Job has; nil before, for a burst
	// child, or when its pod is gone.
	lead *leadEnd
	// hostlist is the global rank-ordered hostlist, empty when the spec could not be rendered.
	hostlist string
	// events are what the reconcile did that the user must hear about, recorded once the
	// status is written.
	events []report.Event
}

// computeStatus returns the status fields the member reconciler owns, computed from scratch from
// what it observed and the error the reconcile ended with (see errors.go). now stamps conditions
// whose status changes.
func computeStatus(mc *fluxv1alpha2.MiniCluster, obs observation, err error, now metav1.Time) fluxv1alpha2.MiniClusterStatus {
	st := fluxv1alpha2.MiniClusterStatus{
		ObservedGeneration: mc.Generation,
		MaximumSize:        mc.MaxSize(),
		Selector:           brokerSelector(mc),
		Hostlist:           obs.hostlist,
	}
	// Keep the transition times of the conditions we own: SetStatusCondition only moves them
	// when a condition's status changes.
	for _, t := range memberConditions.Types {
		if c := meta.FindStatusCondition(mc.Status.Conditions, t); c != nil {
			st.Conditions = append(st.Conditions, *c)
		}
	}
	set := func(conditionType string, status metav1.ConditionStatus, reason, message string) {
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{
			Type: conditionType, Status: status, Reason: reason, Message: text.Truncate(message, text.MaxConditionMessage),
			ObservedGeneration: mc.Generation, LastTransitionTime: now,
		})
	}

	job := obs.job
	if job != nil {
		if job.Spec.Parallelism != nil {
			st.Size = *job.Spec.Parallelism
		}
		if job.Status.Ready != nil {
			st.Ready = *job.Status.Ready
		}
	}
	complete := job != nil && jobCondition(job, batchv1.JobComplete) != nil
	jobFailed := (*batchv1.JobCondition)(nil)
	if job != nil {
		jobFailed = jobCondition(job, batchv1.JobFailed)
	}
	// The lead's job decides how the MiniCluster ended. With pod.restartPolicy OnFailure the
	// Job completes after a failed job too: the lead's container restarted, found the job's
	// status and ended with 0.
	failedJob := ""
	if status, ok := obs.lead.jobStatus(); ok && status != 0 && complete {
		complete = false
		failedJob = obs.lead.describe()
	}
	ended := func(conditionType, reason, fallback string) string {
		if obs.lead != nil {
			return obs.lead.describe()
		}
		// The lead's pod is gone (spec.cleanup): what was read while it existed stays.
		if c := meta.FindStatusCondition(mc.Status.Conditions, conditionType); c != nil &&
			c.Status == metav1.ConditionTrue && c.Reason == reason {
			return c.Message
		}
		return fallback
	}

	var wait *waitError
	switch {
	case complete:
		set(fluxv1alpha2.ConditionReady, metav1.ConditionFalse, fluxv1alpha2.ReasonJobComplete, "the broker Job completed; its pods have finished")
	case jobFailed != nil || failedJob != "":
		set(fluxv1alpha2.ConditionReady, metav1.ConditionFalse, fluxv1alpha2.ReasonJobFailed, "the broker Job failed")
	case errors.As(err, &wait):
		// Running brokers may be ready, but nothing of the MiniCluster is applied until the wait
		// ends, and a broker pod that starts now cannot mount its certificate.
		set(fluxv1alpha2.ConditionReady, metav1.ConditionFalse, wait.reason, wait.message)
	case job == nil:
		set(fluxv1alpha2.ConditionReady, metav1.ConditionFalse, fluxv1alpha2.ReasonPodsNotReady, "the broker Job does not exist yet")
	case st.Ready >= mc.Spec.Size:
		set(fluxv1alpha2.ConditionReady, metav1.ConditionTrue, fluxv1alpha2.ReasonPodsReady, readyMessage(st.Ready, mc.Spec.Size))
	default:
		set(fluxv1alpha2.ConditionReady, metav1.ConditionFalse, fluxv1alpha2.ReasonPodsNotReady, readyMessage(st.Ready, mc.Spec.Size))
	}

	if complete {
		set(fluxv1alpha2.ConditionComplete, metav1.ConditionTrue, fluxv1alpha2.ReasonJobComplete,
			ended(fluxv1alpha2.ConditionComplete, fluxv1alpha2.ReasonJobComplete, "the lead broker finished its work"))
	} else {
		set(fluxv1alpha2.ConditionComplete, metav1.ConditionFalse, fluxv1alpha2.ReasonJobRunning, "the broker Job has not finished")
	}

	switch reason, message, failed := failureOf(err); {
	case failed:
		set(fluxv1alpha2.ConditionFailed, metav1.ConditionTrue, reason, message)
	case failedJob != "":
		set(fluxv1alpha2.ConditionFailed, metav1.ConditionTrue, fluxv1alpha2.ReasonJobFailed, failedJob)
	case jobFailed != nil:
		set(fluxv1alpha2.ConditionFailed, metav1.ConditionTrue, fluxv1alpha2.ReasonJobFailed,
			ended(fluxv1alpha2.ConditionFailed, fluxv1alpha2.ReasonJobFailed,
				fmt.Sprintf("the broker Job failed (%s): %s", jobFailed.Reason, jobFailed.Message)))
	default:
		set(fluxv1alpha2.ConditionFailed, metav1.ConditionFalse, fluxv1alpha2.ReasonJobRunning, "no failure observed")
	}
	st.Phase = phaseOf(st.Conditions)
	return st
}

// phaseOf is status.phase, the PHASE column: the first of Failed, Complete and Ready that is
// True names it, else the MiniCluster is Pending.
func phaseOf(conditions []metav1.Condition) fluxv1alpha2.MiniClusterPhase {
	switch {
	case meta.IsStatusConditionTrue(conditions, fluxv1alpha2.ConditionFailed):
		return fluxv1alpha2.MiniClusterFailed
	case meta.IsStatusConditionTrue(conditions, fluxv1alpha2.ConditionComplete):
		return fluxv1alpha2.MiniClusterComplete
	case meta.IsStatusConditionTrue(conditions, fluxv1alpha2.ConditionReady):
		return fluxv1alpha2.MiniClusterRunning
	default:
		return fluxv1alpha2.MiniClusterPending
	}
}

// readyMessage says how many of size broker pods are ready. After spec.size was lowered the Job
// still counts the pods it is stopping for a moment: they are not part of the size.
func readyMessage(ready, size int32) string {
	if extra := ready - size; extra > 0 {
		verb := "is"
		if extra > 1 {
			verb = "are"
		}
		return fmt.Sprintf("%d of %d broker pods are ready; %d more %s shutting down", size, size, extra, verb)
	}
	return fmt.Sprintf("%d of %d broker pods are ready", ready, size)
}

func jobCondition(job *batchv1.Job, t batchv1.JobConditionType) *batchv1.JobCondition {
	for i := range job.Status.Conditions {
		if c := &job.Status.Conditions[i]; c.Type == t && c.Status == corev1.ConditionTrue {
			return c
		}
	}
	return nil
}

// statusChanged reports whether the fields the member reconciler owns differ between the current
// status and the computed one, so that an unchanged MiniCluster costs no status write.
func statusChanged(current, computed fluxv1alpha2.MiniClusterStatus) bool {
	if current.ObservedGeneration != computed.ObservedGeneration || current.Size != computed.Size ||
		current.MaximumSize != computed.MaximumSize || current.Selector != computed.Selector ||
		current.Ready != computed.Ready || current.Hostlist != computed.Hostlist || current.Phase != computed.Phase {
		return true
	}
	return memberConditions.Changed(current.Conditions, computed.Conditions)
}

// brokerSelector selects the MiniCluster's broker pods, for the scale subresource: the pods of
// its indexed Job. The MiniCluster label alone would also match the spec.services pod.
func brokerSelector(mc *fluxv1alpha2.MiniCluster) string {
	set := labels.Set{batchv1.JobNameLabel: names.JobName(mc)}
	for k, v := range names.SelectorLabels(mc) {
		set[k] = v
	}
	return labels.SelectorFromSet(set).String()
}
