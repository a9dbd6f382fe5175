package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestLogsAndExecArguments(t *testing.T) {
	for _, tc := range []struct {
		args []string
		err  string
	}{
		{[]string{"logs"}, "logs takes the name of one root MiniCluster, got 0 arguments"},
		{[]string{"logs", "a", "b"}, "logs takes the name of one root MiniCluster, got 2 arguments"},
		{[]string{"exec", "lammps"}, "exec takes the root's name, then -- and the command, e.g. fluxfed exec lammps -- flux resource list"},
		{[]string{"exec", "lammps", "flux", "uptime"}, "exec takes the root's name, then -- and the command"},
		{[]string{"exec", "--", "flux", "uptime"}, "exec takes the root's name, then -- and the command"},
		{[]string{"logs", "lammps", "--rank", "x"}, `invalid argument "x" for "--rank"`},
	} {
		t.Run(fmt.Sprint(tc.args), func(t *testing.T) {
			err := run(context.Background(), tc.args, &bytes.Buffer{}, &bytes.Buffer{})
			require.ErrorContains(t, err, tc.err)
		})
	}
}

func TestExitCode(t *testing.T) {
	require.Equal(t, 3, exitCode(fmt.Errorf("wrapped: %w", exitError{code: 3})))
	require.Equal(t, 1, exitCode(errors.New("no gateway")))
}

// TestGatewayError: what a user reads when the gateway is missing or down.
func TestGatewayError(t *testing.T) {
	missing := apierrors.NewNotFound(schema.GroupResource{}, "")
	require.ErrorContains(t, gatewayError(missing), "is the hub's gateway installed? kubectl get apiservice v1alpha1.gateway.fluxfed.io shows it")
	root := apierrors.NewNotFound(schema.GroupResource{Group: "flux-framework.org", Resource: "miniclusters"}, "lammps")
	require.Equal(t, root, gatewayError(root))
	down := apierrors.NewServiceUnavailable("service unavailable")
	require.ErrorContains(t, gatewayError(down), "the hub's gateway does not answer (kubectl get apiservice v1alpha1.gateway.fluxfed.io says why)")
	forbidden := apierrors.NewForbidden(schema.GroupResource{Group: "gateway.fluxfed.io", Resource: "miniclusters/log"}, "lammps", errors.New("no"))
	require.Equal(t, forbidden, gatewayError(forbidden))
}
