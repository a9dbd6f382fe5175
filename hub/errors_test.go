package hub

import (
	"context"
	"errors"
	"fmt"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/stretchr/testify/require"

	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
	"github.com/fluxfed/fluxfed/hub/policy"
	"github.com/fluxfed/fluxfed/internal/apply"
)

// TestReasonOf reads the reason of errors met pushing to a member.
func TestReasonOf(t *testing.T) {
	mc := schema.GroupResource{Group: fluxv1alpha2.GroupVersion.Group, Resource: "miniclusters"}
	tests := []struct {
		name string
		err  error
		want string
	}{
		{name: "a burst's own reason", err: failed(fluxv1alpha2.ReasonMemberNotFound, errors.New("no MemberCluster b")), want: fluxv1alpha2.ReasonMemberNotFound},
		{name: "its own reason wins over what it wraps", err: failed(fluxv1alpha2.ReasonApplyFailed, context.DeadlineExceeded), want: fluxv1alpha2.ReasonApplyFailed},
		{name: "a refusal's reason", err: fmt.Errorf("pushing: %w", &apply.Refusal{Reason: fluxv1alpha2.ReasonConflict, Object: "MiniCluster default/c", Message: "not ours"}),
			want: fluxv1alpha2.ReasonConflict},
		{name: "the owner's namespace policy", err: &policy.NamespaceError{Namespace: "x", Field: "spec.namespaces", Reason: "not lent"}, want: fluxv1alpha2.ReasonNamespaceNotAllowed},
		{name: "the owner's Pod Security level", err: fmt.Errorf("child: %w", &policy.PodSecurityError{}), want: fluxv1alpha2.ReasonPodSecurityViolation},
		{name: "the member answered and refused", err: apierrors.NewForbidden(mc, "c", errors.New("no")), want: fluxv1alpha2.ReasonApplyFailed},
		{name: "an invalid object", err: apierrors.NewBadRequest("bad"), want: fluxv1alpha2.ReasonApplyFailed},
		{name: "a server timeout is no answer", err: apierrors.NewTimeoutError("slow", 1), want: fluxv1alpha2.ReasonMemberUnreachable},
		{name: "throttling is no answer", err: apierrors.NewTooManyRequests("busy", 1), want: fluxv1alpha2.ReasonMemberUnreachable},
		{name: "a server error is no answer", err: apierrors.NewInternalError(errors.New("etcd")), want: fluxv1alpha2.ReasonMemberUnreachable},
		{name: "no API status at all", err: errors.New("dial tcp 127.0.0.1:1: connect: connection refused"), want: fluxv1alpha2.ReasonMemberUnreachable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, reasonOf(fromMember(tt.err)))
		})
	}
}

func TestAnErrorWithoutAReasonIsAnApplyFailure(t *testing.T) {
	require.Equal(t, fluxv1alpha2.ReasonApplyFailed, reasonOf(errors.New("boom")))
	err := failed(fluxv1alpha2.ReasonMemberNotFound, errors.New("gone"))
	require.Same(t, err, fromMember(err), "an error with a reason keeps it")
}

func TestOwnerRefusalWithdraws(t *testing.T) {
	_, ok := ownerRefusal(&policy.NamespaceError{Namespace: "x"})
	require.True(t, ok)
	_, ok = ownerRefusal(errors.New("the child cannot be rendered"))
	require.False(t, ok, "a child that cannot be rendered is a spec to fix, nothing to withdraw")
}
