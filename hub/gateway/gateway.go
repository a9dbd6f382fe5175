// Package gateway is the hub's aggregated API (gateway.fluxfed.io/v1alpha1): the logs of a
// root's broker pods, on the hub and on every member, and commands run in the Flux instance of
// its lead broker, for users of the hub who hold no member kubeconfig.
//
// The hub's API server authenticates the user and forwards the request; the gateway trusts the
// user it names only on a connection the API server's front-proxy certificate opens (FrontProxy),
// and then asks the hub's API server whether that user may do the same to the root's own pods
// (SubjectAccessReview): reading a burst's logs takes get on pods/log in the root's namespace,
// running a command takes create on pods/exec there, both with get on the root. The gateway
// lends nobody more than they have on the hub; on a member it reads with the hub's identity
// there, which may read the pods of the children and nothing it did not push.
package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-logr/logr"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"

	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
	"github.com/fluxfed/fluxfed/bursting"
	"github.com/fluxfed/fluxfed/flux"
	"github.com/fluxfed/fluxfed/hostlist"
	"github.com/fluxfed/fluxfed/member/render/names"
)

// The API the gateway serves, and the name of its APIService.
const (
	Group          = "gateway.fluxfed.io"
	Version        = "v1alpha1"
	APIServiceName = Version + "." + Group
)

// Members reaches a member of the hub with the hub's identity there.
type Members func(ctx context.Context, name string) (*rest.Config, error)

// Options configure a gateway.
type Options struct {
	// Hub reaches the hub's API server with the hub's identity: it reads the roots and their pods,
	// reviews each caller's access, and runs the commands.
	Hub *rest.Config
	// Members reaches the members.
	Members Members
	// FrontProxy identifies callers; nil reads it from the hub's API server, again every few
	// minutes.
	FrontProxy *FrontProxy
	Log        logr.Logger
}

// Server is the gateway's HTTP handler.
type Server struct {
	opts  Options
	hub   kubernetes.Interface
	proxy func(ctx context.Context) (*FrontProxy, error)
}

// New returns a gateway.
func New(opts Options) (*Server, error) {
	cs, err := kubernetes.NewForConfig(opts.Hub)
	if err != nil {
		return nil, err
	}
	s := &Server{opts: opts, hub: cs}
	if opts.FrontProxy != nil {
		s.proxy = func(context.Context) (*FrontProxy, error) { return opts.FrontProxy, nil }
	} else {
		live := &liveFrontProxy{cs: cs, now: time.Now}
		s.proxy = live.get
	}
	return s, nil
}

// request is a parsed gateway path: the root and what is asked of it.
type request struct {
	namespace, name, what string
}

const prefix = "/apis/" + Group + "/" + Version

func parsePath(path string) (request, bool) {
	rest, ok := strings.CutPrefix(path, prefix+"/namespaces/")
	if !ok {
		return request{}, false
	}
	parts := strings.Split(rest, "/")
	if len(parts) != 4 || parts[1] != "miniclusters" || parts[0] == "" || parts[2] == "" {
		return request{}, false
	}
	if parts[3] != "log" && parts[3] != "exec" {
		return request{}, false
	}
	return request{namespace: parts[0], name: parts[2], what: parts[3]}, true
}

// ServeHTTP serves discovery, logs and exec.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	fp, err := s.proxy(ctx)
	if err != nil {
		writeStatus(w, apierrors.NewServiceUnavailable(err.Error()))
		return
	}
	user, err := fp.Authenticate(r)
	if err != nil {
		writeStatus(w, apierrors.NewUnauthorized(err.Error()))
		return
	}
	if r.URL.Path == prefix || r.URL.Path == prefix+"/" {
		writeJSON(w, http.StatusOK, discovery())
		return
	}
	req, ok := parsePath(r.URL.Path)
	if !ok {
		writeStatus(w, apierrors.NewNotFound(schema.GroupResource{Group: Group, Resource: "miniclusters"}, r.URL.Path))
		return
	}
	if err := s.authorize(ctx, user, req); err != nil {
		writeStatus(w, err)
		return
	}
	root, err := s.root(ctx, req)
	if err != nil {
		writeStatus(w, err)
		return
	}
	log := s.opts.Log.WithValues("user", user.Name, "root", req.namespace+"/"+req.name)
	switch req.what {
	case "log":
		if err := s.logs(w, r, root); err != nil {
			writeStatus(w, err)
		}
	case "exec":
		log.Info("Running a command in the lead broker for a user", "command", r.URL.Query()["command"])
		if err := s.execute(w, r, fp, root); err != nil {
			writeStatus(w, err)
		}
	}
}

