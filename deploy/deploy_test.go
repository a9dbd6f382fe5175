// Package deploy holds the manifests that install fluxfed. This test builds every kustomization
// with kubectl and applies the result to a real API server with server-side dry-run, so a
// malformed manifest, a wrong kind or a missing namespace fails here and not on a user's cluster.
package deploy_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fluxfed/fluxfed/e2e/k8sbin"
	"github.com/fluxfed/fluxfed/internal/metrics"
	"github.com/fluxfed/fluxfed/internal/testenv"
)

func kustomize(t *testing.T, dir string) []*unstructured.Unstructured {
	t.Helper()
	objs, err := testenv.Kustomize(dir)
	require.NoError(t, err)
	return objs
}

// The tests that apply with server-side dry-run share one API server (testenv.Shared): they
// store nothing but the namespace fluxfed-system and the CRDs they need.
// TestWhatTheHubMayDoOnAMember applies access for real and starts one of its own.
func TestMain(m *testing.M) { testenv.Main(m) }

// systemNamespace makes sure namespace fluxfed-system exists on the shared API server, which
// namespaced objects need to be dry-run.
func systemNamespace(t *testing.T, env *testenv.Env) {
	t.Helper()
	err := env.Client.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "fluxfed-system"}})
	if !apierrors.IsAlreadyExists(err) {
		require.NoError(t, err)
	}
}

func TestDefaultKustomizationAppliesWithServerSideDryRun(t *testing.T) {
	objs := kustomize(t, "default")
	kinds := map[string]int{}
	for _, o := range objs {
		kinds[o.GetKind()]++
	}
	require.Equal(t, map[string]int{
		"CustomResourceDefinition": 1, "Namespace": 1, "ServiceAccount": 1, "ClusterRole": 2,
		"ClusterRoleBinding": 1, "Role": 1, "RoleBinding": 1, "Deployment": 1, "Service": 1,
		"ValidatingAdmissionPolicy": 1, "ValidatingAdmissionPolicyBinding": 1,
	}, kinds)

	env := testenv.Shared(t)
	ctx := context.Background()
	// The namespace must exist for namespaced objects to be dry-run; everything else is only
	// validated, not stored.
	systemNamespace(t, env)
	for _, o := range objs {
		if o.GetKind() == "Namespace" || o.GetKind() == "CustomResourceDefinition" {
			continue // the CRD is installed by testenv; applying it again would conflict on ownership
		}
		err := env.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(o.DeepCopy()),
			client.FieldOwner("deploy-test"), client.DryRunAll)
		require.NoError(t, err, "%s %s", o.GetKind(), o.GetName())
	}
}

func TestManagerRoleGrantsWhatTheReconcilerUses(t *testing.T) {
	var role *rbacv1.ClusterRole
	for _, o := range kustomize(t, "rbac") {
		if o.GetKind() == "ClusterRole" && o.GetName() == "fluxfed-manager" {
			role = &rbacv1.ClusterRole{}
			data, err := o.MarshalJSON()
			require.NoError(t, err)
			require.NoError(t, utilyaml.Unmarshal(data, role))
		}
	}
	require.NotNil(t, role)
	allowed := map[string]bool{}
	for _, rule := range role.Rules {
		for _, g := range rule.APIGroups {
			for _, r := range rule.Resources {
				for _, v := range rule.Verbs {
					allowed[g+"/"+r+":"+v] = true
				}
			}
		}
	}
	for _, want := range []string{
		"flux-framework.org/miniclusters:watch", "flux-framework.org/miniclusters/status:patch",
		"batch/jobs:patch", "/configmaps:patch", "/services:patch", "/secrets:create", "/pods:deletecollection",
		"/pods:list",     // reads how the lead broker's container ended, once the Job has
		"/secrets:patch", // puts back the label of a CURVE Secret someone stripped
		"events.k8s.io/events:create",
		// The metrics endpoint authenticates and authorizes its scrapers.
		"authentication.k8s.io/tokenreviews:create", "authorization.k8s.io/subjectaccessreviews:create",
	} {
		require.True(t, allowed[want], "the manager role lacks %s", want)
	}
	for _, notWanted := range []string{"/secrets:update", "/secrets:delete", "/pods:get", "/pods:watch", "/pods:delete"} {
		require.False(t, allowed[notWanted], "the manager role grants %s, which the reconciler never uses", notWanted)
	}
}

