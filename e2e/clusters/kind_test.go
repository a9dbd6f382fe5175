package clusters

import (
	"context"
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/client-go/tools/clientcmd"
)

func TestKindConfig(t *testing.T) {
	for workers, want := range map[int]string{
		0: "kind: Cluster\napiVersion: kind.x-k8s.io/v1alpha4\nnodes:\n- role: control-plane\n",
		2: "kind: Cluster\napiVersion: kind.x-k8s.io/v1alpha4\nnodes:\n- role: control-plane\n- role: worker\n- role: worker\n",
	} {
		require.Equal(t, want, string(kindConfig(workers)))
	}
	require.Equal(t, 4, (&kindProvider{}).nodeCount(3), "the control plane is a node too")
}

func TestKindCreateArgs(t *testing.T) {
	for _, tc := range []struct {
		image string
		want  []string
	}{
		{"", []string{"create", "cluster", "--name=fluxfed-hub-abc", "--config=/r/kind.yaml", "--kubeconfig=/r/kc", "--wait=0s"}},
		{"kindest/node:v1.36.3", []string{"create", "cluster", "--name=fluxfed-hub-abc", "--config=/r/kind.yaml", "--kubeconfig=/r/kc", "--wait=0s", "--image=kindest/node:v1.36.3"}},
	} {
		require.Equal(t, tc.want, kindCreateArgs("fluxfed-hub-abc", "/r/kind.yaml", "/r/kc", tc.image))
	}
}

func TestKindClusterName(t *testing.T) {
	require.Equal(t, "fluxfed-member-a-0f0f0f", kindClusterName("member-a", "0f0f0f"))
	long := kindClusterName(strings.Repeat("x", 63), "0f0f0f")
	require.LessOrEqual(t, len(long+"-control-plane"), 63, "node container names are host names")
}

func TestKindNeedsTheCLI(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	_, err := Start(context.Background(), Options{Dir: t.TempDir(), Provider: ProviderKind})
	require.ErrorContains(t, err, "needs the kind CLI")
}

// fakeKind puts a kind CLI on PATH that records its arguments and, on create, writes a kubeconfig
// the way kind does (entries named kind-<name>) for a server that does not answer.
func fakeKind(t *testing.T) (calls string, keys *pki) {
	t.Helper()
	keys, err := newPKI("kind", planFor(0).serviceIP(), nil)
	require.NoError(t, err)
	b64 := base64.StdEncoding.EncodeToString
	bin := t.TempDir()
	calls = filepath.Join(bin, "calls")
	script := `#!/bin/sh
echo "$*" >> ` + calls + `
[ "$1" = create ] || exit 0
for a in "$@"; do
	case $a in
	--kubeconfig=*) kc=${a#--kubeconfig=} ;;
	--name=*) n=${a#--name=} ;;
	esac
done
cat > "$kc" <<EOF
apiVersion: v1
kind: Config
clusters: [{name: kind-$n, cluster: {server: "https://127.0.0.1:1", certificate-authority-data: ` + b64(keys.CACert) + `}}]
users: [{name: kind-$n, user: {client-certificate-data: ` + b64(keys.AdminCert) + `, client-key-data: ` + b64(keys.AdminKey) + `}}]
contexts: [{name: kind-$n, context: {cluster: kind-$n, user: kind-$n}}]
current-context: kind-$n
EOF
`
	require.NoError(t, os.WriteFile(filepath.Join(bin, "kind"), []byte(script), 0o755))
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	return calls, keys
}

func TestKindProviderUpAndDown(t *testing.T) {
	calls, keys := fakeKind(t)
	dir := t.TempDir()
	opts := Options{Names: []string{"member-a"}, Dir: dir, Provider: ProviderKind, NodesPerCluster: 3}
	require.NoError(t, opts.complete())
	k := &kindProvider{}
	require.NoError(t, k.prepare(opts))
	env := &Environment{Provider: ProviderKind, Dir: dir, logf: t.Logf}
	c := &Cluster{Name: "member-a", Dir: filepath.Join(dir, "member-a"), Kubeconfig: filepath.Join(dir, "member-a", "kubeconfig")}
	env.Clusters = []*Cluster{c}
	require.NoError(t, os.MkdirAll(filepath.Join(c.Dir, "logs"), 0o755))

	require.NoError(t, k.up(context.Background(), env, c))
	require.Equal(t, "fluxfed-member-a-"+k.suffix, c.KindName)
	kc, err := clientcmd.LoadFromFile(c.Kubeconfig)
	require.NoError(t, err)
	require.Equal(t, "member-a", kc.CurrentContext)
	require.Equal(t, "https://127.0.0.1:1", kc.Clusters["member-a"].Server)
	require.Equal(t, keys.AdminCert, kc.AuthInfos["member-a"].ClientCertificateData)
	config, err := os.ReadFile(filepath.Join(c.Dir, "kind.yaml"))
	require.NoError(t, err)
	require.Equal(t, 3, strings.Count(string(config), "role: worker"))

	// The kind cluster is in the state file, so that another program can delete it.
	loaded, err := Load(dir)
	require.NoError(t, err)
	require.NoError(t, loaded.Stop())
	data, err := os.ReadFile(calls)
	require.NoError(t, err)
	require.Equal(t, []string{
		strings.Join(kindCreateArgs(c.KindName, filepath.Join(c.Dir, "kind.yaml"), filepath.Join(c.Dir, "kind-kubeconfig"), ""), " "),
		"delete cluster --name=" + c.KindName,
	}, strings.Split(strings.TrimSpace(string(data)), "\n"))
}

// TestKindClusterThatNeverGetsReady goes through Start: the shared waiting times out on a server
// that does not answer, and Start deletes the kind cluster it created.
func TestKindClusterThatNeverGetsReady(t *testing.T) {
	calls, _ := fakeKind(t)
	_, err := Start(context.Background(), Options{Names: []string{"hub"}, Dir: t.TempDir(), Provider: ProviderKind, Timeout: time.Second})
	require.ErrorContains(t, err, "waiting for the API server to be ready")
	data, err := os.ReadFile(calls)
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	require.Len(t, lines, 2)
	require.True(t, strings.HasPrefix(lines[0], "create cluster --name=fluxfed-hub-"), lines[0])
	require.True(t, strings.HasPrefix(lines[1], "delete cluster --name=fluxfed-hub-"), lines[1])
}
