package membership_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fedv1alpha1 "github.com/fluxfed/fluxfed/api/fluxfed/v1alpha1"
	"github.com/fluxfed/fluxfed/cmd/fluxfed/internal/membership"
	"github.com/fluxfed/fluxfed/e2e/clusters"
	"github.com/fluxfed/fluxfed/e2e/fleet"
	"github.com/fluxfed/fluxfed/internal/testenv"
)

// closedPort returns a loopback address:port where nothing listens.
func closedPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	return addr
}

// silentServer accepts connections on loopback and never answers, as a firewalled or hung API
// server looks from a client.
func silentServer(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var conns []net.Conn
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			conns = append(conns, c)
		}
	}()
	t.Cleanup(func() {
		_ = l.Close()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	return l.Addr().String()
}

// TestAddSaysWhatIsWrong registers member-a on a hub of the local clusters in every way that
// cannot work, and checks that Add says so at once, with what to do, and leaves nothing behind
// when the registration itself is what fails.
func TestAddSaysWhatIsWrong(t *testing.T) {
	f := fleet.StartT(t, fleet.Options{Members: []string{"member-a"}, Unregistered: true})
	ctx := context.Background()
	hubConfig, memberConfig := f.Config("hub"), f.Config("member-a")
	hubClient, memberClient := f.Clients["hub"], f.Clients["member-a"]
	base := func(out *bytes.Buffer) membership.Options {
		return membership.Options{Name: "member-a", Hub: hubConfig, Member: memberConfig, HubContext: "hub", MemberContext: "member-a",
			Lend: []string{"research"}, Out: out}
	}
	nothingLeft := func(t *testing.T) {
		t.Helper()
		var mcs fedv1alpha1.MemberClusterList
		require.NoError(t, hubClient.List(ctx, &mcs))
		require.Empty(t, mcs.Items)
		err := hubClient.Get(ctx, client.ObjectKey{Namespace: "fluxfed-system", Name: "member-a-kubeconfig"}, &corev1.Secret{})
		require.True(t, apierrors.IsNotFound(err), "the kubeconfig Secret: %v", err)
		err = memberClient.Get(ctx, client.ObjectKey{Namespace: "fluxfed-system", Name: "fluxfed-hub"}, &corev1.ServiceAccount{})
		require.True(t, apierrors.IsNotFound(err), "the hub's ServiceAccount: %v", err)
		err = memberClient.Get(ctx, client.ObjectKey{Namespace: "research", Name: "fluxfed-hub-burst"}, &rbacv1.RoleBinding{})
		require.True(t, apierrors.IsNotFound(err), "the RoleBinding that lends research: %v", err)
	}

	t.Run("a hub context that is no hub", func(t *testing.T) {
		o := base(nil)
		o.Hub, o.HubContext = memberConfig, "member-a"
		_, err := membership.Add(ctx, o)
		require.EqualError(t, err, fmt.Sprintf(`the hub context "member-a" (--context, server %s) has no MemberCluster API: is fluxfed installed there in hub mode `+
			`(helm install fluxfed deploy/chart/fluxfed -n fluxfed-system --create-namespace --set mode=hub, or kubectl apply --server-side -k deploy/hub)?`, memberConfig.Host))
		nothingLeft(t)
	})

	t.Run("a member that does not answer member add", func(t *testing.T) {
		o := base(nil)
		o.Member = rest.CopyConfig(memberConfig)
		o.Member.Host = "https://" + silentServer(t)
		o.ReachTimeout = time.Second
		start := time.Now()
		_, err := membership.Add(ctx, o)
		require.EqualError(t, err, fmt.Sprintf(`the member context "member-a" (--member-context, server %s) did not answer within 1s: `+
			`is the context right, and does the cluster run and reach you?`, o.Member.Host))
		require.Less(t, time.Since(start), 5*time.Second)

		o.Member.Host = "https://" + closedPort(t)
		_, err = membership.Add(ctx, o)
		require.ErrorContains(t, err, fmt.Sprintf(`the member context "member-a" (--member-context, server %s) cannot be reached: dial tcp %s: connect: connection refused`,
			o.Member.Host, strings.TrimPrefix(o.Member.Host, "https://")))
		nothingLeft(t)
	})

	t.Run("dry run", func(t *testing.T) {
		var out bytes.Buffer
		o := base(&out)
		o.DryRun = true
		_, err := membership.Add(ctx, o)
		require.NoError(t, err)
		t.Logf("member add --dry-run:\n%s", out.String())
		for _, line := range []string{
			"member-a: dry run: nothing is created or changed\n",
			"member-a: would apply on the member, from deploy/member-access: ServiceAccount fluxfed-system/fluxfed-hub, ",
			"member-a: would create namespace research on the member, and lend it (RoleBinding research/fluxfed-hub-burst of ClusterRole fluxfed-hub-burst)\n",
			"member-a: would mint a token for ServiceAccount fluxfed-system/fluxfed-hub that expires in 30 days",
			"member-a: would create on the hub Secret fluxfed-system/member-a-kubeconfig (a kubeconfig for " + memberConfig.Host,
		} {
			require.Contains(t, out.String(), line)
		}
		out.Reset()
		o.Output = "yaml"
		_, err = membership.Add(ctx, o)
		require.NoError(t, err)
		for _, doc := range []string{"kind: ServiceAccount\n", "kind: Namespace\n", "kind: RoleBinding\n", "kind: Secret\n", "kind: MemberCluster\n",
			"token: <minted by fluxfed member add>", "app.kubernetes.io/managed-by: fluxfed-cli"} {
			require.Contains(t, out.String(), doc)
		}
		require.NotContains(t, out.String(), "member-a: ", "-o yaml prints the objects alone")
		nothingLeft(t)
		err = memberClient.Get(ctx, client.ObjectKey{Name: "research"}, &corev1.Namespace{})
		require.True(t, apierrors.IsNotFound(err), "a dry run creates no namespace: %v", err)
	})

	t.Run("a member the hub cannot reach", func(t *testing.T) {
		var out bytes.Buffer
		o := base(&out)
		o.MemberServer = "https://" + closedPort(t)
		o.UnreachableGrace = time.Second
		start := time.Now()
		_, err := membership.Add(ctx, o)
		t.Logf("member add --member-server %s (%v):\n%s\nerror: %v", o.MemberServer, time.Since(start), out.String(), err)
		var notReady *membership.NotReadyError
		require.True(t, errors.As(err, &notReady), "%v", err)
		require.True(t, notReady.Final)
		require.Equal(t, fedv1alpha1.ReasonUnreachable, notReady.Ready.Reason)
		require.Less(t, time.Since(start), 40*time.Second, "said within a few health checks, not after --wait")
		require.Contains(t, out.String(), "member-a: the hub reports Ready=False Unreachable: the member's API server did not answer")
		msg := err.Error()
		require.Contains(t, msg, "the hub cannot use member member-a: Ready=False Unreachable: ")
		require.Contains(t, msg, "\n  what to do: the hub dials the member's API server at "+o.MemberServer+
			": if the hub reaches the member at another address, run member add again with --member-server URL")
		require.Contains(t, msg, "\n  undone, nothing of this registration is left: deleted MemberCluster member-a and Secret fluxfed-system/member-a-kubeconfig on the hub; "+
			"on the member RoleBinding research/fluxfed-hub-burst, ")
		require.True(t, strings.HasSuffix(msg, ". Fix the cause, then run member add again"), msg)
		nothingLeft(t)
	})

	t.Run("the identity the chart installed", func(t *testing.T) {
		// What `helm install --set mode=member` leaves: the same identity, Helm's.
		objs, err := testenv.Kustomize("member-access")
		require.NoError(t, err)
		for _, obj := range objs[1:] { // not the namespace, which fluxfed's install made
			obj.SetLabels(map[string]string{"app.kubernetes.io/managed-by": "Helm"})
			obj.SetAnnotations(map[string]string{"meta.helm.sh/release-name": "fluxfed", "meta.helm.sh/release-namespace": "fluxfed-system"})
			require.NoError(t, memberClient.Create(ctx, obj))
		}
		var out bytes.Buffer
		o := base(&out)
		o.Access, o.Lend = membership.AccessAny, nil
		_, err = membership.Add(ctx, o)
		require.EqualError(t, err, "the hub's identity on the member was installed by Helm release fluxfed (namespace fluxfed-system) with memberAccess.profile namespaces, "+
			"and --access any asks for every namespace: either run helm upgrade with --set memberAccess.profile=any, or leave out --access any (and lend namespaces with --lend)")

		out.Reset()
		_, err = membership.Add(ctx, base(&out))
		t.Logf("member add over the chart's identity:\n%s", out.String())
		require.NoError(t, err)
		require.Contains(t, out.String(), "member-a: using the hub's identity that Helm release fluxfed (namespace fluxfed-system) installed on the member "+
			"(ServiceAccount fluxfed-system/fluxfed-hub): member add installs none\n")
		sa := &corev1.ServiceAccount{}
		require.NoError(t, memberClient.Get(ctx, client.ObjectKey{Namespace: "fluxfed-system", Name: "fluxfed-hub"}, sa))
		require.Equal(t, "Helm", sa.Labels["app.kubernetes.io/managed-by"], "Helm keeps its objects")
		for _, m := range sa.ManagedFields {
			require.NotEqual(t, membership.FieldManager, m.Manager, "member add wrote nothing to it")
		}

		out.Reset()
		require.NoError(t, membership.Remove(ctx, membership.RemoveOptions{Name: "member-a", Hub: hubConfig, Member: memberConfig, Out: &out}))
		t.Logf("member remove:\n%s", out.String())
		require.Contains(t, out.String(), "member-a: removed access (RoleBinding research/fluxfed-hub-burst)\n")
		require.Contains(t, out.String(), "member-a: kept the hub's identity that Helm release fluxfed (namespace fluxfed-system) installed on the member")
		require.NoError(t, memberClient.Get(ctx, client.ObjectKey{Namespace: "fluxfed-system", Name: "fluxfed-hub"}, &corev1.ServiceAccount{}))
		require.NoError(t, memberClient.Get(ctx, client.ObjectKey{Name: "fluxfed-hub-member"}, &rbacv1.ClusterRole{}))
		for _, obj := range objs[1:] {
			require.NoError(t, memberClient.Delete(ctx, obj))
		}
	})

	t.Run("the data path", func(t *testing.T) {
		// The fleet runs fluxfed's managers as processes: the member has no Deployment whose
		// image the check could run.
		var out bytes.Buffer
		o := base(&out)
		endpoint := closedPort(t)
		o.CheckEndpoints, o.CheckTimeout = []string{endpoint}, 3*time.Second
		_, err := membership.Add(ctx, o)
		require.NoError(t, err)
		require.Contains(t, out.String(), "member-a: data path: could not check: no Deployment fluxfed-system/fluxfed-manager on the member, whose fluxfed image the check runs: "+
			"is fluxfed installed there? (--check-image IMAGE names one)\n")
		require.NoError(t, membership.Remove(ctx, membership.RemoveOptions{Name: "member-a", Hub: hubConfig, Member: memberConfig}))

		// The local clusters run no containers: the check must end, saying it could not check.
		out.Reset()
		o.CheckImage = "ghcr.io/fluxfed/fluxfed:test"
		start := time.Now()
		_, err = membership.Add(ctx, o)
		t.Logf("member add --check-endpoint %s:\n%s", endpoint, out.String())
		require.NoError(t, err)
		require.Contains(t, out.String(), "member-a: data path: checking from a pod in namespace research of the member that it reaches "+endpoint+" (up to 3s)\n")
		require.Regexp(t, `member-a: data path: could not check: pod research/fluxfed-data-path-check-\w+ \(image ghcr.io/fluxfed/fluxfed:\S+\) did not finish within 3s \(phase Running\): `+
			`the member's pods may not start`, out.String())
		require.Less(t, time.Since(start), 30*time.Second)
		var pods corev1.PodList
		require.NoError(t, memberClient.List(ctx, &pods, client.InNamespace("research")))
		for _, p := range pods.Items {
			require.NotNil(t, p.DeletionTimestamp, "the check's pod %s is deleted", p.Name)
		}
		require.NoError(t, membership.Remove(ctx, membership.RemoveOptions{Name: "member-a", Hub: hubConfig, Member: memberConfig}))

		// A pod that runs, as a kubelet would run it (the local cluster ends it with the exit
		// code and the termination message its program would write), reports the endpoint
		// unreachable: Add fails, and says what to do.
		report := endpoint + ": no Flux broker answers from the member: lead broker " + endpoint + ": cannot connect: connection refused"
		stop := make(chan struct{})
		defer close(stop)
		go func() {
			for {
				select {
				case <-stop:
					return
				case <-time.After(200 * time.Millisecond):
				}
				var pods corev1.PodList
				if memberClient.List(ctx, &pods, client.InNamespace("research")) != nil {
					continue
				}
				for _, p := range pods.Items {
					if p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning && p.Annotations[clusters.AnnotationExitCode] == "" {
						patch := client.MergeFrom(p.DeepCopy())
						p.Annotations = map[string]string{clusters.AnnotationExitCode: "1", clusters.AnnotationTerminationMessage: report}
						_ = memberClient.Patch(ctx, &p, patch)
					}
				}
			}
		}()
		out.Reset()
		o.CheckTimeout = 30 * time.Second
		_, err = membership.Add(ctx, o)
		t.Logf("member add --check-endpoint %s, the pod run:\n%s\nerror: %v", endpoint, out.String(), err)
		require.ErrorIs(t, err, membership.ErrDataPath)
		require.Contains(t, out.String(), "member-a: data path: "+report+"\n")
		require.ErrorContains(t, err, "the member stays registered, but a burst there will not join its root until the member's pods reach the root's lead broker")
		require.Contains(t, out.String(), "member-a: next: ", "the next step is printed all the same")
	})
}