func TestHubAndMemberAccessKustomizationsApplyWithServerSideDryRun(t *testing.T) {
	kindsOf := func(objs []*unstructured.Unstructured) map[string]int {
		kinds := map[string]int{}
		for _, o := range objs {
			kinds[o.GetKind()]++
		}
		return kinds
	}
	hubObjs := kustomize(t, "hub")
	require.Equal(t, map[string]int{
		"CustomResourceDefinition": 2, "Namespace": 1, "ServiceAccount": 1, "ClusterRole": 5,
		// Leader election's, and the hub's for its ownership key; the gateway's reading of the
		// API server's front-proxy settings, its Service and APIService.
		"ClusterRoleBinding": 2, "Role": 2, "RoleBinding": 3, "Deployment": 1, "Service": 2, "APIService": 1,
		"ValidatingAdmissionPolicy": 1, "ValidatingAdmissionPolicyBinding": 1,
	}, kindsOf(hubObjs))
	var crds []string
	for _, o := range hubObjs {
		if o.GetKind() == "CustomResourceDefinition" {
			crds = append(crds, o.GetName())
		}
		if o.GetKind() == "Deployment" {
			args, _, err := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
			require.NoError(t, err)
			require.Contains(t, args[0].(map[string]any)["args"], "--hub")
		}
	}
	require.ElementsMatch(t, []string{"miniclusters.flux-framework.org", "memberclusters.fluxfed.io"}, crds,
		"the hub serves MiniClusters and registers members as MemberClusters")
	accessObjs := kustomize(t, "member-access")
	require.Equal(t, map[string]int{"Namespace": 1, "ServiceAccount": 1, "ClusterRole": 2, "ClusterRoleBinding": 1},
		kindsOf(accessObjs), "no token that never expires unless asked for, and no namespace lent")
	withToken := kustomize(t, "member-access-token")
	require.Equal(t, map[string]int{"Namespace": 1, "ServiceAccount": 1, "Secret": 1, "ClusterRole": 2, "ClusterRoleBinding": 1},
		kindsOf(withToken), "asked for, the token Secret")
	anyObjs := kustomize(t, "member-access-any")
	require.Equal(t, map[string]int{"Namespace": 1, "ServiceAccount": 1, "ClusterRole": 3, "ClusterRoleBinding": 3},
		kindsOf(anyObjs), "the whole member lent")

	env := testenv.Shared(t)
	ctx := context.Background()
	systemNamespace(t, env)
	for _, o := range append(hubObjs, anyObjs...) {
		if o.GetKind() == "Namespace" || o.GetKind() == "CustomResourceDefinition" {
			continue
		}
		err := env.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(o.DeepCopy()),
			client.FieldOwner("deploy-test"), client.DryRunAll)
		require.NoError(t, err, "%s %s", o.GetKind(), o.GetName())
	}
}

