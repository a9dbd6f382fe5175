// Package metrics holds fluxfed's own Prometheus series, registered in controller-runtime's
// registry (sigs.k8s.io/controller-runtime/pkg/metrics.Registry), which the manager serves on its
// metrics endpoint next to controller-runtime's own series. docs/metrics.md says what each one
// means and how to scrape them.
//
// The gauges are set from what the hub reports in the status it writes, and their series are
// deleted when what they describe goes (a root, a member), so that no series outlives its
// object. Only the leading replica reconciles, so only it reports them.
package metrics

import (
	"slices"

	"github.com/prometheus/client_golang/prometheus"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
)

// Label names.
const (
	LabelNamespace = "namespace"
	LabelRoot      = "root"
	LabelBurst     = "burst"
	LabelMember    = "member"
	LabelPhase     = "phase"
	LabelHealth    = "health"
	LabelDirection = "direction"
)

// Values of the health label of MemberHealth.
const (
	HealthReady    = "Ready"
	HealthNotReady = "NotReady"
	HealthUnknown  = "Unknown"
)

// Values of the direction label of ScaleDecisions.
const (
	DirectionUp   = "up"
	DirectionDown = "down"
)

// BurstPhases are the phases Bursts reports for every root, 0 included.
var BurstPhases = []fluxv1alpha2.BurstPhase{
	fluxv1alpha2.BurstPending, fluxv1alpha2.BurstApplied, fluxv1alpha2.BurstReady, fluxv1alpha2.BurstJoined,
	fluxv1alpha2.BurstNotJoining, fluxv1alpha2.BurstFailed, fluxv1alpha2.BurstUnreachable, fluxv1alpha2.BurstReserved,
}

var healths = []string{HealthReady, HealthNotReady, HealthUnknown}

var (
	// Bursts counts a root's pushed bursts by phase, as status.bursts reports them.
	Bursts = gaugeVec(prometheus.GaugeOpts{
		Name: "fluxfed_bursts",
		Help: "Bursts of a root MiniCluster that the hub pushes to members, by phase (status.bursts[].phase); every phase is reported, 0 included.",
	}, LabelNamespace, LabelRoot, LabelPhase)

	// MemberHealth is 1 for a member's current health and 0 for the others.
	MemberHealth = gaugeVec(prometheus.GaugeOpts{
		Name: "fluxfed_member_health",
		Help: "1 for the health of a MemberCluster as the hub sees it (Ready, NotReady, Unknown: not checked yet), 0 for the other values.",
	}, LabelMember, LabelHealth)

	// PushDuration is how long one reconcile of a root took to apply its children on one member.
	PushDuration = histogramVec(prometheus.HistogramOpts{
		Name:    "fluxfed_push_duration_seconds",
		Help:    "Time one reconcile of a root took to apply its children and their CURVE Secrets on one member.",
		Buckets: []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30},
	}, LabelMember)

	// Orphans counts the objects recorded on a MemberCluster for the orphan sweep.
	Orphans = gaugeVec(prometheus.GaugeOpts{
		Name: "fluxfed_orphans",
		Help: "Objects the hub created on a member for roots that are gone, left for the orphan sweep (MemberCluster status.orphans).",
	}, LabelMember)

	// CleanupPending is 1 while a deleted root waits for members to delete its children.
	CleanupPending = gaugeVec(prometheus.GaugeOpts{
		Name: "fluxfed_cleanup_pending",
		Help: "1 while a root being deleted waits, up to --cleanup-timeout, for members that have not deleted its children yet.",
	}, LabelNamespace, LabelRoot)

	// FluxRanks is the size of a root's Flux instance.
	FluxRanks = gaugeVec(prometheus.GaugeOpts{
		Name: "fluxfed_flux_ranks",
		Help: "Ranks of a bursting root's Flux instance, the bursts' reserved ranks included (status.flux.size), as its lead broker last said.",
	}, LabelNamespace, LabelRoot)
	// FluxRanksOnline counts the ranks online in a root's instance.
	FluxRanksOnline = gaugeVec(prometheus.GaugeOpts{
		Name: "fluxfed_flux_ranks_online",
		Help: "Ranks of a bursting root's Flux instance that are online (status.flux.online), as its lead broker last said.",
	}, LabelNamespace, LabelRoot)
	// FluxPendingJobs counts the jobs that wait in a root's instance.
	FluxPendingJobs = gaugeVec(prometheus.GaugeOpts{
		Name: "fluxfed_flux_pending_jobs",
		Help: "Jobs that wait for resources in a bursting root's Flux instance (status.flux.pendingJobs).",
	}, LabelNamespace, LabelRoot)
	// FluxPendingNodes is the largest number of nodes one waiting job asks for.
	FluxPendingNodes = gaugeVec(prometheus.GaugeOpts{
		Name: "fluxfed_flux_pending_nodes",
		Help: "The largest number of nodes one waiting job of a bursting root's Flux instance asks for (status.flux.pendingNodes): the instance needs that many usable ranks.",
	}, LabelNamespace, LabelRoot)
	// FluxAnswering is 1 when the last ask of a root's instance succeeded.
	FluxAnswering = gaugeVec(prometheus.GaugeOpts{
		Name: "fluxfed_flux_answering",
		Help: "1 when the hub's last ask of a bursting root's Flux instance succeeded, 0 when it failed (status.flux.message says why).",
	}, LabelNamespace, LabelRoot)

	// ScaleDecisions counts the on-demand resizes of a burst.
	ScaleDecisions = counterVec(prometheus.CounterOpts{
		Name: "fluxfed_scale_decisions_total",
		Help: "On-demand resizes of a burst the hub made: up raised its brokers for waiting jobs, down removed drained idle ones.",
	}, LabelNamespace, LabelRoot, LabelBurst, LabelDirection)
)

