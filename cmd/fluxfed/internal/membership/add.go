package membership

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	fedv1alpha1 "github.com/fluxfed/fluxfed/api/fluxfed/v1alpha1"
	"github.com/fluxfed/fluxfed/hub/members"
)

// ExampleRoot is the example root the next step points at, relative to the repository.
const ExampleRoot = "examples/bursting-root.yaml"

// tokenPlaceholder stands for the token in the kubeconfig a dry run prints.
const tokenPlaceholder = "<minted by fluxfed member add>"

// registration is what Add created, for undoing it.
type registration struct {
	// hub: the Secret and the MemberCluster were applied on the hub.
	hub bool
	// access: the hub's identity was installed on the member by this Add (it was not there).
	access bool
	// lent are the namespaces whose RoleBinding this Add created.
	lent []string
}

// Add registers a member on the hub, as the package documentation says, printing each step on
// o.Out. It refuses a member whose name or cluster is registered already (ErrAlreadyRegistered)
// before changing anything, and says within o.ReachTimeout which cluster does not answer or is
// not what it should be (the hub without fluxfed's MemberCluster API).
//
// While it waits for Ready it prints what the hub reports. When the hub finds the registration
// itself unusable (Ready=False: Unreachable after o.UnreachableGrace, AccessDenied,
// CredentialsRefused, KubeconfigRefused, KubeconfigNotFound, DuplicateCluster) it undoes what it
// created and returns a *NotReadyError that says what to do; for any other Ready=False reason
// (the member lacks something the hub checks, such as fluxfed itself), or when the wait ends,
// it leaves the registration as it is, for the hub to use once the member is fixed, and says
// so. Remove undoes a registration that stays.
//
// Once the member is Ready it checks the data path (checkDataPath) and prints the next step.
func Add(ctx context.Context, o Options) (*Result, error) {
	start := time.Now()
	accessGiven, allowGiven := o.Access != "", o.Allow != ""
	if err := o.defaults(); err != nil {
		return nil, err
	}
	p := printer{out: o.Out, name: o.Name}
	if o.Output != "" {
		p.out = nil // the objects alone, for kubectl
	}
	hubClient, err := newClient(o.Hub)
	if err != nil {
		return nil, fmt.Errorf("the hub: %w", err)
	}
	memberClient, err := newClient(o.Member)
	if err != nil {
		return nil, fmt.Errorf("the member: %w", err)
	}
	memberSet, err := kubernetes.NewForConfig(o.Member)
	if err != nil {
		return nil, fmt.Errorf("the member: %w", err)
	}
	hubC := cluster{role: "hub", flag: "--context", context: o.HubContext, server: o.Hub.Host}
	memberC := cluster{role: "member", flag: "--member-context", context: o.MemberContext, server: o.Member.Host}

	// Both clusters answer, and the hub is one, before anything else.
	if _, err := reachHub(ctx, hubClient, hubC, o.ReachTimeout); err != nil {
		return nil, err
	}
	id, err := reachMember(ctx, memberSet, memberC, o.ReachTimeout)
	if err != nil {
		return nil, err
	}
	if err := refuseRegistered(ctx, hubClient, o.Name, id, o.MemberServer, o.Namespace); err != nil {
		return nil, err
	}
	p.say("cluster ID %s, not registered on the hub", id)
	res := &Result{ClusterID: id}

	// Whose identity the hub gets on the member: the chart's, if it installed one.
	chart, err := findChartIdentity(ctx, memberClient)
	if err != nil {
		return nil, err
	}
	if chart != nil {
		if chart.any && !accessGiven {
			o.Access = AccessAny
			if !allowGiven {
				o.Allow = ""
			}
		}
		if err := o.defaults(); err != nil {
			return nil, err
		}
		if err := chart.fits(o); err != nil {
			return nil, err
		}
		res.Chart = true
	}
	objs, err := accessObjects(o.accessDirs())
	if err != nil {
		return nil, err
	}
	for _, obj := range objs {
		labels := obj.GetLabels()
		if labels == nil {
			labels = map[string]string{}
		}
		labels[LabelManagedBy] = ManagedByCLI
		obj.SetLabels(labels)
	}
	var lendings []lending
	for _, ns := range o.Lend {
		l, err := lendingOf(ctx, memberClient, ns)
		if err != nil {
			return nil, err
		}
		lendings = append(lendings, l)
	}
	if o.DryRun {
		return res, dryRun(o, p, chart, objs, lendings)
	}

	// The hub's identity on the member.
	reg := registration{}
	if chart != nil {
		p.say("using the hub's identity that %s installed on the member (ServiceAccount %s/%s): member add installs none", chart, AccessNamespace, ServiceAccount)
	} else {
		existed, err := exists(ctx, memberClient, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: AccessNamespace, Name: ServiceAccount}})
		if err != nil {
			return nil, fmt.Errorf("reading ServiceAccount %s/%s on the member: %w", AccessNamespace, ServiceAccount, err)
		}
		reg.access = !existed
		var installed []string
		for _, obj := range objs {
			if err := memberClient.Apply(ctx, client.ApplyConfigurationFromUnstructured(obj), client.FieldOwner(FieldManager), client.ForceOwnership); err != nil {
				return nil, fmt.Errorf("installing %s on the member: %w", describe(obj), err)
			}
			if obj.GetKind() != "Namespace" {
				installed = append(installed, describe(obj))
			}
		}
		p.say("installed access from deploy/%s (%s)", strings.Join(o.accessDirs(), " and deploy/"), strings.Join(installed, ", "))
	}
	for _, l := range lendings {
		if err := lend(ctx, memberClient, l); err != nil {
			return nil, err
		}
		switch {
		case l.helm != "":
			p.say("namespace %s is lent already, by %s (RoleBinding %s/%s)", l.ns, l.helm, l.ns, BurstRoleBinding)
		default:
			if !l.bound {
				reg.lent = append(reg.lent, l.ns)
			}
			created := ""
			if l.nsMissing {
				created = ", created the namespace"
			}
			p.say("lent namespace %s (RoleBinding %s/%s of ClusterRole %s%s)", l.ns, l.ns, BurstRoleBinding, BurstRole, created)
		}
	}

	// Its credential, and the kubeconfig the hub will use.
	token, expires, err := mint(ctx, memberSet, o)
	if err != nil {
		return nil, err
	}
	res.TokenExpires = expires
	if expires.IsZero() {
		p.say("took the token of Secret %s/%s, which never expires: delete the Secret to revoke it", AccessNamespace, TokenSecret)
	} else {
		p.say("minted a token for ServiceAccount %s/%s, expiring %s (in %s): replace the kubeconfig Secret before then",
			AccessNamespace, ServiceAccount, expires.UTC().Format(time.RFC3339), lifetime(time.Until(expires)))
	}
	kubeconfig, err := buildKubeconfig(o, token)
	if err != nil {
		return nil, err
	}
	hubView, err := members.Check(kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("the kubeconfig built for the hub: %w", err)
	}
	if o.MemberServer == o.Member.Host {
		// Reach the member as the hub will: with the token only.
		asHub, err := kubernetes.NewForConfig(hubView)
		if err != nil {
			return nil, err
		}
		var seen string
		if err := retry(ctx, 10*time.Second, func() error {
			seen, err = clusterID(ctx, asHub)
			return err
		}); err != nil {
			return nil, fmt.Errorf("the member refuses the hub's kubeconfig: %w", err)
		}
		if seen != id {
			return nil, fmt.Errorf("the hub's kubeconfig reaches cluster %s, not %s", seen, id)
		}
		p.say("built a kubeconfig for %s with the CA and the token inline; as the hub, it reads the same cluster ID", o.MemberServer)
	} else {
		p.say("built a kubeconfig for %s with the CA and the token inline (not tried from here: the hub reaches the member at another address)", o.MemberServer)
	}

	// The registration on the hub.
	if err := hubClient.Apply(ctx, kubeconfigSecret(o, kubeconfig), client.FieldOwner(FieldManager), client.ForceOwnership); err != nil {
		return nil, fmt.Errorf("creating the kubeconfig Secret on the hub: %w", err)
	}
	reg.hub = true
	mc, err := memberCluster(o)
	if err != nil {
		return nil, err
	}
	if err := hubClient.Apply(ctx, client.ApplyConfigurationFromUnstructured(mc), client.FieldOwner(FieldManager), client.ForceOwnership); err != nil {
		return nil, fmt.Errorf("creating the MemberCluster on the hub: %w", err)
	}
	res.Registered = time.Now()
	p.say("created Secret %s/%s and MemberCluster %s on the hub (namespaces: allow %s%s, pod security %s)",
		o.Namespace, SecretName(o.Name), o.Name, o.Allow, listed(o), o.PodSecurity)

	if o.Wait < 0 {
		res.Elapsed = time.Since(start)
		p.say("not waiting for Ready: fluxfed member list%s shows what the hub reports", contextFlag(o.HubContext))
		return res, nil
	}
	w := waiter{c: hubClient, name: o.Name, server: o.MemberServer, timeout: o.Wait, grace: o.UnreachableGrace, p: p}
	got, err := w.wait(ctx)
	if err != nil {
		var notReady *NotReadyError
		if !errors.As(err, &notReady) {
			return res, fmt.Errorf("waiting for the hub to report member %s Ready: %w (what was created stays: fluxfed member remove %s undoes it)", o.Name, err, o.Name)
		}
		if notReady.undo() {
			notReady.Kept = undo(hubClient, memberClient, o, reg, chart)
		} else {
			notReady.Kept = fmt.Sprintf("left registered: MemberCluster %s and Secret %s/%s on the hub, and the hub's identity on the member; "+
				"the hub uses the member as soon as it reports it Ready (fluxfed member list%s); fluxfed member remove %s undoes it",
				o.Name, o.Namespace, SecretName(o.Name), contextFlag(o.HubContext), o.Name)
		}
		return res, notReady
	}
	res.Ready = time.Now()
	res.Elapsed = res.Ready.Sub(start)
	nodes := "nodes unknown"
	if got.Status.Nodes != nil {
		nodes = fmt.Sprintf("%d nodes", *got.Status.Nodes)
	}
	p.say("Ready after %v (%v since member add began): %s, %s",
		res.Ready.Sub(res.Registered).Round(10*time.Millisecond), res.Elapsed.Round(10*time.Millisecond), got.Status.KubernetesVersion, nodes)
	for _, c := range notGood(got.Status.Conditions) {
		p.say("the hub reports %s", describeCondition(c))
	}

	err = dataPath(ctx, hubClient, memberClient, o, p, res)
	nextStep(o, p)
	return res, err
}

