package hub

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
	"github.com/fluxfed/fluxfed/bursting"
	"github.com/fluxfed/fluxfed/flux"
	"github.com/fluxfed/fluxfed/hub/members"
)

// federation is what one reconcile of a root observed and did: the input of its status.
type federation struct {
	// lead is what was found out about the lead broker.
	lead lead
	// plan is the federation's plan; nil while the lead broker's address is pending, when there
	// is nothing to tell the children.
	plan *bursting.Plan
	// cert is the root's CURVE certificate file; empty until the member reconciler created it.
	cert []byte
	// bursts are what was observed of each burst, in the spec's order, reserved ones included.
	bursts []BurstObservation
	// requeue is when to look again although nothing changed (a lead broker that did not answer,
	// the next question to the root's Flux instance).
	requeue time.Duration
	// flux is status.flux: what the root's instance said, nil before it was asked.
	flux *fluxv1alpha2.FluxStatus
}

// lead is what the hub found out about a root's lead broker this reconcile.
type lead struct {
	// endpoint is the advertised endpoint; its Address is empty while it is pending.
	endpoint bursting.Endpoint
	// reason and err say where the endpoint came from, or why it is pending or not answering.
	reason string
	err    error
}

// err joins the errors of the bursts that failed for a reason a retry may fix.
func (f *federation) err() error {
	var errs []error
	for _, o := range f.bursts {
		if o.Err != nil {
			errs = append(errs, fmt.Errorf("burst %s on member %s: %w", o.Name, o.Cluster, o.Err))
		}
	}
	return errors.Join(errs...)
}

// BurstObservation is what the hub saw of one burst entry this reconcile.
type BurstObservation struct {
	// Name is the burst's name, as in spec.flux.bursting.clusters.
	Name string
	// Cluster is the member cluster the entry names; empty for a reserved burst.
	Cluster string
	// Namespace is the child's namespace on the member.
	Namespace string
	// Size is the number of the burst's brokers that should run now; 0 leaves nothing of the
	// burst on its member.
	Size int32
	// MaxSize is the number of ranks reserved for the burst.
	MaxSize int32
	// Reserved is true for an entry that names no cluster: the hub does not push it, someone
	// else brings its brokers up (the Flux Operator's model).
	Reserved bool
	// Keep is true when nothing can be said of the burst yet: its member has not been checked
	// since the hub started. The burst is reported as it was.
	Keep bool
	// Waiting says why the child is not applied yet although nothing failed: an object of its
	// name that the hub created for a root that is gone is being deleted first.
	Waiting string
	// Withdraw is true when the member's owner no longer allows the burst (its namespace or its
	// pods' Pod Security level): what the hub pushed for it is deleted.
	Withdraw bool
	// Err is nil, or why the child could not be applied or read: the member is not registered,
	// not ready, or refused the child. Its condition reason is read from its type (errors.go).
	Err error
	// Child is the child MiniCluster as read back from the member, nil when it is not there.
	Child *fluxv1alpha2.MiniCluster
	// Flux counts the burst's reserved ranks as the root's Flux instance sees them; nil when it
	// has not been asked, or does not run yet.
	Flux *flux.Count
	// Joined is true when the instance sees every broker the burst runs online; NotJoining
	// explains why the burst's brokers have been running without joining for too long.
	Joined     bool
	NotJoining string

	// member is the member's state this reconcile.
	member members.State
}

// reason returns the condition reason of a failed observation.
func (o BurstObservation) reason() string { return reasonOf(o.Err) }

// sooner returns the shortest of the waits that are not 0, or 0.
func sooner(waits ...time.Duration) time.Duration {
	var d time.Duration
	for _, w := range waits {
		if w > 0 && (d == 0 || w < d) {
			d = w
		}
	}
	return d
}

// isRootOfHub tells the roots the hub reconciles: MiniClusters with a burst to push, and those
// still carrying the hub's finalizer (their bursts were moved off the members, or they are being
// deleted).
func isRootOfHub(obj client.Object) bool {
	mc, ok := obj.(*fluxv1alpha2.MiniCluster)
	return ok && (hasPushedBursts(mc) || slices.Contains(mc.Finalizers, fluxv1alpha2.FinalizerBursts))
}

// hasPushedBursts reports whether mc is a root with at least one burst that names a member.
func hasPushedBursts(mc *fluxv1alpha2.MiniCluster) bool {
	return !mc.IsBurstChild() && slices.ContainsFunc(mc.Spec.Flux.Bursting.Clusters, func(b fluxv1alpha2.Burst) bool { return b.Cluster != "" })
}

// now is the hub's clock as a metav1.Time.
func (r *Reconciler) now() metav1.Time { return metav1.NewTime(r.opts.Clock()) }

// rootOf returns the live root that origin names: the MiniCluster of its namespace and name, if
// it has origin's UID; nil when it is gone. The cache is confirmed past it before a root is
// taken for gone.
func (r *Reconciler) rootOf(ctx context.Context, origin fluxv1alpha2.Origin) (*fluxv1alpha2.MiniCluster, error) {
	key := client.ObjectKey{Namespace: origin.Namespace, Name: origin.Name}
	for _, reader := range []client.Reader{r.client, r.live} {
		root := &fluxv1alpha2.MiniCluster{}
		switch err := reader.Get(ctx, key, root); {
		case err == nil && root.UID == origin.UID:
			return root, nil
		case err != nil && !apierrors.IsNotFound(err):
			return nil, fmt.Errorf("reading root %s: %w", key, err)
		}
	}
	return nil, nil
}
