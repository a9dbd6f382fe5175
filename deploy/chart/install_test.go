package chart_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"helm.sh/helm/v4/pkg/kube"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"

	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
	"github.com/fluxfed/fluxfed/e2e/k8sbin"
	"github.com/fluxfed/fluxfed/internal/testenv"
)

// cluster is an API server for the tests that install fluxfed for real.
type cluster struct {
	Config *rest.Config
	Client client.Client
}

// Kubeconfig returns a kubeconfig that reaches the API server as an administrator.
func (c *cluster) Kubeconfig() ([]byte, error) { return testenv.Kubeconfig(c.Config) }

// bareEnv starts an API server without fluxfed's CRDs (testenv.Start installs them, owned by no
// Helm release), as a cluster is before fluxfed is installed, and stops it when the test ends.
func bareEnv(t *testing.T) *cluster {
	t.Helper()
	dir, err := k8sbin.Dir("kube-apiserver", "etcd")
	require.NoError(t, err)
	scheme, err := testenv.Scheme()
	require.NoError(t, err)
	require.NoError(t, apiextensionsv1.AddToScheme(scheme))
	env := &envtest.Environment{BinaryAssetsDirectory: dir, Scheme: scheme}
	// As testenv does: no default route in the loopback-only network namespace of the tests.
	env.ControlPlane.GetAPIServer().Configure().Set("advertise-address", "127.0.0.1")
	cfg, err := env.Start()
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, env.Stop()) })
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	require.NoError(t, err)
	return &cluster{Config: cfg, Client: c}
}

// helmClient runs Helm's install, upgrade and uninstall against env, as the helm command does
// with a kubeconfig for it (releases stored in Secrets, objects server-side applied).
type helmClient struct {
	t          *testing.T
	kubeconfig string
}

func newHelm(t *testing.T, env *cluster) *helmClient {
	t.Helper()
	kc, err := env.Kubeconfig()
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, os.WriteFile(path, kc, 0o600))
	return &helmClient{t: t, kubeconfig: path}
}

func (h *helmClient) config(namespace string) *action.Configuration {
	h.t.Helper()
	flags := genericclioptions.NewConfigFlags(false)
	flags.KubeConfig = &h.kubeconfig
	flags.Namespace = &namespace
	cfg := action.NewConfiguration()
	require.NoError(h.t, cfg.Init(flags, namespace, "secret"))
	return cfg
}

// install runs `helm install name chartPath -n namespace --create-namespace` with vals and
// returns the release's NOTES.
func (h *helmClient) install(name, namespace, chartPath string, vals map[string]any) (string, error) {
	h.t.Helper()
	chrt, err := loader.Load(chartPath)
	require.NoError(h.t, err)
	install := action.NewInstall(h.config(namespace))
	install.ReleaseName = name
	install.Namespace = namespace
	install.CreateNamespace = true
	install.WaitStrategy = kube.HookOnlyStrategy
	r, err := install.Run(chrt, vals)
	if err != nil {
		return "", err
	}
	rel, ok := r.(*releasev1.Release)
	require.True(h.t, ok, "a %T", r)
	return rel.Info.Notes, nil
}

func (h *helmClient) upgrade(name, namespace, chartPath string, vals map[string]any) error {
	h.t.Helper()
	chrt, err := loader.Load(chartPath)
	require.NoError(h.t, err)
	upgrade := action.NewUpgrade(h.config(namespace))
	upgrade.Namespace = namespace
	upgrade.WaitStrategy = kube.HookOnlyStrategy
	_, err = upgrade.Run(name, chrt, vals)
	return err
}

func (h *helmClient) uninstall(name, namespace string) {
	h.t.Helper()
	uninstall := action.NewUninstall(h.config(namespace))
	uninstall.WaitStrategy = kube.HookOnlyStrategy
	_, err := uninstall.Run(name)
	require.NoError(h.t, err)
}

// memberAddIdentity installs the hub's identity as `fluxfed member add` does: deploy/member-access
// server-side applied by its field manager.
func memberAddIdentity(t *testing.T, env *cluster) {
	t.Helper()
	ctx := context.Background()
	objs, err := testenv.Kustomize("member-access")
	require.NoError(t, err)
	for _, o := range objs {
		require.NoError(t, env.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(o),
			client.FieldOwner(fluxv1alpha2.FieldOwnerCLI), client.ForceOwnership), "%s %s", o.GetKind(), o.GetName())
	}
}

