package hub

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

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

// TestFluxStatusCutsALongMessage: a failure longer than status.flux.message holds is cut to 4096
// bytes on a rune boundary, ending in "...".
func TestFluxStatusCutsALongMessage(t *testing.T) {
	for _, tt := range []struct{ name, err, want string }{
		{name: "short", err: "flux-uptime: Unable to connect to Flux", want: "flux-uptime: Unable to connect to Flux"},
		{name: "ascii", err: strings.Repeat("x", 5000), want: strings.Repeat("x", 4093) + "..."},
		{name: "a two-byte rune across the cut", err: strings.Repeat("é", 3000), want: strings.Repeat("é", 2046) + "..."},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := fluxStatus(fluxObservation{err: errors.New(tt.err)}, nil).Message
			require.Equal(t, tt.want, got)
			require.True(t, utf8.ValidString(got), "status.flux.message is valid UTF-8")
		})
	}
}
