package membership

import (
	"bytes"
	"context"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	fedv1alpha1 "github.com/fluxfed/fluxfed/api/fluxfed/v1alpha1"
)

// TestPrintSaysWhatIsNotGood: the table, then every condition that is not True, by member.
func TestPrintSaysWhatIsNotGood(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	rows := []Row{
		{Name: "member-a", Ready: "True", Reason: "Connected", Version: "v1.36.3", Nodes: ptr.To(int32(12)), Children: 3,
			ClusterID: "id-a", Heartbeat: now.Add(-12 * time.Second), Watched: []string{"research"}},
		{Name: "member-b", Ready: "False", Reason: "FluxfedMissing", Version: "v1.36.3", ClusterID: "id-b", Heartbeat: now.Add(-3 * time.Second),
			Problems: notGood([]metav1.Condition{
				{Type: "NamespacesAvailable", Status: metav1.ConditionTrue, Reason: "NamespacesAvailable"},
				{Type: "FluxfedInstalled", Status: metav1.ConditionFalse, Reason: "CRDMissing", Message: "no MiniCluster API: install fluxfed"},
				{Type: fedv1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: "FluxfedMissing", Message: "fluxfed is not installed"},
			})},
	}
	var out bytes.Buffer
	require.NoError(t, Print(&out, rows, now, FormatTable))
	require.Equal(t, `NAME       READY   REASON           VERSION   NODES   CHILDREN   HEARTBEAT
member-a   True    Connected        v1.36.3   12      3          12s
member-b   False   FluxfedMissing   v1.36.3   -       0          3s

member-b: Ready=False FluxfedMissing: fluxfed is not installed
member-b: FluxfedInstalled=False CRDMissing: no MiniCluster API: install fluxfed
`, out.String())

	out.Reset()
	require.NoError(t, Print(&out, rows[:1], now, FormatWide))
	require.Equal(t, `NAME       READY   REASON      VERSION   NODES   CHILDREN   HEARTBEAT   CLUSTER-ID   NAMESPACES
member-a   True    Connected   v1.36.3   12      3          12s         id-a         research
`, out.String())

	out.Reset()
	require.NoError(t, Print(&out, nil, now, FormatTable))
	require.Equal(t, "No members are registered on the hub: fluxfed member add NAME --member-context CONTEXT registers one.\n", out.String())
	require.EqualError(t, Print(&out, nil, now, "name"), `output "name": want wide, yaml, json`)
}

// TestProbeSaysWhichEndpointsAnswer greets endpoints on loopback: one where nothing listens,
// one that answers but is no Flux broker.
func TestProbeSaysWhichEndpointsAnswer(t *testing.T) {
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	closedAddr := closed.Addr().String()
	require.NoError(t, closed.Close())
	other, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer other.Close()
	go func() {
		for {
			c, err := other.Accept()
			if err != nil {
				return
			}
			_, _ = c.Write([]byte("HTTP/1.1 400 Bad Request\r\n\r\n"))
			_ = c.Close()
		}
	}()
	var out bytes.Buffer
	err = Probe(context.Background(), []string{closedAddr, other.Addr().String()}, &out)
	require.EqualError(t, err, "2 of 2 endpoints did not answer as a Flux broker: "+closedAddr+", "+other.Addr().String())
	require.Contains(t, out.String(), closedAddr+": no Flux broker answers from the member: lead broker "+closedAddr+": cannot connect: ")
	require.Contains(t, out.String(), other.Addr().String()+": no Flux broker answers from the member: lead broker "+other.Addr().String()+": the endpoint answered but is not a ZMTP 3 CURVE peer")
	require.EqualError(t, ValidateEndpoints([]string{"127.0.0.1"}), `--check-endpoint "127.0.0.1" is not HOST:PORT: address 127.0.0.1: missing port in address`)
}