// The chart refuses to install over objects it does not own, saying who owns them and what to
// do, where Helm alone says "invalid ownership metadata"; and what it says to do works.
func TestChartRefusesWhatAnotherInstallOwns(t *testing.T) {
	env := bareEnv(t)
	h := newHelm(t, env)
	ctx := context.Background()
	member := map[string]any{"mode": "member", "memberAccess": map[string]any{"enabled": true}}

	t.Run("a member registered with fluxfed member add", func(t *testing.T) {
		memberAddIdentity(t, env)
		_, err := h.install("fluxfed", namespace, chartDir, member)
		require.Error(t, err)
		require.Contains(t, err.Error(), "this cluster was registered as a member with `fluxfed member add`, which installed the identity "+
			"a hub uses here (ClusterRole fluxfed-hub-member is its), and memberAccess.enabled=true would install it a second time")
		require.Contains(t, err.Error(), "install the chart without the identity (leave out memberAccess.enabled; it is false by default)")
		require.Contains(t, err.Error(), "fluxfed member remove NAME")
		require.NotContains(t, err.Error(), "invalid ownership metadata")

		// As it says: the chart without the identity installs, and leaves member add's alone.
		notes, err := h.install("fluxfed", namespace, chartDir, map[string]any{"mode": "member"})
		require.NoError(t, err)
		require.Contains(t, notes, "fluxfed member add NAME --member-context THIS_CONTEXT --hub-context HUB_CONTEXT --lend NAMESPACE")
		sa := &corev1.ServiceAccount{}
		require.NoError(t, env.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: "fluxfed-hub"}, sa))
		require.NotContains(t, sa.Annotations, "meta.helm.sh/release-name")
	})

	t.Run("a second release while the first is installed", func(t *testing.T) {
		_, err := h.install("second", "default", chartDir, nil)
		require.Error(t, err)
		require.Contains(t, err.Error(), "fluxfed is installed on this cluster already, as Helm release fluxfed in namespace fluxfed-system "+
			"(ClusterRole fluxfed-manager is its), and a cluster holds one fluxfed")
		require.Contains(t, err.Error(), "helm upgrade fluxfed deploy/chart/fluxfed -n fluxfed-system")
	})

	t.Run("CRDs kept by an uninstalled release, reinstalled under another name", func(t *testing.T) {
		h.uninstall("fluxfed", namespace)
		crd := &apiextensionsv1.CustomResourceDefinition{}
		require.NoError(t, env.Client.Get(ctx, client.ObjectKey{Name: "miniclusters.flux-framework.org"}, crd), "crds.keep")
		_, err := h.install("other", namespace, chartDir, nil)
		require.Error(t, err)
		require.Contains(t, err.Error(), "CustomResourceDefinition miniclusters.flux-framework.org belongs to Helm release fluxfed in "+
			"namespace fluxfed-system, which kept it (crds.keep) when it was uninstalled")
		require.Contains(t, err.Error(), "kubectl annotate crd miniclusters.flux-framework.org meta.helm.sh/release-name=other "+
			"meta.helm.sh/release-namespace=fluxfed-system --overwrite")

		// As it says: handed over, the CRD is the new release's.
		patch := client.RawPatch("application/merge-patch+json",
			[]byte(`{"metadata":{"annotations":{"meta.helm.sh/release-name":"other","meta.helm.sh/release-namespace":"fluxfed-system"}}}`))
		require.NoError(t, env.Client.Patch(ctx, crd, patch))
		_, err = h.install("other", namespace, chartDir, nil)
		require.NoError(t, err)
		h.uninstall("other", namespace)

		// Under the first name, nothing to hand over.
		require.NoError(t, env.Client.Patch(ctx, crd, client.RawPatch("application/merge-patch+json",
			[]byte(`{"metadata":{"annotations":{"meta.helm.sh/release-name":"fluxfed"}}}`))))
		_, err = h.install("fluxfed", namespace, chartDir, nil)
		require.NoError(t, err)
		h.uninstall("fluxfed", namespace)
	})

	t.Run("installed with kubectl", func(t *testing.T) {
		objs, err := testenv.Kustomize("rbac")
		require.NoError(t, err)
		for _, o := range objs {
			require.NoError(t, env.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(o),
				client.FieldOwner("kubectl"), client.ForceOwnership), "%s %s", o.GetKind(), o.GetName())
		}
		_, err = h.install("fluxfed", namespace, chartDir, nil)
		require.Error(t, err)
		require.Contains(t, err.Error(), "fluxfed is installed on this cluster already, without Helm "+
			`(ClusterRole fluxfed-manager exists, written by field manager "kubectl")`)
		require.Contains(t, err.Error(), "kubectl apply --server-side -f dist/fluxfed*.yaml")
	})
}