// access is what a user must be allowed on the hub to be served what.
func access(req request) []authorizationv1.ResourceAttributes {
	root := authorizationv1.ResourceAttributes{Namespace: req.namespace, Verb: "get", Group: fluxv1alpha2.GroupVersion.Group,
		Resource: "miniclusters", Name: req.name}
	switch req.what {
	case "log":
		return []authorizationv1.ResourceAttributes{root, {Namespace: req.namespace, Verb: "get", Resource: "pods", Subresource: "log"}}
	default:
		return []authorizationv1.ResourceAttributes{root, {Namespace: req.namespace, Verb: "create", Resource: "pods", Subresource: "exec"}}
	}
}

// authorize asks the hub's API server whether user may do, on the root's own cluster, what
// req would do for them; a Forbidden error says which permission is missing.
func (s *Server) authorize(ctx context.Context, user *User, req request) error {
	extra := map[string]authorizationv1.ExtraValue{}
	for k, v := range user.Extra {
		extra[k] = v
	}
	for _, attrs := range access(req) {
		review, err := s.hub.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{
			Spec: authorizationv1.SubjectAccessReviewSpec{ResourceAttributes: &attrs, User: user.Name, UID: user.UID,
				Groups: user.Groups, Extra: extra},
		}, metav1.CreateOptions{})
		if err != nil {
			return apierrors.NewInternalError(fmt.Errorf("asking the hub's API server what %s may do: %w", user.Name, err))
		}
		if !review.Status.Allowed {
			what := attrs.Resource
			if attrs.Subresource != "" {
				what += "/" + attrs.Subresource
			}
			if attrs.Group != "" {
				what += "." + attrs.Group
			}
			return apierrors.NewForbidden(schema.GroupResource{Group: Group, Resource: "miniclusters/" + req.what}, req.name,
				fmt.Errorf("user %q may not %s %s in namespace %s on the hub, and the gateway lends nobody more than that",
					user.Name, attrs.Verb, what, req.namespace))
		}
	}
	return nil
}

// root reads the root MiniCluster of req.
func (s *Server) root(ctx context.Context, req request) (*fluxv1alpha2.MiniCluster, error) {
	mc := &fluxv1alpha2.MiniCluster{}
	err := s.hub.CoreV1().RESTClient().Get().AbsPath("/apis", fluxv1alpha2.GroupVersion.Group, fluxv1alpha2.GroupVersion.Version,
		"namespaces", req.namespace, "miniclusters", req.name).Do(ctx).Into(mc)
	if err != nil {
		return nil, err
	}
	if mc.IsBurstChild() {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("MiniCluster %s/%s is a burst child: ask for its root on the hub", req.namespace, req.name))
	}
	return mc, nil
}

// target is the pod that runs one rank of a root.
type target struct {
	rank      int
	cluster   string // "" on the hub
	namespace string
	pod       *corev1.Pod
	client    kubernetes.Interface
}