// reachMember reads the member's cluster ID within timeout.
func reachMember(ctx context.Context, cs kubernetes.Interface, member cluster, timeout time.Duration) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	id, err := clusterID(ctx, cs)
	if err != nil {
		return "", member.unreachable(err, timeout)
	}
	return id, nil
}

// exists reports whether obj exists, reading it into obj.
func exists(ctx context.Context, c client.Client, obj client.Object) (bool, error) {
	err := c.Get(ctx, client.ObjectKeyFromObject(obj), obj)
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	return err == nil, err
}

// kubeconfigSecret is the Secret of the member's kubeconfig on the hub.
func kubeconfigSecret(o Options, kubeconfig []byte) *corev1ac.SecretApplyConfiguration {
	return corev1ac.Secret(SecretName(o.Name), o.Namespace).
		WithType(corev1.SecretTypeOpaque).
		WithLabels(map[string]string{LabelManagedBy: ManagedByCLI}).
		WithData(map[string][]byte{KubeconfigKey: kubeconfig})
}

// contextFlag is " --context NAME" for a named context, "" for the current one.
func contextFlag(name string) string {
	if name == "" {
		return ""
	}
	return " --context " + name
}

// undo deletes what Add created, with a context of its own (Add's may be over), and says what
// it deleted and what it left.
func undo(hubClient, memberClient client.Client, o Options, reg registration, chart *chartIdentity) string {
	ctx, cancel := context.WithTimeout(context.Background(), 3*DefaultReachTimeout)
	defer cancel()
	var done, errs []string
	if reg.hub {
		for _, obj := range []client.Object{
			&fedv1alpha1.MemberCluster{ObjectMeta: metav1.ObjectMeta{Name: o.Name}},
			&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: o.Namespace, Name: SecretName(o.Name)}},
		} {
			if err := client.IgnoreNotFound(hubClient.Delete(ctx, obj)); err != nil {
				errs = append(errs, err.Error())
			}
		}
		done = append(done, fmt.Sprintf("MemberCluster %s and Secret %s/%s on the hub", o.Name, o.Namespace, SecretName(o.Name)))
	}
	switch {
	case reg.access:
		removed, err := removeAccess(ctx, memberClient)
		if err != nil {
			errs = append(errs, err.Error())
		}
		if len(removed) > 0 {
			done = append(done, "on the member "+strings.Join(removed, ", "))
		}
	default:
		for _, ns := range reg.lent {
			rb := &unstructured.Unstructured{}
			rb.SetAPIVersion("rbac.authorization.k8s.io/v1")
			rb.SetKind("RoleBinding")
			rb.SetNamespace(ns)
			rb.SetName(BurstRoleBinding)
			if err := client.IgnoreNotFound(memberClient.Delete(ctx, rb)); err != nil {
				errs = append(errs, err.Error())
				continue
			}
			done = append(done, fmt.Sprintf("RoleBinding %s/%s on the member", ns, BurstRoleBinding))
		}
	}
	msg := "undone, nothing of this registration is left: deleted " + strings.Join(done, "; ")
	if chart != nil {
		msg += fmt.Sprintf("; the hub's identity stays on the member, as %s installed it", chart)
	} else if !reg.access {
		msg += "; the hub's identity on the member was there before, and stays"
	}
	if len(errs) > 0 {
		msg = "undoing it failed in part (" + strings.Join(errs, "; ") + "): fluxfed member remove " + o.Name + " removes what is left; " + msg
	}
	return msg + ". Fix the cause, then run member add again"
}

