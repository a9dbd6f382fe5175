package hub

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
)

// TestFluxStatusKeepsWhatWasLastSeen: status.flux when the instance could not be asked keeps the
// fields last recorded, also when the hub has no answer of its own (it restarted since).
func TestFluxStatusKeepsWhatWasLastSeen(t *testing.T) {
	recorded := &fluxv1alpha2.FluxStatus{State: "run", Size: 6, Online: 3, PendingJobs: 1, PendingNodes: 5, Message: "an older failure"}
	failed := errors.New("flux-uptime: Unable to connect to Flux")
	for _, tt := range []struct {
		name string
		obs  fluxObservation
		last *fluxv1alpha2.FluxStatus
		want *fluxv1alpha2.FluxStatus
	}{
		{name: "never asked", last: recorded, want: nil},
		{name: "never answered", obs: fluxObservation{err: failed},
			want: &fluxv1alpha2.FluxStatus{Message: failed.Error()}},
		{name: "not answering after a restart", obs: fluxObservation{err: failed}, last: recorded,
			want: &fluxv1alpha2.FluxStatus{State: "run", Size: 6, Online: 3, PendingJobs: 1, PendingNodes: 5, Message: failed.Error()}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, fluxStatus(tt.obs, tt.last))
			if tt.last != nil {
				require.Equal(t, "an older failure", tt.last.Message, "status.flux as read is not modified")
			}
		})
	}
}
