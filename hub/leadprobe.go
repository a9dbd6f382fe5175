package hub

// This file holds the lead prober: the loop that greets the lead broker of every root again each
// probe interval, and wakes a root only when what its greeting found changed. A settled
// federation then costs one greeting per endpoint per interval (probe.Limiter), and no reconcile.

import (
	"context"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
)

// probeWorkers is how many greetings the lead prober has in flight at once: an endpoint that
// does not answer holds one for up to ProbeTimeout.
const probeWorkers = 8

// leadProber greets the lead brokers of the roots the hub greeted before, every ProbeInterval.
type leadProber struct{ r *Reconciler }

// Start greets every ProbeInterval until ctx ends. A round that outlasts the interval delays the
// next one rather than overlapping it.
func (p *leadProber) Start(ctx context.Context) error {
	p.r.probing.Store(true)
	defer p.r.probing.Store(false)
	ticker := time.NewTicker(p.r.opts.ProbeInterval)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C:
			p.r.probeRound(ctx)
		}
	}
}

// NeedLeaderElection is true: only the hub that reconciles greets.
func (p *leadProber) NeedLeaderElection() bool { return true }

// probeRound greets the lead broker of every root whose last greeting is half an interval old or
// more, and wakes each root whose greeting now finds the endpoint answering when it did not, or
// the other way round.
func (r *Reconciler) probeRound(ctx context.Context) {
	log := ctrl.LoggerFrom(ctx).WithName("lead-prober")
	now := r.opts.Clock()
	type due struct {
		key  types.NamespacedName
		m    *rootMemory
		last probeResult
	}
	var dues []due
	r.memory.roots.Range(func(_, v any) bool {
		m := v.(*rootMemory)
		if last, ok := m.lastProbe(); ok && now.Sub(last.at) >= r.opts.ProbeInterval/2 {
			dues = append(dues, due{key: last.root, m: m, last: last})
		}
		return true
	})
	work := make(chan due)
	var wg sync.WaitGroup
	for range min(probeWorkers, len(dues)) {
		wg.Go(func() {
			for d := range work {
				err := r.greetLead(ctx, d.last.lead)
				if ctx.Err() != nil {
					return
				}
				next := d.last
				next.err, next.at = err, r.opts.Clock()
				d.m.updateProbe(d.last, next)
				if (err == nil) != (d.last.err == nil) || errorText(err) != errorText(d.last.err) {
					log.V(1).Info("The lead broker's greeting changed", "root", d.key, "error", errorText(err))
					r.wakes.wake(d.key, 0)
				}
			}
		})
	}
	for _, d := range dues {
		select {
		case work <- d:
		case <-ctx.Done():
		}
	}
	close(work)
	wg.Wait()
}
