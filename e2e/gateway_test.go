package e2e

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
	"github.com/fluxfed/fluxfed/hub/gateway"
)

// TestLogsAndExecThroughTheHub runs `fluxfed logs` and `fluxfed exec` as hub users who hold no
// member kubeconfig: the hub's API server forwards them to the hub's gateway, which reads a
// burst's broker log on its member and runs flux in the lead broker, for a user who may do the
// same to the root's own pods on the hub, and refuses, naming the missing permission, a user who
// may not.
func TestLogsAndExecThroughTheHub(t *testing.T) {
	ctx := context.Background()
	root, ns := applyExample(t, "bursting-root.yaml", nil)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		require.True(c, get(c, "hub", root))
		b := burstOf(root, "burst-a")
		require.NotNil(c, b)
		require.Equal(c, fluxv1alpha2.BurstReady, b.Phase, b.Message)
		require.Equal(c, hostnames("burst-a", 3), podHostnames(c, "member-a", ns, "burst-a"))
	}, wait, tick)

	// kwok serves the log of burst-a's second broker (rank 3) from a file, written as a container
	// runtime writes one.
	dir := t.TempDir()
	logFile := filepath.Join(dir, "burst-a-1.log")
	require.NoError(t, os.WriteFile(logFile, []byte("2026-11-27T16:00:00.000000000Z stdout F broker.info[3]: joined burst-a-1 to the instance\n"), 0o644))
	member := shared.Env.Cluster("member-a")
	var pods corev1.PodList
	require.NoError(t, shared.Clients["member-a"].List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{fluxv1alpha2.LabelMiniCluster: "burst-a"}))
	for _, p := range pods.Items {
		if p.Spec.Hostname == "burst-a-1" {
			require.NoError(t, member.LogsLocally(ctx, ns, p.Name, logFile, false))
		}
	}
	// A stand-in Flux answers in the lead broker's container.
	instance, err := shared.StartFlux(ctx, root, filepath.Join(dir, "flux"))
	require.NoError(t, err)
	t.Cleanup(instance.Stop)

	// reader may read the root and its pods' logs; operator may also exec; outsider has the
	// gateway's own permissions (as every viewer and editor does) but nothing on the root's pods.
	hub := shared.Clients["hub"]
	grant := func(user string, rules ...rbacv1.PolicyRule) {
		require.NoError(t, hub.Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: user}, Rules: rules}))
		require.NoError(t, hub.Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: user},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: user},
			Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}}}))
	}
	gatewayRule := rbacv1.PolicyRule{APIGroups: []string{gateway.Group}, Resources: []string{"miniclusters/log", "miniclusters/exec"}, Verbs: []string{"get", "create"}}
	readRoot := rbacv1.PolicyRule{APIGroups: []string{fluxv1alpha2.GroupVersion.Group}, Resources: []string{"miniclusters"}, Verbs: []string{"get"}}
	grant("reader", gatewayRule, readRoot, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"pods/log"}, Verbs: []string{"get"}})
	grant("operator", gatewayRule, readRoot, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"pods/log", "pods/exec"}, Verbs: []string{"get", "create"}})
	grant("outsider", gatewayRule, readRoot)

	fluxfed := func(user string, args ...string) (string, string, int) {
		kc, err := clientcmd.LoadFromFile(shared.Env.Kubeconfig)
		require.NoError(t, err)
		kc.CurrentContext = "hub"
		for _, a := range kc.AuthInfos {
			a.Impersonate = user
		}
		path := filepath.Join(dir, user+".kubeconfig")
		require.NoError(t, clientcmd.WriteToFile(*kc, path))
		// The flags go before a command that exec runs.
		cmd := exec.CommandContext(ctx, shared.Binary, append([]string{args[0], "--kubeconfig", path, "-n", ns}, args[1:]...)...)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err = cmd.Run()
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return stdout.String(), stderr.String(), exit.ExitCode()
		}
		require.NoError(t, err)
		return stdout.String(), stderr.String(), 0
	}

	// The gateway is up once the hub's API server finds it available.
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		out, errOut, code := fluxfed("reader", "logs", "bursting-root", "--burst", "burst-a", "--rank", "3")
		require.Equal(c, 0, code, errOut)
		require.Equal(c, "broker.info[3]: joined burst-a-1 to the instance\n", out)
	}, wait, tick)

	out, errOut, code := fluxfed("operator", "exec", "bursting-root", "--", "flux", "uptime")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, " run ")
	require.Contains(t, out, "size 7\n")
	// What the stand-in prints when a command fails reaches the caller, and fluxfed fails.
	_, errOut, code = fluxfed("operator", "exec", "bursting-root", "--", "flux", "resource", "list")
	require.NotEqual(t, 0, code)
	require.Contains(t, errOut, `flux-resource: ERROR: resource "list" is not simulated`)
	t.Log("\n" + out)

	_, errOut, code = fluxfed("reader", "exec", "bursting-root", "--", "flux", "resource", "status")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, `user "reader" may not create pods/exec in namespace `+ns+` on the hub`)

	_, errOut, code = fluxfed("outsider", "logs", "bursting-root", "--burst", "burst-a")
	t.Log(errOut)
	require.Equal(t, 1, code)
	require.Contains(t, errOut, `user "outsider" may not get pods/log in namespace `+ns+` on the hub`)

	// A rank no pod runs, and a burst the root does not have.
	_, errOut, code = fluxfed("reader", "logs", "bursting-root", "--rank", "42")
	t.Log(errOut)
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "root bursting-root has ranks 0-6, not 42")
	_, errOut, code = fluxfed("reader", "logs", "bursting-root", "--burst", "burst-z")
	require.Equal(t, 1, code)
	require.True(t, strings.Contains(errOut, `root bursting-root has no burst "burst-z"`), errOut)
}