// A CRD that kubectl applied, and no Helm release owns: the chart says so, and installs with
// crds.install=false, as it says.
func TestChartRefusesACRDAppliedWithKubectl(t *testing.T) {
	env := bareEnv(t)
	h := newHelm(t, env)
	ctx := context.Background()
	objs, err := testenv.Kustomize("crd")
	require.NoError(t, err)
	require.Len(t, objs, 1)
	require.NoError(t, env.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(objs[0]), client.FieldOwner("kubectl")))
	_, err = h.install("fluxfed", namespace, chartDir, nil)
	require.Error(t, err)
	require.Contains(t, err.Error(), `CustomResourceDefinition miniclusters.flux-framework.org exists, written by field manager "kubectl", `+
		"and no Helm release owns it (it was applied with kubectl). Set crds.install=false")
	_, err = h.install("fluxfed", namespace, chartDir, map[string]any{"crds": map[string]any{"install": false}})
	require.NoError(t, err)
}

// dropSpecProperty removes property name from the spec of the MiniCluster CRD crd: the CRD of
// an older release that did not have it.
func dropSpecProperty(t *testing.T, crd map[string]any, name string) {
	t.Helper()
	versions, ok, err := unstructured.NestedSlice(crd, "spec", "versions")
	require.NoError(t, err)
	require.True(t, ok)
	v := versions[0].(map[string]any)
	props, ok, err := unstructured.NestedMap(v, "schema", "openAPIV3Schema", "properties", "spec", "properties")
	require.NoError(t, err)
	require.True(t, ok)
	require.Contains(t, props, name)
	delete(props, name)
	require.NoError(t, unstructured.SetNestedMap(v, props, "schema", "openAPIV3Schema", "properties", "spec", "properties"))
	versions[0] = v
	require.NoError(t, unstructured.SetNestedSlice(crd, versions, "spec", "versions"))
}

// olderChart copies the chart into a temporary directory as an older release of it: appVersion
// v0.0.9, and a MiniCluster CRD without spec.jobLabels.
func olderChart(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "fluxfed")
	require.NoError(t, os.CopyFS(dir, os.DirFS(chartDir)))
	path := filepath.Join(dir, "files", "crds", "miniclusters.yaml")
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	crd := map[string]any{}
	require.NoError(t, yaml.Unmarshal(data, &crd))
	dropSpecProperty(t, crd, "jobLabels")
	data, err = yaml.Marshal(crd)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, data, 0o644))
	meta := filepath.Join(dir, "Chart.yaml")
	data, err = os.ReadFile(meta)
	require.NoError(t, err)
	data = []byte(strings.Replace(string(data), "appVersion: ", "appVersion: v0.0.9 #", 1))
	require.NoError(t, os.WriteFile(meta, data, 0o644))
	return dir
}

// update is an object's change as a watch saw it.
type update struct {
	kind, name      string
	resourceVersion int64
	obj             *unstructured.Unstructured
}

// recordUpdates watches CRDs and Deployments from now on and returns a function that stops and
// returns what changed, in the order the API server's storage wrote it (resource versions are
// the revisions of its one etcd).
func recordUpdates(t *testing.T, env *cluster) func() []update {
	t.Helper()
	dyn, err := dynamic.NewForConfig(env.Config)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	var mu sync.Mutex
	var got []update
	var wg sync.WaitGroup
	for kind, gvr := range map[string]schema.GroupVersionResource{
		"CustomResourceDefinition": {Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"},
		"Deployment":               {Group: "apps", Version: "v1", Resource: "deployments"},
	} {
		list, err := dyn.Resource(gvr).List(ctx, metav1.ListOptions{})
		require.NoError(t, err)
		w, err := dyn.Resource(gvr).Watch(ctx, metav1.ListOptions{ResourceVersion: list.GetResourceVersion()})
		require.NoError(t, err)
		wg.Go(func() {
			for ev := range w.ResultChan() {
				u, ok := ev.Object.(*unstructured.Unstructured)
				if !ok || (ev.Type != watch.Modified && ev.Type != watch.Added) {
					continue
				}
				rv, err := strconv.ParseInt(u.GetResourceVersion(), 10, 64)
				if err != nil {
					continue
				}
				mu.Lock()
				got = append(got, update{kind: kind, name: u.GetName(), resourceVersion: rv, obj: u})
				mu.Unlock()
			}
		})
		t.Cleanup(w.Stop)
		context.AfterFunc(ctx, w.Stop)
	}
	return func() []update {
		time.Sleep(time.Second) // the last events in flight
		cancel()
		wg.Wait()
		return got
	}
}

// first returns the resource version of the first update of kind name that match accepts.
func first(t *testing.T, updates []update, kind, name string, match func(*unstructured.Unstructured) bool) int64 {
	t.Helper()
	for _, u := range updates {
		if u.kind == kind && u.name == name && match(u.obj) {
			return u.resourceVersion
		}
	}
	t.Fatalf("no update of %s %s as expected among %d", kind, name, len(updates))
	return 0
}

func hasJobLabels(crd *unstructured.Unstructured) bool {
	versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
	if len(versions) == 0 {
		return false
	}
	_, ok, _ := unstructured.NestedMap(versions[0].(map[string]any), "schema", "openAPIV3Schema", "properties", "spec", "properties", "jobLabels")
	return ok
}

func imageOf(d *unstructured.Unstructured) string {
	ctrs, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "containers")
	if len(ctrs) == 0 {
		return ""
	}
	s, _ := ctrs[0].(map[string]any)["image"].(string)
	return s
}