// perRoot are the series labeled by root, deleted when the root goes.
var perRoot = []interface {
	DeletePartialMatch(prometheus.Labels) int
}{Bursts, CleanupPending, FluxRanks, FluxRanksOnline, FluxPendingJobs, FluxPendingNodes, FluxAnswering, ScaleDecisions}

// all are fluxfed's collectors.
var all = []prometheus.Collector{Bursts, MemberHealth, PushDuration, Orphans, CleanupPending,
	FluxRanks, FluxRanksOnline, FluxPendingJobs, FluxPendingNodes, FluxAnswering, ScaleDecisions}

func init() {
	ctrlmetrics.Registry.MustRegister(all...)
}

// Names returns the names of fluxfed's series, sorted.
func Names() []string { return slices.Sorted(slices.Values(names)) }

// names are the names of the series of all.
var names []string

func gaugeVec(opts prometheus.GaugeOpts, labels ...string) *prometheus.GaugeVec {
	names = append(names, opts.Name)
	return prometheus.NewGaugeVec(opts, labels)
}

func histogramVec(opts prometheus.HistogramOpts, labels ...string) *prometheus.HistogramVec {
	names = append(names, opts.Name)
	return prometheus.NewHistogramVec(opts, labels)
}

func counterVec(opts prometheus.CounterOpts, labels ...string) *prometheus.CounterVec {
	names = append(names, opts.Name)
	return prometheus.NewCounterVec(opts, labels)
}

// SetBursts reports the phases of a root's pushed bursts; none deletes the root's series.
func SetBursts(namespace, root string, phases []fluxv1alpha2.BurstPhase) {
	if len(phases) == 0 {
		Bursts.DeletePartialMatch(prometheus.Labels{LabelNamespace: namespace, LabelRoot: root})
		return
	}
	count := map[fluxv1alpha2.BurstPhase]int{}
	for _, p := range phases {
		count[p]++
	}
	for _, p := range BurstPhases {
		Bursts.WithLabelValues(namespace, root, string(p)).Set(float64(count[p]))
	}
}

// SetFlux reports what a root's Flux instance last said; nil (never asked, or not bursting)
// deletes its series.
func SetFlux(namespace, root string, st *fluxv1alpha2.FluxStatus) {
	labels := prometheus.Labels{LabelNamespace: namespace, LabelRoot: root}
	if st == nil {
		for _, v := range []*prometheus.GaugeVec{FluxRanks, FluxRanksOnline, FluxPendingJobs, FluxPendingNodes, FluxAnswering} {
			v.DeletePartialMatch(labels)
		}
		return
	}
	answering := 1.0
	if st.Message != "" {
		answering = 0
	}
	FluxAnswering.With(labels).Set(answering)
	if st.State == "" {
		// Never answered: nothing is known of its ranks.
		for _, v := range []*prometheus.GaugeVec{FluxRanks, FluxRanksOnline, FluxPendingJobs, FluxPendingNodes} {
			v.DeletePartialMatch(labels)
		}
		return
	}
	FluxRanks.With(labels).Set(float64(st.Size))
	FluxRanksOnline.With(labels).Set(float64(st.Online))
	FluxPendingJobs.With(labels).Set(float64(st.PendingJobs))
	FluxPendingNodes.With(labels).Set(float64(st.PendingNodes))
}

// SetCleanupPending reports that a root being deleted waits for members to delete its children.
// ForgetRoot deletes the series once its finalizer is released.
func SetCleanupPending(namespace, root string) {
	CleanupPending.WithLabelValues(namespace, root).Set(1)
}

// ScaledBurst counts one on-demand resize of a burst from one size to another.
func ScaledBurst(namespace, root, burst string, from, to int32) {
	direction := DirectionUp
	if to < from {
		direction = DirectionDown
	}
	ScaleDecisions.WithLabelValues(namespace, root, burst, direction).Inc()
}

// ForgetRoot deletes every series of a root: it is gone, or no longer bursts.
func ForgetRoot(namespace, root string) {
	labels := prometheus.Labels{LabelNamespace: namespace, LabelRoot: root}
	for _, v := range perRoot {
		v.DeletePartialMatch(labels)
	}
}

// SetMember reports a member's health and the objects recorded on it for the orphan sweep.
func SetMember(member, health string, orphans int) {
	for _, h := range healths {
		v := 0.0
		if h == health {
			v = 1
		}
		MemberHealth.WithLabelValues(member, h).Set(v)
	}
	Orphans.WithLabelValues(member).Set(float64(orphans))
}

// ForgetMember deletes every series of a member that is no longer registered.
func ForgetMember(member string) {
	labels := prometheus.Labels{LabelMember: member}
	MemberHealth.DeletePartialMatch(labels)
	Orphans.DeletePartialMatch(labels)
	PushDuration.DeletePartialMatch(labels)
}
