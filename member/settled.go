package member

// This file holds what the reconciler remembers of each MiniCluster it settled: when neither the
// MiniCluster's spec nor any of its objects changed since, a reconcile (a pod that started, a
// status write, a resync) reads the objects' versions from the cache and renders, hashes and
// compares nothing.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"sync"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
	"github.com/fluxfed/fluxfed/member/render/names"
)

// settled is what a MiniCluster's objects were when a reconcile last found or made every one of
// them as its spec wants: the spec they were judged against (input) and the version of each
// (versionOf).
type settled struct {
	input    [sha256.Size]byte
	versions map[settledKey]string
	hostlist string
}

// settledKey names one object of a MiniCluster.
type settledKey struct {
	gvk  schema.GroupVersionKind
	name string
}

// settledMemory holds the settled record of each MiniCluster by namespace and name (a MiniCluster
// made again under the name has another UID, part of the input).
type settledMemory struct{ byName sync.Map }

// inputOf returns what the objects of mc are rendered from and judged against: its identity,
// spec, labels and annotations (the status and the versions of the MiniCluster itself are not).
func inputOf(mc *fluxv1alpha2.MiniCluster) ([sha256.Size]byte, error) {
	data, err := json.Marshal(struct {
		UID         types.UID
		Name        string
		Generation  int64
		Labels      map[string]string
		Annotations map[string]string
		Spec        fluxv1alpha2.MiniClusterSpec
	}{mc.UID, mc.Name, mc.Generation, mc.Labels, mc.Annotations, mc.Spec})
	if err != nil {
		return [sha256.Size]byte{}, err
	}
	return sha256.Sum256(data), nil
}

// unchanged returns the observation of mc when it is settled: the record's input is mc's, and
// every object it names is in the cache at the version recorded. ok is false otherwise, and the
// reconcile renders and applies as usual.
func (s *settledMemory) unchanged(ctx context.Context, c client.Client, mc *fluxv1alpha2.MiniCluster) (obs observation, ok bool) {
	v, found := s.byName.Load(client.ObjectKeyFromObject(mc))
	if !found {
		return obs, false
	}
	rec := v.(*settled)
	if input, err := inputOf(mc); err != nil || input != rec.input {
		return obs, false
	}
	for key, version := range rec.versions {
		obj, err := c.Scheme().New(key.gvk)
		if err != nil {
			return obs, false
		}
		o, isObject := obj.(client.Object)
		if !isObject {
			return obs, false
		}
		if err := c.Get(ctx, client.ObjectKey{Namespace: mc.Namespace, Name: key.name}, o); err != nil || versionOf(o) != version {
			return obs, false
		}
		if job, isJob := o.(*batchv1.Job); isJob && job.Name == names.JobName(mc) {
			obs.job = job
		}
	}
	obs.hostlist = rec.hostlist
	return obs, true
}

// settledObject is one object of a MiniCluster as the API server returned it, or as the cache
// held it when it was found as wanted, and its kind.
type settledObject struct {
	gvk schema.GroupVersionKind
	obj client.Object
}

// remember records mc as settled with objs.
func (s *settledMemory) remember(mc *fluxv1alpha2.MiniCluster, hostlist string, objs []settledObject) {
	input, err := inputOf(mc)
	if err != nil {
		s.forget(client.ObjectKeyFromObject(mc))
		return
	}
	rec := &settled{input: input, versions: make(map[settledKey]string, len(objs)), hostlist: hostlist}
	for _, o := range objs {
		v := ""
		if o.obj != nil {
			v = versionOf(o.obj)
		}
		if v == "" {
			// Without its version it cannot be checked later: nothing is remembered.
			s.forget(client.ObjectKeyFromObject(mc))
			return
		}
		rec.versions[settledKey{gvk: o.gvk, name: o.obj.GetName()}] = v
	}
	s.byName.Store(client.ObjectKeyFromObject(mc), rec)
}

// versionOf returns what changes whenever what fluxfed owns in obj may have changed: for an object
// with a generation (a Job), the generation and its metadata, since the controller's status writes
// change its resource version every time its pods move; for the others, the resource version. ""
// when obj has no resource version.
func versionOf(obj client.Object) string {
	if obj.GetResourceVersion() == "" {
		return ""
	}
	if obj.GetGeneration() == 0 {
		return obj.GetResourceVersion()
	}
	data, err := json.Marshal(struct {
		Generation      int64
		Deleting        bool
		Labels          map[string]string
		Annotations     map[string]string
		OwnerReferences []metav1.OwnerReference
	}{obj.GetGeneration(), obj.GetDeletionTimestamp() != nil, obj.GetLabels(), obj.GetAnnotations(), obj.GetOwnerReferences()})
	if err != nil {
		return ""
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// forget drops the record of the MiniCluster key.
func (s *settledMemory) forget(key types.NamespacedName) { s.byName.Delete(key) }