// TestWhatTheHubMayDoOnAMember asks the API server of a member, as kubectl auth can-i would,
// what the identity of deploy/member-access may do: with nothing lent, only what makes it a
// member; in a namespace its owner lent with the RoleBinding of docs/bursting.md, what the hub
// needs there and nowhere else; with deploy/member-access-any, that in every namespace, and the
// creation of namespaces. Never anything that would let it run pods itself, grant permissions,
// or touch what it never pushes.
func TestWhatTheHubMayDoOnAMember(t *testing.T) {
	env := testenv.Start(t)
	ctx := context.Background()
	require.NoError(t, env.ApplyDeploy(ctx, "member-access"))
	cs, err := kubernetes.NewForConfig(env.Config)
	require.NoError(t, err)
	const hub = "system:serviceaccount:fluxfed-system:fluxfed-hub"
	type check struct {
		verb, group, resource, namespace, name string
		allowed                                bool
	}
	// In every mode.
	always := []check{
		{"get", "", "namespaces", "", "kube-system", true},
		{"list", "", "nodes", "", "", true},
		{"create", "authorization.k8s.io", "selfsubjectaccessreviews", "", "", true},
		{"get", "", "namespaces", "", "research", false},
		{"list", "", "namespaces", "", "", false},
		{"delete", "", "namespaces", "", "research", false},
		{"patch", "", "namespaces", "", "research", false},
		{"update", "", "secrets", "research", "burst-a-curve", false},
		{"patch", "flux-framework.org", "miniclusters/status", "research", "burst-a", false},
		{"create", "", "pods", "research", "", false},
		{"create", "batch", "jobs", "research", "", false},
		{"create", "", "pods/exec", "research", "", false},
		{"delete", "", "pods", "research", "burst-a-0-x", false},
		{"create", "", "serviceaccounts/token", "kube-system", "default", false},
		{"create", "rbac.authorization.k8s.io", "rolebindings", "research", "", false},
		{"create", "rbac.authorization.k8s.io", "clusterrolebindings", "", "", false},
		{"escalate", "rbac.authorization.k8s.io", "clusterroles", "", "", false},
		{"bind", "rbac.authorization.k8s.io", "clusterroles", "", "fluxfed-hub-burst", false},
		{"impersonate", "", "serviceaccounts", "kube-system", "", false},
		{"get", "", "configmaps", "kube-system", "", false},
		{"delete", "", "nodes", "", "node-1", false},
		{"create", "fluxfed.io", "memberclusters", "", "", false},
	}
	// What the hub does in a namespace it is lent.
	inside := func(ns string, allowed bool) []check {
		return []check{
			{"create", "flux-framework.org", "miniclusters", ns, "", allowed},
			{"patch", "flux-framework.org", "miniclusters", ns, "burst-a", allowed},
			{"delete", "flux-framework.org", "miniclusters", ns, "burst-a", allowed},
			{"list", "flux-framework.org", "miniclusters", ns, "", allowed},
			{"watch", "flux-framework.org", "miniclusters", ns, "", allowed},
			{"create", "", "secrets", ns, "", allowed},
			{"patch", "", "secrets", ns, "burst-a-curve", allowed},
			{"delete", "", "secrets", ns, "burst-a-curve", allowed},
			{"list", "", "secrets", ns, "", allowed},
			{"watch", "", "secrets", ns, "", allowed},
			{"list", "", "pods", ns, "", allowed},
			{"get", "", "pods", ns, "burst-a-0-x", allowed},
			{"get", "", "pods/log", ns, "burst-a-0-x", allowed},
		}
	}
	review := func(t require.TestingT, c check) *authorizationv1.SubjectAccessReview {
		resource, sub, _ := strings.Cut(c.resource, "/")
		r, err := cs.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{
			Spec: authorizationv1.SubjectAccessReviewSpec{
				User:   hub,
				Groups: []string{"system:serviceaccounts", "system:serviceaccounts:fluxfed-system", "system:authenticated"},
				ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: c.verb, Group: c.group, Resource: resource,
					Subresource: sub, Namespace: c.namespace, Name: c.name},
			},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
		return r
	}
	// The authorizer learns of a binding from a watch: wait until it has.
	settle := func(c check) {
		require.EventuallyWithT(t, func(ct *assert.CollectT) {
			require.Equal(ct, c.allowed, review(ct, c).Status.Allowed)
		}, 10*time.Second, 50*time.Millisecond)
	}
	run := func(t *testing.T, checks []check) {
		for _, c := range checks {
			t.Run(fmt.Sprintf("%s %s/%s in %q named %q", c.verb, c.group, c.resource, c.namespace, c.name), func(t *testing.T) {
				r := review(t, c)
				require.Equal(t, c.allowed, r.Status.Allowed, "%s", r.Status.Reason)
			})
		}
	}

	// As applied: a member, and nothing lent.
	settle(check{verb: "list", resource: "nodes", allowed: true})
	t.Run("nothing lent", func(t *testing.T) {
		run(t, slices.Concat(always, inside("research", false), inside("", false), inside("kube-system", false),
			[]check{{"create", "", "namespaces", "", "", false}}))
		// Impersonated, as the hub's requests are: a list of Secrets across the member fails.
		as := rest.CopyConfig(env.Config)
		as.Impersonate = rest.ImpersonationConfig{UserName: hub, Groups: []string{"system:serviceaccounts", "system:authenticated"}}
		hubClient, err := kubernetes.NewForConfig(as)
		require.NoError(t, err)
		_, err = hubClient.CoreV1().Secrets("").List(ctx, metav1.ListOptions{})
		require.True(t, apierrors.IsForbidden(err), "listing every Secret: %v", err)
		_, err = hubClient.CoreV1().Namespaces().Get(ctx, "kube-system", metav1.GetOptions{})
		require.NoError(t, err, "the cluster ID")
	})

	// The owner lends namespace research, as docs/bursting.md says.
	require.NoError(t, env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "research"}}))
	_, err = cs.RbacV1().RoleBindings("research").Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "fluxfed-hub-burst", Namespace: "research"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "fluxfed-hub-burst"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: "fluxfed-system", Name: "fluxfed-hub"}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	settle(check{verb: "list", resource: "secrets", namespace: "research", allowed: true})
	t.Run("research lent", func(t *testing.T) {
		run(t, slices.Concat(always, inside("research", true), inside("payroll", false), inside("", false), inside("kube-system", false),
			[]check{{"create", "", "namespaces", "", "", false}}))
	})

	// The whole member lent: RBAC cannot leave kube-system out of a ClusterRoleBinding, so the
	// hub may read its Secrets too (its own code never bursts there).
	require.NoError(t, env.ApplyDeploy(ctx, "member-access-any"))
	settle(check{verb: "list", resource: "secrets", namespace: "payroll", allowed: true})
	t.Run("everything lent", func(t *testing.T) {
		run(t, slices.Concat(always, inside("research", true), inside("payroll", true), inside("", true), inside("kube-system", true),
			[]check{{"create", "", "namespaces", "", "", true}}))
	})
}

