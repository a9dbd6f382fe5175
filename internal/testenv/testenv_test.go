package testenv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
)

func TestMain(m *testing.M) { Main(m) }

func TestRepoRootHoldsTheModule(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(RepoRoot(), "go.mod"))
	require.NoError(t, err)
	require.Contains(t, string(data), "module github.com/fluxfed/fluxfed\n")
}

// TestStartServesTheMiniClusterAPI checks an API server that start started, the one the
// package's tests share (Start and StartN start theirs alike: TestStartNStartsSeparateAPIServers).
func TestStartServesTheMiniClusterAPI(t *testing.T) {
	t.Parallel() // each waits seconds for its API server
	env := Shared(t)
	ctx := context.Background()

	var namespaces corev1.NamespaceList
	require.NoError(t, env.Client.List(ctx, &namespaces))
	require.NotEmpty(t, namespaces.Items, "built-in namespaces")

	// The CRD is installed and established: listing MiniClusters works through the typed client.
	var mcs fluxv1alpha2.MiniClusterList
	require.NoError(t, env.Client.List(ctx, &mcs))
	require.Empty(t, mcs.Items)
}

func TestKubeconfigReachesTheAPIServer(t *testing.T) {
	t.Parallel() // each waits seconds for its API server
	env := Shared(t)
	data, err := env.Kubeconfig()
	require.NoError(t, err)

	cfg, err := clientcmd.RESTConfigFromKubeConfig(data)
	require.NoError(t, err)
	c, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	require.NoError(t, err)
	var mcs fluxv1alpha2.MiniClusterList
	require.NoError(t, c.List(context.Background(), &mcs))
}

func TestASharedAPIServerStartsOnceAndStopsAfterTheTests(t *testing.T) {
	t.Parallel() // each waits seconds for its API server
	ctx := context.Background()
	starts := 0
	s := &sharedServer{running: true, start: func() (*Env, error) { starts++; return start() }}
	t.Cleanup(func() { s.stop(0, io.Discard) })
	first, err := s.get()
	require.NoError(t, err)
	second, err := s.get()
	require.NoError(t, err)
	require.Same(t, first, second)
	require.Equal(t, 1, starts)
	var mcs fluxv1alpha2.MiniClusterList
	require.NoError(t, first.Client.List(ctx, &mcs))

	var stderr bytes.Buffer
	require.Equal(t, 3, s.stop(3, &stderr), "the tests' exit code")
	require.Empty(t, stderr.String())
	require.Error(t, first.Client.List(ctx, &mcs), "the API server is stopped")
	require.Equal(t, 0, s.stop(0, &stderr), "stopped once")
}

func TestSharedNeedsMainAndStartsOnlyOnce(t *testing.T) {
	starts := 0
	failing := func() (*Env, error) { starts++; return nil, errors.New("etcd did not start") }
	_, err := (&sharedServer{start: failing}).get()
	require.EqualError(t, err, "testenv.Shared needs the package's TestMain to call testenv.Main(m) or testenv.Run(m), which stop the shared API server after the last test")
	require.Zero(t, starts)

	s := &sharedServer{running: true, start: failing}
	for range 2 {
		_, err := s.get()
		require.EqualError(t, err, "the API server the package's tests share: etcd did not start")
	}
	require.Equal(t, 1, starts, "a failed start is not tried again")
	require.Equal(t, 0, s.stop(0, io.Discard))
}

func TestStartNStartsSeparateAPIServers(t *testing.T) {
	t.Parallel() // each waits seconds for its API server
	envs := StartN(t, 2)
	require.Len(t, envs, 2)
	require.NotEqual(t, envs[0].Config.Host, envs[1].Config.Host)
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "only-on-the-first"}}
	require.NoError(t, envs[0].Client.Create(ctx, ns))
	require.True(t, apierrors.IsNotFound(envs[1].Client.Get(ctx, client.ObjectKeyFromObject(ns), &corev1.Namespace{})))
}

func TestGoroutinesNamesAGoroutineThatWaits(t *testing.T) {
	stop := make(chan struct{})
	started := make(chan struct{})
	go waitForTheTest(started, stop)
	<-started
	defer close(stop)
	got := Goroutines()
	require.Contains(t, got, "github.com/fluxfed/fluxfed/internal/testenv.waitForTheTest")
	for g := range strings.SplitSeq(strings.TrimSpace(got), "\n\n") {
		require.True(t, strings.HasPrefix(g, "goroutine "), "a whole stack: %s", g)
		require.Regexp(t, `github\.com/fluxfed/fluxfed/|sigs\.k8s\.io/`, g)
	}
}

// waitForTheTest is a goroutine of fluxfed's code that waits.
func waitForTheTest(started, stop chan struct{}) {
	close(started)
	<-stop
}

func TestWarningsAreTakenOnce(t *testing.T) {
	w := &Warnings{}
	require.Empty(t, w.Take())
	w.HandleWarningHeaderWithContext(context.Background(), 299, "-", "first")
	w.HandleWarningHeaderWithContext(context.Background(), 299, "-", "second")
	require.Equal(t, []string{"first", "second"}, w.Take())
	require.Empty(t, w.Take(), "taken warnings are forgotten")
}

// TestAnAPIServerThatDoesNotStartSaysWhyFromItsOutput starts kube-apiserver with a flag it does
// not know: the error names the components, the time each may take, and quotes the end of
// kube-apiserver's output, where it says what was wrong.
func TestAnAPIServerThatDoesNotStartSaysWhyFromItsOutput(t *testing.T) {
	t.Parallel() // each waits seconds for its API server
	env, err := startWith(map[string]string{"no-such-flag": "1"})
	if env != nil {
		require.NoError(t, env.control.Stop())
	}
	require.Error(t, err)
	require.Contains(t, err.Error(), "starting etcd and kube-apiserver from ")
	require.Contains(t, err.Error(), "(each may take 3m0s to start)")
	require.Regexp(t, `(?s)kube-apiserver's output ends:\n.*unknown flag: --no-such-flag`, err.Error())
	require.Contains(t, err.Error(), "KUBEBUILDER_CONTROLPLANE_START_TIMEOUT")
}

func TestTailBufferKeepsTheEnd(t *testing.T) {
	b := &tailBuffer{max: 8}
	require.Equal(t, "  (nothing)", b.String())
	_, _ = b.Write([]byte("first\nsecond\n"))
	_, _ = b.Write([]byte("third\n"))
	require.Equal(t, "  d\n  third", b.String(), "the last 8 bytes")
	b = &tailBuffer{max: 1 << 10}
	for i := range 20 {
		_, _ = fmt.Fprintf(b, "line %d\n", i)
	}
	require.Equal(t, "  line 12\n  line 13\n  line 14\n  line 15\n  line 16\n  line 17\n  line 18\n  line 19", b.String(), "the last 8 lines")
}