// find returns the pod of rank of root (a burst's first rank when only burst is named).
func (s *Server) find(ctx context.Context, root *fluxv1alpha2.MiniCluster, burst string, rank int) (*target, error) {
	layout, err := bursting.NewLayout(root)
	if err != nil {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("laying out the ranks of %s: %v", root.Name, err))
	}
	hosts := layout.Hosts
	if global, err := hostlist.Expand(root.Status.Hostlist); err == nil && len(global) == len(hosts) {
		hosts = global
	}
	if burst != "" {
		i := slices.IndexFunc(layout.Groups, func(g bursting.Group) bool { return g.Name == burst && g.Name != root.Name })
		if i < 0 {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("root %s has no burst %q", root.Name, burst))
		}
		g := layout.Groups[i]
		if rank < 0 {
			rank = g.Start
		}
		if rank < g.Start || rank >= g.End {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("rank %d is not one of burst %s, whose ranks are %d-%d", rank, burst, g.Start, g.End-1))
		}
	}
	if rank < 0 {
		rank = 0
	}
	g, ok := layout.GroupOf(rank)
	if !ok {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("root %s has ranks 0-%d, not %d", root.Name, len(hosts)-1, rank))
	}
	t := &target{rank: rank, namespace: root.Namespace, client: s.hub}
	if g.Name != root.Name {
		i := slices.IndexFunc(root.Status.Bursts, func(b fluxv1alpha2.BurstStatus) bool { return b.Name == g.Name })
		if i < 0 || root.Status.Bursts[i].Namespace == "" {
			return nil, apierrors.NewNotFound(corev1.Resource("pods"), fmt.Sprintf("rank %d (burst %s has not been pushed)", rank, g.Name))
		}
		b := root.Status.Bursts[i]
		t.cluster, t.namespace = b.Cluster, b.Namespace
		if t.client, err = s.member(ctx, root, b); err != nil {
			return nil, err
		}
	}
	pods, err := t.client.CoreV1().Pods(t.namespace).List(ctx, metav1.ListOptions{
		LabelSelector: labels.SelectorFromSet(labels.Set{fluxv1alpha2.LabelMiniCluster: g.Name}).String()})
	if err != nil {
		return nil, apierrors.NewInternalError(fmt.Errorf("listing the pods of %s%s: %w", g.Name, where(t.cluster), err))
	}
	for i := range pods.Items {
		p := &pods.Items[i]
		if cmpHostname(p) == hosts[rank] && p.DeletionTimestamp == nil {
			t.pod = p
			return t, nil
		}
	}
	return nil, apierrors.NewNotFound(corev1.Resource("pods"), fmt.Sprintf("%s (rank %d%s: no pod runs it, it may be reserved or not started yet)",
		hosts[rank], rank, where(t.cluster)))
}

func where(cluster string) string {
	if cluster == "" {
		return ""
	}
	return " on member " + cluster
}

func cmpHostname(p *corev1.Pod) string {
	if p.Spec.Hostname != "" {
		return p.Spec.Hostname
	}
	return p.Name
}

// member returns a client of b's member once the child there is known to be root's: a
// MiniCluster of that name that another root or someone else made is not looked into.
func (s *Server) member(ctx context.Context, root *fluxv1alpha2.MiniCluster, b fluxv1alpha2.BurstStatus) (kubernetes.Interface, error) {
	cfg, err := s.opts.Members(ctx, b.Cluster)
	if err != nil {
		return nil, apierrors.NewServiceUnavailable(fmt.Sprintf("member %s: %v", b.Cluster, err))
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	child := &fluxv1alpha2.MiniCluster{}
	err = cs.CoreV1().RESTClient().Get().AbsPath("/apis", fluxv1alpha2.GroupVersion.Group, fluxv1alpha2.GroupVersion.Version,
		"namespaces", b.Namespace, "miniclusters", b.Name).Do(ctx).Into(child)
	if err != nil {
		return nil, apierrors.NewServiceUnavailable(fmt.Sprintf("reading the child %s/%s on member %s: %v", b.Namespace, b.Name, b.Cluster, err))
	}
	if origin, ok := fluxv1alpha2.OriginOf(child); !ok || origin.UID != root.UID {
		return nil, apierrors.NewConflict(corev1.Resource("pods"), b.Name,
			fmt.Errorf("MiniCluster %s/%s on member %s is not a child of this root", b.Namespace, b.Name, b.Cluster))
	}
	return cs, nil
}

// rankParams reads the burst and rank parameters of a request; rank is -1 when not given.
func rankParams(r *http.Request) (string, int, error) {
	q := r.URL.Query()
	rank := -1
	if v := q.Get("rank"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return "", 0, apierrors.NewBadRequest(fmt.Sprintf("rank %q is not a rank (0 or more)", v))
		}
		rank = n
	}
	return q.Get("burst"), rank, nil
}