// dataPath checks that pods on the member reach the lead broker endpoints, and prints what it
// found. It returns an error wrapping ErrDataPath only when the check ran and an endpoint did
// not answer.
func dataPath(ctx context.Context, hubClient, memberClient client.Client, o Options, p printer, res *Result) error {
	if o.SkipDataPathCheck {
		p.say("data path: not checked (--skip-data-path-check)")
		return nil
	}
	endpoints := append([]string{}, o.CheckEndpoints...)
	for _, e := range rootEndpoints(ctx, hubClient) {
		if !slices.Contains(endpoints, e) {
			endpoints = append(endpoints, e)
		}
	}
	if len(endpoints) == 0 {
		res.DataPath.Why = "no lead broker endpoint to check: the hub exposes one per root that bursts (a NodePort of the hub's nodes, or a LoadBalancer), " +
			"so there is none before the first root; pass --check-endpoint HOST:PORT (a hub node's address and a NodePort it serves), " +
			"or, once a root bursts, see its LeadBrokerReachable condition and fluxfed status ROOT"
		p.say("data path: could not check: %s", res.DataPath.Why)
		return nil
	}
	ns := AccessNamespace
	if len(o.Lend) > 0 {
		ns = o.Lend[0]
	}
	p.say("data path: checking from a pod in namespace %s of the member that it reaches %s (up to %v)", ns, strings.Join(endpoints, ", "), o.CheckTimeout)
	res.DataPath = checkDataPath(ctx, memberClient, o, ns, endpoints)
	switch d := res.DataPath; {
	case !d.Checked:
		p.say("data path: could not check: %s", d.Why)
		return nil
	case d.OK:
		for _, l := range d.Report {
			p.say("data path: %s", l)
		}
		return nil
	default:
		for _, l := range d.Report {
			p.say("data path: %s", l)
		}
		return fmt.Errorf("%w: %s; the member stays registered, but a burst there will not join its root until the member's pods reach the root's lead broker: "+
			"open the network from the member's pods to it (for a NodePort, to the hub's nodes on that port), or set the root's spec.flux.bursting.expose.address "+
			"to an address the member reaches", ErrDataPath, strings.Join(d.Report, "; "))
	}
}

