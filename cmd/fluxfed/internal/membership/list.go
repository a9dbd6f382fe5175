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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"

	fedv1alpha1 "github.com/fluxfed/fluxfed/api/fluxfed/v1alpha1"
)

// Formats of Print: the table (""), the table with more columns, or the MemberClusters.
const (
	FormatTable = ""
	FormatWide  = "wide"
	FormatYAML  = "yaml"
	FormatJSON  = "json"
)

// Formats lists the values of `fluxfed member list -o`.
var Formats = []string{FormatWide, FormatYAML, FormatJSON}

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
	// Watched are the member namespaces the hub watches (status.watchedNamespaces).
	Watched []string
	// Problems are the conditions that are not True, Ready first.
	Problems []metav1.Condition
	// Object is the MemberCluster as the hub stores it, without managedFields.
	Object *fedv1alpha1.MemberCluster
}

// List returns the members registered on the hub, in name order, with their health.
func List(ctx context.Context, hubConfig *rest.Config) ([]Row, error) {
	return ListAs(ctx, hubConfig, "")
}

// ListAs is List with the name of the hub's kubeconfig context, for the messages.
func ListAs(ctx context.Context, hubConfig *rest.Config, hubContext string) ([]Row, error) {
	c, err := newClient(hubConfig)
	if err != nil {
		return nil, fmt.Errorf("the hub: %w", err)
	}
	list, err := reachHub(ctx, c, cluster{role: "hub", flag: "--context", context: hubContext, server: hubConfig.Host}, DefaultReachTimeout)
	if err != nil {
		return nil, err
	}
	rows := make([]Row, 0, len(list.Items))
	for i := range list.Items {
		mc := &list.Items[i]
		mc.ManagedFields = nil
		mc.SetGroupVersionKind(fedv1alpha1.GroupVersion.WithKind("MemberCluster"))
		r := Row{Name: mc.Name, Version: mc.Status.KubernetesVersion, Nodes: mc.Status.Nodes,
			Children: mc.Status.Children, ClusterID: mc.Status.ClusterID, Watched: mc.Status.WatchedNamespaces,
			Problems: notGood(mc.Status.Conditions), Object: mc}
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

// Print writes rows in format: a table of NAME READY REASON VERSION NODES CHILDREN HEARTBEAT
// (its age, as of now), with CLUSTER-ID and NAMESPACES (those the hub watches) in FormatWide,
// then one line for each condition of a member that is not True; or the MemberClusters as
// YAML documents or a JSON List.
func Print(w io.Writer, rows []Row, now time.Time, format string) error {
	switch format {
	case FormatYAML, FormatJSON:
		var objs []*unstructured.Unstructured
		for _, r := range rows {
			if r.Object == nil {
				continue
			}
			obj, err := k8sruntime.DefaultUnstructuredConverter.ToUnstructured(r.Object)
			if err != nil {
				return err
			}
			objs = append(objs, &unstructured.Unstructured{Object: obj})
		}
		return printObjects(w, format, objs)
	case FormatTable, FormatWide:
	default:
		return fmt.Errorf("output %q: want %s", format, strings.Join(Formats, ", "))
	}
	if len(rows) == 0 {
		_, err := fmt.Fprintln(w, "No members are registered on the hub: fluxfed member add NAME --member-context CONTEXT registers one.")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 3, ' ', 0)
	header := "NAME\tREADY\tREASON\tVERSION\tNODES\tCHILDREN\tHEARTBEAT"
	if format == FormatWide {
		header += "\tCLUSTER-ID\tNAMESPACES"
	}
	fmt.Fprintln(tw, header)
	for _, r := range rows {
		nodes, heartbeat := "", ""
		if r.Nodes != nil {
			nodes = fmt.Sprint(*r.Nodes)
		}
		if !r.Heartbeat.IsZero() {
			heartbeat = now.Sub(r.Heartbeat).Round(time.Second).String()
		}
		line := fmt.Sprintf("%s\t%s\t%s\t%s\t%s\t%d\t%s", r.Name, dash(r.Ready), dash(r.Reason), dash(r.Version), dash(nodes),
			r.Children, dash(heartbeat))
		if format == FormatWide {
			watched := strings.Join(r.Watched, ",")
			if r.Object != nil && r.Object.Spec.Namespaces.Allow == fedv1alpha1.NamespaceAllowAny {
				watched = "(all)"
			}
			line += fmt.Sprintf("\t%s\t%s", dash(r.ClusterID), dash(watched))
		}
		fmt.Fprintln(tw, line)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	first := true
	for _, r := range rows {
		for _, c := range r.Problems {
			if first {
				fmt.Fprintln(w)
				first = false
			}
			fmt.Fprintf(w, "%s: %s\n", r.Name, describeCondition(c))
		}
	}
	return nil
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