// TestMonitoringScrapesTheMetricsService checks deploy/monitoring, which is not applied by
// default (the Prometheus Operator's CRDs are not installed here): its ServiceMonitor scrapes the
// port of the manager's metrics Service over HTTPS with a token, its binding grants
// fluxfed-metrics-reader, and the dashboard queries only series fluxfed has.
func TestMonitoringScrapesTheMetricsService(t *testing.T) {
	var service, monitor, binding *unstructured.Unstructured
	for _, o := range kustomize(t, "default") {
		if o.GetKind() == "Service" {
			service = o
		}
		if o.GetKind() == "ClusterRole" && o.GetName() == "fluxfed-metrics-reader" {
			rules, _, err := unstructured.NestedSlice(o.Object, "rules")
			require.NoError(t, err)
			require.Equal(t, []any{map[string]any{"nonResourceURLs": []any{"/metrics"}, "verbs": []any{"get"}}}, rules)
		}
	}
	objs := kustomize(t, "monitoring")
	for _, o := range objs {
		switch o.GetKind() {
		case "ServiceMonitor":
			monitor = o
		case "ClusterRoleBinding":
			binding = o
		}
	}
	require.Len(t, objs, 2)
	require.NotNil(t, service)
	require.NotNil(t, monitor)
	require.NotNil(t, binding)

	ports, _, err := unstructured.NestedSlice(service.Object, "spec", "ports")
	require.NoError(t, err)
	require.Len(t, ports, 1)
	require.Equal(t, "https", ports[0].(map[string]any)["name"])
	require.EqualValues(t, 8443, ports[0].(map[string]any)["port"])
	selector, _, err := unstructured.NestedStringMap(monitor.Object, "spec", "selector", "matchLabels")
	require.NoError(t, err)
	for k, v := range selector {
		require.Equal(t, v, service.GetLabels()[k], "the ServiceMonitor selects the metrics Service")
	}
	endpoints, _, err := unstructured.NestedSlice(monitor.Object, "spec", "endpoints")
	require.NoError(t, err)
	require.Len(t, endpoints, 1)
	endpoint := endpoints[0].(map[string]any)
	require.Equal(t, "https", endpoint["port"])
	require.Equal(t, "https", endpoint["scheme"])
	require.NotEmpty(t, endpoint["bearerTokenFile"])
	roleName, _, err := unstructured.NestedString(binding.Object, "roleRef", "name")
	require.NoError(t, err)
	require.Equal(t, "fluxfed-metrics-reader", roleName)

	data, err := os.ReadFile(filepath.Join("monitoring", "dashboard.json"))
	require.NoError(t, err)
	var dashboard struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	require.NoError(t, json.Unmarshal(data, &dashboard))
	require.NotEmpty(t, dashboard.Panels)
	series := regexp.MustCompile(`fluxfed_[a-z_]+`)
	used := map[string]bool{}
	for _, p := range dashboard.Panels {
		require.NotEmpty(t, p.Targets, "panel %q", p.Title)
		for _, target := range p.Targets {
			for _, name := range series.FindAllString(target.Expr, -1) {
				name = strings.TrimSuffix(name, "_bucket")
				require.Contains(t, metrics.Names(), name, "panel %q queries a series fluxfed does not have", p.Title)
				used[name] = true
			}
		}
	}
	for _, name := range metrics.Names() {
		if name != "fluxfed_flux_answering" {
			require.True(t, used[name], "the dashboard shows %s", name)
		}
	}
}