// logs streams the log of the broker container of one rank's pod.
func (s *Server) logs(w http.ResponseWriter, r *http.Request, root *fluxv1alpha2.MiniCluster) error {
	burst, rank, err := rankParams(r)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	opts := &corev1.PodLogOptions{Container: q.Get("container"), Follow: q.Get("follow") == "true",
		Previous: q.Get("previous") == "true", Timestamps: q.Get("timestamps") == "true"}
	if opts.Container == "" {
		opts.Container = names.FluxContainerName(root)
	}
	if v := q.Get("tailLines"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return apierrors.NewBadRequest(fmt.Sprintf("tailLines %q is not a count of lines", v))
		}
		opts.TailLines = &n
	}
	t, err := s.find(r.Context(), root, burst, rank)
	if err != nil {
		return err
	}
	stream, err := t.client.CoreV1().Pods(t.namespace).GetLogs(t.pod.Name, opts).Stream(r.Context())
	if err != nil {
		return fmt.Errorf("reading the log of pod %s/%s%s: %w", t.namespace, t.pod.Name, where(t.cluster), err)
	}
	defer func() { _ = stream.Close() }()
	w.Header().Set("Content-Type", "text/plain")
	w.WriteHeader(http.StatusOK)
	flusher, _ := w.(http.Flusher)
	buf := make([]byte, 32<<10)
	for {
		n, err := stream.Read(buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				return nil
			}
			if flusher != nil {
				flusher.Flush()
			}
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				s.opts.Log.Info("A log stream ended early", "pod", t.pod.Name, "error", err.Error())
			}
			return nil
		}
	}
}

// execute runs the command of the request in the Flux container of the root's lead broker,
// within its Flux instance (flux.Command), by proxying the caller's stream to the hub's API
// server as the hub.
func (s *Server) execute(w http.ResponseWriter, r *http.Request, fp *FrontProxy, root *fluxv1alpha2.MiniCluster) error {
	q := r.URL.Query()
	argv := q["command"]
	if len(argv) == 0 {
		return apierrors.NewBadRequest("no command: give one, e.g. flux resource list")
	}
	if root.Spec.Flux.DisableSocket {
		return apierrors.NewBadRequest("spec.flux.disableSocket is set, so the lead broker's local URI is not at a path the gateway can find")
	}
	t, err := s.find(r.Context(), root, "", 0)
	if err != nil {
		return err
	}
	container := names.FluxContainerName(root)
	target := s.hub.CoreV1().RESTClient().Post().Resource("pods").Namespace(t.namespace).Name(t.pod.Name).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{Container: container, Command: flux.Command(names.MountPath(root), argv...),
			Stdin: q.Get("stdin") == "true", Stdout: q.Get("stdout") == "true", Stderr: q.Get("stderr") == "true",
			TTY: q.Get("tty") == "true"}, scheme.ParameterCodec).URL()
	fp.Strip(r.Header)
	return s.proxyStream(w, r, target)
}

// discovery is the gateway's APIResourceList.
func discovery() *metav1.APIResourceList {
	return &metav1.APIResourceList{
		TypeMeta:     metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"},
		GroupVersion: Group + "/" + Version,
		APIResources: []metav1.APIResource{
			{Name: "miniclusters/log", Namespaced: true, Kind: "MiniCluster", Verbs: metav1.Verbs{"get"}},
			{Name: "miniclusters/exec", Namespaced: true, Kind: "MiniCluster", Verbs: metav1.Verbs{"get", "create"}},
		},
	}
}

func writeStatus(w http.ResponseWriter, err error) {
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		status = apierrors.NewInternalError(err)
	}
	st := status.Status()
	st.TypeMeta = metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}
	writeJSON(w, int(st.Code), &st)
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}
