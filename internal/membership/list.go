package membership

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/rest"

	fedv1alpha1 "github.com/fluxfed/fluxfed/api/fluxfed/v1alpha1"
)

// Row is one member as `fluxfed member list` prints it.
type Row struct {
	Name string
	// Ready is the status of the Ready condition (True, False, Unknown), empty before the hub
	// wrote one; Reason and Message are the condition's.
	Ready, Reason, Message string
	Version                string
	// Nodes is unset when the hub may not count them.
	Nodes     *int32
	Children  int32
	ClusterID string
	// Heartbeat is when the member last answered, as recorded; zero if never.
	Heartbeat time.Time
}

// List returns the members registered on the hub, in name order, with their health.
func List(ctx context.Context, hubConfig *rest.Config) ([]Row, error) {
	c, err := newClient(hubConfig)
	if err != nil {
		return nil, fmt.Errorf("the hub: %w", err)
	}
	var list fedv1alpha1.MemberClusterList
	if err := c.List(ctx, &list); err != nil {
		return nil, fmt.Errorf("listing the hub's members: %w", err)
	}
	rows := make([]Row, 0, len(list.Items))
	for _, mc := range list.Items {
		r := Row{Name: mc.Name, Version: mc.Status.KubernetesVersion, Nodes: mc.Status.Nodes,
			Children: mc.Status.Children, ClusterID: mc.Status.ClusterID}
		if cond := meta.FindStatusCondition(mc.Status.Conditions, fedv1alpha1.ConditionReady); cond != nil {
			r.Ready, r.Reason, r.Message = string(cond.Status), cond.Reason, cond.Message
		}
		if mc.Status.LastHeartbeatTime != nil {
			r.Heartbeat = mc.Status.LastHeartbeatTime.Time
		}
		rows = append(rows, r)
	}
	slices.SortFunc(rows, func(a, b Row) int { return strings.Compare(a.Name, b.Name) })
	return rows, nil
}

// Print writes rows as a table, the columns of kubectl get memberclusters -o wide:
// NAME READY VERSION NODES CHILDREN REASON CLUSTER-ID HEARTBEAT (its age, as of now).
func Print(w io.Writer, rows []Row, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 4, 3, ' ', 0)
	fmt.Fprintln(tw, "NAME\tREADY\tVERSION\tNODES\tCHILDREN\tREASON\tCLUSTER-ID\tHEARTBEAT")
	for _, r := range rows {
		nodes, heartbeat := "", ""
		if r.Nodes != nil {
			nodes = fmt.Sprint(*r.Nodes)
		}
		if !r.Heartbeat.IsZero() {
			heartbeat = now.Sub(r.Heartbeat).Round(time.Second).String()
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\n", r.Name, dash(r.Ready), dash(r.Version), dash(nodes),
			r.Children, dash(r.Reason), dash(r.ClusterID), dash(heartbeat))
	}
	return tw.Flush()
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
