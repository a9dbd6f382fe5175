//go:build realpods

package realpodlane

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fluxfed/fluxfed/e2e/clusters"
	"github.com/fluxfed/fluxfed/e2e/fleet"
)

// hubAddress is the hub's node address as the members' pods reach it (fleet.HubAddress); a root
// exposes its lead broker at this address (spec.flux.bursting.expose.address).
var hubAddress = fleet.HubAddress

// serveNodePorts plays kube-proxy for the hub's NodePort Services (fleet.NodePorts) until the
// test ends.
func serveNodePorts(t *testing.T, hub *clusters.Cluster, members []*clusters.Cluster) *fleet.NodePorts {
	t.Helper()
	p, err := fleet.ServeNodePorts(hub, members, t.Logf)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, p.Close()) })
	return p
}
