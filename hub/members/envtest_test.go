package members

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/fluxfed/fluxfed/internal/testenv"
)

func TestCheckedKubeconfigReachesARealAPIServer(t *testing.T) {
	env := testenv.Start(t)
	data, err := env.Kubeconfig()
	require.NoError(t, err)

	cfg, err := Check(data)
	require.NoError(t, err)
	require.NoError(t, Limits(7, 11, 5*time.Second)(cfg))
	require.InDelta(t, 7, cfg.QPS, 0)
	require.Equal(t, 11, cfg.Burst)
	require.Zero(t, cfg.Timeout, "no client timeout: it would cut watches")

	clientset, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	namespaces, err := clientset.CoreV1().Namespaces().List(t.Context(), metav1.ListOptions{})
	require.NoError(t, err)
	require.NotEmpty(t, namespaces.Items)
}