// miniCluster is a MiniCluster as a user writes it, optionally with spec.jobLabels.
func miniCluster(name string, jobLabels map[string]any) *unstructured.Unstructured {
	spec := map[string]any{
		"size":       int64(2),
		"containers": []any{map[string]any{"name": "hello", "image": "rockylinux:9", "command": "echo hello world"}},
	}
	if jobLabels != nil {
		spec["jobLabels"] = jobLabels
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "flux-framework.org/v1alpha2", "kind": "MiniCluster",
		"metadata": map[string]any{"name": name, "namespace": "default"}, "spec": spec,
	}}
}

// helm upgrade from an older release of the chart: the CRDs, templates of the chart, are
// updated, before the Deployment that runs the new manager, and the MiniClusters stay.
func TestChartUpgradesCRDsBeforeTheManager(t *testing.T) {
	env := bareEnv(t)
	h := newHelm(t, env)
	ctx := context.Background()
	older := olderChart(t)
	_, err := h.install("fluxfed", namespace, older, map[string]any{"mode": "hub"})
	require.NoError(t, err)

	c, err := client.New(env.Config, client.Options{})
	require.NoError(t, err)
	var before *unstructured.Unstructured
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		before = miniCluster("before", nil)
		require.NoError(ct, c.Create(ctx, before))
	}, 30*time.Second, 100*time.Millisecond, "the MiniCluster kind is served")

	stop := recordUpdates(t, env)
	require.NoError(t, h.upgrade("fluxfed", namespace, chartDir, map[string]any{"mode": "hub"}))
	updates := stop()

	chrt, err := loader.Load(chartDir)
	require.NoError(t, err)
	requireUpgraded(t, c, updates, before, "ghcr.io/fluxfed/fluxfed:"+chrt.Metadata.AppVersion)
}

// requireUpgraded checks an upgrade recorded in updates: the MiniCluster CRD (with jobLabels)
// was updated before the Deployment that runs image, the MiniCluster before of the older release
// stays, and a MiniCluster with the new field is accepted under strict field validation.
func requireUpgraded(t *testing.T, c client.Client, updates []update, before *unstructured.Unstructured, image string) {
	t.Helper()
	ctx := context.Background()
	crdAt := first(t, updates, "CustomResourceDefinition", "miniclusters.flux-framework.org", hasJobLabels)
	managerAt := first(t, updates, "Deployment", "fluxfed-manager", func(d *unstructured.Unstructured) bool { return imageOf(d) == image })
	require.Less(t, crdAt, managerAt, "the CRD is updated before the manager that needs it")

	after := &unstructured.Unstructured{}
	after.SetGroupVersionKind(before.GroupVersionKind())
	require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(before), after))
	require.Equal(t, before.GetUID(), after.GetUID(), "the MiniCluster of the older release stays")
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		mc := miniCluster(fmt.Sprintf("after-%d", time.Now().UnixNano()), map[string]any{"team": "a"})
		require.NoError(ct, c.Create(ctx, mc, client.FieldValidation("Strict")))
		require.Equal(ct, map[string]any{"team": "a"}, mc.Object["spec"].(map[string]any)["jobLabels"])
	}, 30*time.Second, 100*time.Millisecond, "the new field is served")
}
