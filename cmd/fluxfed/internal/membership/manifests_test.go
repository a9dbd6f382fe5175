package membership

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	fedv1alpha1 "github.com/fluxfed/fluxfed/api/fluxfed/v1alpha1"
	"github.com/fluxfed/fluxfed/internal/testenv"
)

// TestRenderIsWhatKubectlKustomizeBuilds: what Add applies from the embedded manifests is what
// `kubectl apply -k deploy/member-access...` would apply, object for object.
func TestRenderIsWhatKubectlKustomizeBuilds(t *testing.T) {
	byName := func(objs []*unstructured.Unstructured) map[string]string {
		out := map[string]string{}
		for _, o := range objs {
			data, err := json.Marshal(o.Object)
			require.NoError(t, err)
			out[describe(o)] = string(data)
		}
		return out
	}
	for _, dir := range []string{"member-access", "member-access-any", "member-access-token"} {
		t.Run(dir, func(t *testing.T) {
			want, err := testenv.Kustomize(dir)
			require.NoError(t, err)
			got, err := render(dir)
			require.NoError(t, err)
			require.Len(t, got, len(want))
			require.Equal(t, byName(want), byName(got))
			require.Equal(t, "Namespace", got[0].GetKind(), "the namespace is applied first")
		})
	}
}

func TestOptionsRefuseWhatCannotWork(t *testing.T) {
	base := func() Options {
		return Options{Name: "member-a", Hub: testConfig, Member: testConfig}
	}
	for name, tc := range map[string]struct {
		change  func(*Options)
		wantErr string
		check   func(*testing.T, Options)
	}{
		"defaults": {change: func(*Options) {}, check: func(t *testing.T, o Options) {
			require.Equal(t, AccessNamespaces, o.Access)
			require.Equal(t, fedv1alpha1.NamespaceAllowMirror, o.Allow)
			require.Equal(t, "fluxfed-system", o.Namespace)
			require.Equal(t, testConfig.Host, o.MemberServer)
			require.Equal(t, DefaultTokenTTL, o.TokenTTL)
			require.Equal(t, []string{"member-access"}, o.accessDirs())
		}},
		"lent namespaces are mirrored": {change: func(o *Options) { o.Lend = []string{"research"} }, check: func(t *testing.T, o Options) {
			require.Equal(t, fedv1alpha1.NamespaceAllowMirror, o.Allow)
		}},
		"lent namespaces listed": {change: func(o *Options) {
			o.Lend, o.Allow = []string{"research"}, fedv1alpha1.NamespaceAllowListed
		}, check: func(t *testing.T, o Options) {
			m, err := memberCluster(o)
			require.NoError(t, err)
			require.Equal(t, map[string]any{"allow": "Listed", "names": []any{"research"}}, m.Object["spec"].(map[string]any)["namespaces"])
		}},
		"any": {change: func(o *Options) { o.Access = AccessAny; o.CreateNamespaces = true }, check: func(t *testing.T, o Options) {
			require.Equal(t, fedv1alpha1.NamespaceAllowAny, o.Allow)
			require.Equal(t, []string{"member-access-any"}, o.accessDirs())
		}},
		"token": {change: func(o *Options) { o.NonExpiringToken = true }, check: func(t *testing.T, o Options) {
			require.Equal(t, []string{"member-access", "member-access-token"}, o.accessDirs())
		}},
		"any, token": {change: func(o *Options) { o.Access = AccessAny; o.NonExpiringToken = true }, check: func(t *testing.T, o Options) {
			require.Equal(t, []string{"member-access-any", "member-access-token"}, o.accessDirs())
			objs, err := accessObjects(o.accessDirs())
			require.NoError(t, err)
			var names []string
			for _, obj := range objs {
				names = append(names, describe(obj))
			}
			require.Len(t, names, 9, "each object once: %v", names)
			require.Contains(t, names, "Secret fluxfed-system/fluxfed-hub-token")
			require.Contains(t, names, "ClusterRole fluxfed-hub-namespaces")
		}},
		"no name":                {change: func(o *Options) { o.Name = "" }, wantErr: "name"},
		"unknown access":         {change: func(o *Options) { o.Access = "all" }, wantErr: `access "all"`},
		"listed without names":   {change: func(o *Options) { o.Allow = fedv1alpha1.NamespaceAllowListed }, wantErr: "at least one"},
		"allow any, access less": {change: func(o *Options) { o.Allow = fedv1alpha1.NamespaceAllowAny }, wantErr: "needs access any"},
		"create, access less":    {change: func(o *Options) { o.CreateNamespaces = true }, wantErr: "needs access any"},
		"lend kube-system":       {change: func(o *Options) { o.Lend = []string{"kube-system"} }, wantErr: "never burst into"},
		"lend with any":          {change: func(o *Options) { o.Access = AccessAny; o.Lend = []string{"research"} }, wantErr: "lends every namespace"},
		"short token":            {change: func(o *Options) { o.TokenTTL = 1 }, wantErr: "no less than 10m"},
	} {
		t.Run(name, func(t *testing.T) {
			o := base()
			tc.change(&o)
			err := o.defaults()
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			tc.check(t, o)
		})
	}
}
