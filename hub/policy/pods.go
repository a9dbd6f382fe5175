package policy

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	batchv1ac "k8s.io/client-go/applyconfigurations/batch/v1"
	psaapi "k8s.io/pod-security-admission/api"
	psapolicy "k8s.io/pod-security-admission/policy"
	"sigs.k8s.io/yaml"

	fedv1alpha1 "github.com/fluxfed/fluxfed/api/fluxfed/v1alpha1"
	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
	"github.com/fluxfed/fluxfed/internal/text"
	"github.com/fluxfed/fluxfed/member/admit"
	"github.com/fluxfed/fluxfed/member/render"
)

// MaxMessageLength bounds every message of this package, in bytes: an event's message holds at
// most 1024 characters, and the hub may prefix a burst's and a member's name.
const MaxMessageLength = 900

// Violation is one Pod Security Standards check that a pod fails.
type Violation struct {
	// Pod names the pods that fail: the Job that runs them.
	Pod string
	// Check is the check's name as Pod Security Admission reports it, e.g. "privileged",
	// "host namespaces", "hostPath volumes", "non-default capabilities", "runAsNonRoot != true".
	Check string
	// Detail says what fails it, e.g. `container "flux-view" must set
	// securityContext.allowPrivilegeEscalation=false`; it may be empty.
	Detail string
}

// String returns "Job <pod>: <check> (<detail>)".
func (v Violation) String() string {
	s := "Job " + v.Pod + ": " + v.Check
	if v.Detail != "" {
		s += " (" + v.Detail + ")"
	}
	return s
}

// PodSecurityError is a child whose pods do not meet its member's Pod Security level.
type PodSecurityError struct {
	// Level is the member's level (spec.podSecurity.level).
	Level fedv1alpha1.PodSecurityLevel
	// Violations are the checks the pods fail, in the order of the rendered Jobs and of the
	// Pod Security Standards.
	Violations []Violation
}

// Error names the level and the failed checks, in at most MaxMessageLength bytes.
func (e *PodSecurityError) Error() string {
	parts := make([]string, len(e.Violations))
	for i, v := range e.Violations {
		parts[i] = v.String()
	}
	return text.Truncate(fmt.Sprintf("the pods do not meet the member's Pod Security level %s (MemberCluster spec.podSecurity.level): %s",
		strconv.Quote(string(e.Level)), strings.Join(parts, "; ")), MaxMessageLength)
}

// PodSecurity checks the pods that child would run on a member whose pods must meet level
// (spec.podSecurity.level; unset is the schema's default, baseline). It returns nil when they
// meet it, a *PodSecurityError that lists the violations when they do not, and another error
// when the child cannot be rendered or the level is unknown.
func PodSecurity(level fedv1alpha1.PodSecurityLevel, child *fluxv1alpha2.MiniCluster) error {
	violations, err := Pods(level, child)
	if err != nil {
		return err
	}
	if len(violations) > 0 {
		return &PodSecurityError{Level: orBaseline(level), Violations: violations}
	}
	return nil
}

// Pods returns the checks of level that the pods of mc fail, mc being a MiniCluster as the hub
// pushes it (a bursting.Child's, without the schema defaults). It does what the member does:
// admits mc with the MiniCluster schema's defaults (member/admit), renders it (render.Render),
// and evaluates the pod template of each of its Jobs, the brokers' and, when the MiniCluster
// has services, the services pod's. An unset level is baseline. It takes a few milliseconds
// (go test ./hub/policy -run '^$' -bench Pods).
func Pods(level fedv1alpha1.PodSecurityLevel, mc *fluxv1alpha2.MiniCluster) ([]Violation, error) {
	data, err := yaml.Marshal(mc)
	if err != nil {
		return nil, fmt.Errorf("encoding the MiniCluster: %w", err)
	}
	stored, err := admit.Admit(data)
	if err != nil {
		return nil, fmt.Errorf("the member would refuse the MiniCluster: %w", err)
	}
	rendered, err := render.Render(stored)
	if err != nil {
		return nil, fmt.Errorf("rendering the MiniCluster: %w", err)
	}
	var out []Violation
	for _, obj := range rendered.Objects {
		job, ok := obj.Apply.(*batchv1ac.JobApplyConfiguration)
		if !ok || job.Spec == nil || job.Spec.Template == nil {
			continue
		}
		template, err := typed[corev1.PodTemplateSpec](job.Spec.Template)
		if err != nil {
			return nil, fmt.Errorf("reading the pod template of Job %s: %w", ptrString(job.Name), err)
		}
		violations, err := PodTemplate(level, ptrString(job.Name), template)
		if err != nil {
			return nil, err
		}
		out = append(out, violations...)
	}
	return out, nil
}

// PodTemplate returns the checks of level that the pods of template fail, each with name as
// Violation.Pod. An unset level is baseline.
func PodTemplate(level fedv1alpha1.PodSecurityLevel, name string, template *corev1.PodTemplateSpec) ([]Violation, error) {
	psaLevel, err := psaapi.ParseLevel(string(orBaseline(level)))
	if err != nil {
		return nil, fmt.Errorf("pod security level %s: %w", strconv.Quote(string(level)), err)
	}
	evaluator, err := newEvaluator()
	if err != nil {
		return nil, err
	}
	var out []Violation
	lv := psaapi.LevelVersion{Level: psaLevel, Version: psaapi.LatestVersion()}
	for _, r := range evaluator.EvaluatePod(lv, &template.ObjectMeta, &template.Spec) {
		if !r.Allowed {
			out = append(out, Violation{Pod: name, Check: r.ForbiddenReason, Detail: r.ForbiddenDetail})
		}
	}
	return out, nil
}

// newEvaluator is the Pod Security Standards' default checks, built once: building it indexes
// every check by version.
var newEvaluator = sync.OnceValues(func() (psapolicy.Evaluator, error) {
	e, err := psapolicy.NewEvaluator(psapolicy.DefaultChecks(), nil)
	if err != nil {
		return nil, fmt.Errorf("building the Pod Security Standards checks: %w", err)
	}
	return e, nil
})

func orBaseline(level fedv1alpha1.PodSecurityLevel) fedv1alpha1.PodSecurityLevel {
	if level == "" {
		return fedv1alpha1.PodSecurityBaseline
	}
	return level
}

// typed converts an apply configuration into the typed object of the same shape.
func typed[T any](ac any) (*T, error) {
	data, err := json.Marshal(ac)
	if err != nil {
		return nil, err
	}
	out := new(T)
	if err := json.Unmarshal(data, out); err != nil {
		return nil, err
	}
	return out, nil
}

func ptrString(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