// TestMonitoringAppliesToThePrometheusOperatorsCRD applies deploy/monitoring with server-side
// dry-run to a real API server that serves the Prometheus Operator's own ServiceMonitor CRD (of
// the version e2e/k8sbin pins): a field its schema does not know, or a value it refuses, fails.
func TestMonitoringAppliesToThePrometheusOperatorsCRD(t *testing.T) {
	path, err := k8sbin.ServiceMonitorCRD()
	require.NoError(t, err)
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	crd := &unstructured.Unstructured{}
	require.NoError(t, utilyaml.Unmarshal(data, &crd.Object))
	require.Equal(t, "CustomResourceDefinition", crd.GetKind())

	env := testenv.Shared(t)
	ctx := context.Background()
	if err := env.Client.Create(ctx, crd); !apierrors.IsAlreadyExists(err) {
		require.NoError(t, err) // a test run before on the shared API server (-count) made it
	}
	systemNamespace(t, env)
	w := &testenv.Warnings{}
	cfg := rest.CopyConfig(env.Config)
	cfg.WarningHandlerWithContext = w
	objs := kustomize(t, "monitoring")
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		// A new client learns the kind once the API server serves it.
		cl, err := client.New(cfg, client.Options{})
		require.NoError(c, err)
		w.Take()
		for _, o := range objs {
			require.NoError(c, cl.Apply(ctx, client.ApplyConfigurationFromUnstructured(o.DeepCopy()),
				client.FieldOwner("deploy-test"), client.DryRunAll), "%s %s", o.GetKind(), o.GetName())
		}
	}, 30*time.Second, 100*time.Millisecond)
	require.Empty(t, w.Take(), "the API server warned about deploy/monitoring")

	// The schema is the operator's, not one that takes anything: a misspelt field is refused.
	var monitor *unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == "ServiceMonitor" {
			monitor = o.DeepCopy()
		}
	}
	require.NotNil(t, monitor)
	require.NoError(t, unstructured.SetNestedField(monitor.Object, "30s", "spec", "scrapeIntervall"))
	cl, err := client.New(cfg, client.Options{})
	require.NoError(t, err)
	err = cl.Apply(ctx, client.ApplyConfigurationFromUnstructured(monitor), client.FieldOwner("deploy-test"), client.DryRunAll)
	require.ErrorContains(t, err, ".spec.scrapeIntervall: field not declared in schema")
}