// nextStep prints what to do once the member is Ready: burst a root onto it.
func nextStep(o Options, p printer) {
	ns := "research"
	switch {
	case len(o.Lend) > 0:
		ns = o.Lend[0]
	case o.Access == AccessAny:
		ns = "default"
	}
	hubCtx := contextFlag(o.HubContext)
	p.say("next: burst a root onto it: in %s, set cluster: %s on a burst of spec.flux.bursting.clusters, then", ExampleRoot, o.Name)
	if o.Access == AccessNamespaces && len(o.Lend) == 0 {
		p.say("  lend it namespace %s first: fluxfed member add lends with --lend; by hand: kubectl%s -n %s create rolebinding %s --clusterrole=%s --serviceaccount=%s:%s",
			ns, contextFlag(o.MemberContext), ns, BurstRoleBinding, BurstRole, AccessNamespace, ServiceAccount)
	}
	p.say("  kubectl%s create namespace %s   # if it does not exist on the hub", hubCtx, ns)
	p.say("  kubectl%s apply -n %s -f %s", hubCtx, ns, ExampleRoot)
	p.say("  fluxfed status bursting-root -n %s%s", ns, hubCtx)
}

// dryRun says what Add would do, or prints the objects it would create.
func dryRun(o Options, p printer, chart *chartIdentity, objs []*unstructured.Unstructured, lendings []lending) error {
	var out []*unstructured.Unstructured
	p.say("dry run: nothing is created or changed")
	if chart != nil {
		p.say("would use the hub's identity that %s installed on the member (ServiceAccount %s/%s), and install none", chart, AccessNamespace, ServiceAccount)
	} else {
		var names []string
		for _, obj := range objs {
			if obj.GetKind() != "Namespace" {
				names = append(names, describe(obj))
			}
		}
		p.say("would apply on the member, from deploy/%s: %s", strings.Join(o.accessDirs(), " and deploy/"), strings.Join(names, ", "))
		out = append(out, objs...)
	}
	for _, l := range lendings {
		switch {
		case l.helm != "":
			p.say("namespace %s is lent already, by %s: nothing to do", l.ns, l.helm)
			continue
		case l.nsMissing:
			p.say("would create namespace %s on the member, and lend it (RoleBinding %s/%s of ClusterRole %s)", l.ns, l.ns, BurstRoleBinding, BurstRole)
			ns := &unstructured.Unstructured{}
			ns.SetAPIVersion("v1")
			ns.SetKind("Namespace")
			ns.SetName(l.ns)
			ns.SetLabels(map[string]string{LabelManagedBy: ManagedByCLI})
			out = append(out, ns)
		default:
			p.say("would lend namespace %s (RoleBinding %s/%s of ClusterRole %s)", l.ns, l.ns, BurstRoleBinding, BurstRole)
		}
		rb, err := toUnstructured(burstRoleBinding(l.ns))
		if err != nil {
			return err
		}
		out = append(out, rb)
	}
	if o.NonExpiringToken {
		p.say("would take the token of Secret %s/%s, which never expires", AccessNamespace, TokenSecret)
	} else {
		p.say("would mint a token for ServiceAccount %s/%s that expires in %s (or earlier, if the member's API server says so)", AccessNamespace, ServiceAccount, lifetime(o.TokenTTL))
	}
	p.say("would create on the hub Secret %s/%s (a kubeconfig for %s with the member's CA and the token inline) and MemberCluster %s (namespaces: allow %s%s, pod security %s)",
		o.Namespace, SecretName(o.Name), o.MemberServer, o.Name, o.Allow, listed(o), o.PodSecurity)
	p.say("then wait up to %v for the hub to report it Ready, and check the data path", o.Wait)
	if o.Output == "" {
		return nil
	}
	kubeconfig, err := buildKubeconfig(o, tokenPlaceholder)
	if err != nil {
		return err
	}
	secret, err := toUnstructured(kubeconfigSecret(o, kubeconfig))
	if err != nil {
		return err
	}
	// Readable: the kubeconfig as text, as kubectl would take it in stringData.
	unstructured.RemoveNestedField(secret.Object, "data")
	_ = unstructured.SetNestedField(secret.Object, string(kubeconfig), "stringData", KubeconfigKey)
	mc, err := memberCluster(o)
	if err != nil {
		return err
	}
	out = append(out, secret, mc)
	return printObjects(o.Out, o.Output, out)
}

// toUnstructured converts an apply configuration to an unstructured object.
func toUnstructured(v any) (*unstructured.Unstructured, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(data); err != nil {
		return nil, err
	}
	return u, nil
}

// printObjects writes objs as YAML documents or as one JSON List.
func printObjects(w io.Writer, format string, objs []*unstructured.Unstructured) error {
	if w == nil {
		return nil
	}
	if format == "json" {
		items := make([]map[string]any, 0, len(objs))
		for _, o := range objs {
			items = append(items, o.Object)
		}
		data, err := json.MarshalIndent(map[string]any{"apiVersion": "v1", "kind": "List", "items": items}, "", "  ")
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(w, "%s\n", data)
		return err
	}
	for _, o := range objs {
		data, err := yaml.Marshal(o.Object)
		if err != nil {
			return err
		}
		if _, err := fmt.Fprintf(w, "---\n%s", data); err != nil {
			return err
		}
	}
	return nil
}
