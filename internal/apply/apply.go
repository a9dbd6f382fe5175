// Package apply is how fluxfed writes every object it derives, on its own cluster and from the
// hub on members: server-side apply under one field owner, never over an object that is not
// fluxfed's, and not at all when the object as observed already holds what would be sent.
//
// Skipping an apply rests on two checks of the observed object, so that an unchanged world costs
// no request while a changed one is put back:
//   - the hash stamped in fluxv1alpha2.AnnotationAppliedHash is the desired one: what was last
//     sent is what would be sent now (a field dropped from the desired state is noticed), and
//   - every field of the desired object has its value in the observed one: nobody else changed a
//     field fluxfed owns since (a hand-edited ConfigMap key, a scaled child).
//
// Nothing is ever written to an object fluxfed did not observe to be its own. An object that is
// not in the cache is created at once, which the API server refuses if one of its name exists (outside
// the cache, or created since); that one is then read live and judged as any other found. An
// apply names the UID it observed, so it never lands on an object deleted and created again
// since. A create records the field owner's claim as an update's; before an apply changes the
// object, the claim is turned into an apply's, so that a field dropped from the desired state is
// dropped from the object too. A new object thus costs one request, its create. The cache may
// hold objects without their managedFields (cache.TransformStripManagedFields): an apply that
// changes one then reads it live first, for its claim. It may hold ConfigMaps with their values
// replaced by digests (SummarizeConfigMaps), which the second check compares by digest.
//
// A refusal that waits for someone else (an object of the same name that is not ours) or that
// only a change of spec can lift (invalid, immutable) is a *Refusal carrying the condition
// reason, so callers report it without parsing error text.
package apply

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/util/csaupgrade"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
)

// Refusal is why an object was not applied, when retrying as is cannot help: the condition
// reason (a fluxv1alpha2 reason constant) and a message for the user that names the object.
type Refusal struct {
	// Reason is fluxv1alpha2.ReasonConflict (the object exists and is not ours),
	// ReasonImmutableFieldChanged or ReasonApplyFailed (the API server refused it).
	Reason string
	// Object names the object: "<Kind> <namespace>/<name>".
	Object string
	// Message says what happened and what to do.
	Message string
	// Err is the API server's error, when it refused.
	Err error
}

func (r *Refusal) Error() string { return r.Object + ": " + r.Message }

func (r *Refusal) Unwrap() error { return r.Err }

// Owns tells whether an existing object is ours to change.
type Owns func(existing metav1.Object) bool

// ControlledBy owns the objects whose controller owner reference is owner's UID: what the
// member reconciler and the hub create on their own cluster.
func ControlledBy(owner metav1.Object) Owns {
	return func(obj metav1.Object) bool {
		ref := metav1.GetControllerOf(obj)
		return ref != nil && ref.UID == owner.GetUID()
	}
}

// Applier applies objects under one field owner.
type Applier struct {
	// Client writes, and reads through the cache.
	Client client.Client
	// Live reads from the API server: a cache limited to fluxfed's labels misses an object of
	// the same name that is someone else's, or that lost its labels.
	Live client.Reader
	// FieldOwner is the field manager of every apply.
	FieldOwner string
	// LiveOnly reads from the API server only, past the cache: for a member that was out of
	// sight, whose cache may not have caught up with what changed there meanwhile.
	LiveOnly bool
}

// Apply makes the object request describes exist as described, and returns it as stored (or as
// observed, when nothing had to be sent). request is a typed object, an apply configuration or
// an unstructured object holding the apply request: apiVersion and kind (or a type the client's
// scheme knows), name, namespace and the fields fluxfed owns, nothing else (see Request); Apply
// stamps it with its hash. An object of the same
// name that owns refuses is never changed: the result is a *Refusal with ReasonConflict.
func (a *Applier) Apply(ctx context.Context, request any, owns Owns) (client.Object, error) {
	desired, err := Request(request)
	if err != nil {
		return nil, err
	}
	if desired.GetKind() == "" {
		if obj, ok := request.(runtime.Object); ok {
			gvk, err := a.Client.GroupVersionKindFor(obj)
			if err != nil {
				return nil, fmt.Errorf("applying %T %s/%s: %w", request, desired.GetNamespace(), desired.GetName(), err)
			}
			desired.SetGroupVersionKind(gvk)
		}
	}
	if err := Stamp(desired); err != nil {
		return nil, err
	}
	name := Describe(desired)
	// What the cache does not hold is created at once: it is new, or someone else's that the
	// create finds. Reading it live first would cost a request for every new object.
	current, err := a.observe(ctx, desired, a.firstReader())
	if err != nil {
		return nil, err
	}
	if current == nil {
		created, err := a.create(ctx, desired)
		if !apierrors.IsAlreadyExists(err) {
			return created, err
		}
		// It exists (outside the cache, or created since it was read): it is judged as found,
		// read where it surely is.
		if current, err = a.observe(ctx, desired, a.Live); err != nil {
			return nil, err
		}
		if current == nil {
			return nil, fmt.Errorf("creating %s: it appeared and was deleted again meanwhile; trying again", name)
		}
	}
	if !owns(current) {
		return nil, notOurs(name)
	}
	if UpToDate(current, desired) {
		return current, nil
	}
	if len(current.GetManagedFields()) == 0 {
		// A cache that holds objects without their managedFields (what the claim is made of):
		// the object is judged again as the API server has it, if it is still the one observed.
		fresh, err := a.observe(ctx, desired, a.Live)
		switch {
		case err != nil:
			return nil, err
		case fresh == nil || fresh.GetUID() != current.GetUID():
			return nil, fmt.Errorf("applying %s: it was deleted or replaced since it was read; trying again", name)
		case !owns(fresh):
			return nil, notOurs(name)
		}
		current = fresh
	}
	if err := a.claim(ctx, current); apierrors.IsConflict(err) {
		// A cache behind the claim that followed the create, or a change since: the claim is
		// judged again on the object as the API server has it, if it is still ours.
		fresh, ferr := a.observe(ctx, desired, a.Live)
		switch {
		case ferr != nil:
			return nil, ferr
		case fresh == nil || fresh.GetUID() != current.GetUID() || !owns(fresh):
			return nil, err
		}
		current = fresh
		if err := a.claim(ctx, current); err != nil {
			return nil, err
		}
	} else if err != nil {
		return nil, err
	}
	// The apply lands only on the object that was observed: one deleted and re-created by
	// someone else since (a cache that has not caught up) fails the UID precondition.
	desired.SetUID(current.GetUID())

	ctrl.LoggerFrom(ctx).V(1).Info("Applying "+desired.GetKind(), "object", klog.KObj(desired))
	if err := a.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(desired),
		client.FieldOwner(a.FieldOwner), client.ForceOwnership); err != nil {
		return nil, classify(name, err)
	}
	return a.typed(desired)
}

// notOurs is the refusal to touch the object named name, which exists and is not ours.
func notOurs(name string) *Refusal {
	return &Refusal{Reason: fluxv1alpha2.ReasonConflict, Object: name,
		Message: "exists and is not fluxfed's: fluxfed does not change or delete it; delete or rename it, or give fluxfed's its own name"}
}

// create creates the object desired describes, failing with AlreadyExists if one of its name
// exists, and returns it as stored. Its fields stay claimed as the create's update until an
// apply must change the object: claim turns them into the apply's then, at no cost now.
func (a *Applier) create(ctx context.Context, desired *unstructured.Unstructured) (client.Object, error) {
	log := ctrl.LoggerFrom(ctx)
	log.V(1).Info("Creating "+desired.GetKind(), "object", klog.KObj(desired))
	u := desired.DeepCopy()
	if err := a.Client.Create(ctx, u, client.FieldOwner(a.FieldOwner)); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return nil, err
		}
		return nil, classify(Describe(desired), err)
	}
	return a.typed(u)
}

// claim turns the field owner's claim from an update (the create) into an apply, on obj as
// observed, and updates obj: without it, the fields the create set would stay the owner's
// through the update entry, and one dropped from the desired state would stay on the object.
// An object already claimed costs no request.
func (a *Applier) claim(ctx context.Context, current client.Object) error {
	patch, err := csaupgrade.UpgradeManagedFieldsPatch(current, sets.New(a.FieldOwner), a.FieldOwner)
	if err != nil || patch == nil {
		return err
	}
	if err := a.Client.Patch(ctx, current, client.RawPatch(types.JSONPatchType, patch), client.FieldOwner(a.FieldOwner)); err != nil {
		if apierrors.IsConflict(err) {
			return fmt.Errorf("claiming the fields of %s as applied: it changed since it was read, so it was left alone: %w", Describe(current), err)
		}
		return fmt.Errorf("claiming the fields of %s as applied: %w", Describe(current), err)
	}
	return nil
}

// firstReader is where an apply looks first: the cache, or with LiveOnly the API server.
func (a *Applier) firstReader() client.Reader {
	if a.LiveOnly {
		return a.Live
	}
	return a.Client
}

// observe returns the object desired names as reader holds it; nil when it is not found.
func (a *Applier) observe(ctx context.Context, desired *unstructured.Unstructured, reader client.Reader) (client.Object, error) {
	obj, err := a.newObject(desired)
	if err != nil {
		return nil, err
	}
	switch err := reader.Get(ctx, client.ObjectKeyFromObject(desired), obj); {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("reading %s: %w", Describe(desired), err)
	}
	return obj, nil
}

// newObject returns an empty typed object of desired's kind: typed objects are read from the
// informer cache, unstructured ones would be live reads.
func (a *Applier) newObject(desired *unstructured.Unstructured) (client.Object, error) {
	obj, err := a.Client.Scheme().New(desired.GroupVersionKind())
	if err != nil {
		return nil, fmt.Errorf("no type for %s: %w", desired.GroupVersionKind(), err)
	}
	typed, ok := obj.(client.Object)
	if !ok {
		return nil, fmt.Errorf("%s is not an object", desired.GroupVersionKind())
	}
	return typed, nil
}

// typed converts the applied object, which the client filled with the API server's answer.
func (a *Applier) typed(applied *unstructured.Unstructured) (client.Object, error) {
	obj, err := a.newObject(applied)
	if err != nil {
		return nil, err
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(applied.Object, obj); err != nil {
		return nil, fmt.Errorf("decoding the applied %s: %w", Describe(applied), err)
	}
	return obj, nil
}

// classify turns the API server's refusal of an apply into a *Refusal when only a change of
// the desired state can lift it; any other error is returned wrapped, to be retried.
func classify(name string, err error) error {
	if !apierrors.IsInvalid(err) && !apierrors.IsBadRequest(err) {
		return fmt.Errorf("applying %s: %w", name, err)
	}
	if replaced(err) {
		return fmt.Errorf("applying %s: it was deleted and created again since it was read, so it was left alone: %w", name, err)
	}
	message := err.Error()
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		message = status.Status().Message
	}
	if immutable(err) {
		return &Refusal{Reason: fluxv1alpha2.ReasonImmutableFieldChanged, Object: name, Err: err, Message: fmt.Sprintf(
			"the change cannot be applied to the running object (%s); delete and re-create the MiniCluster to apply it", message)}
	}
	return &Refusal{Reason: fluxv1alpha2.ReasonApplyFailed, Object: name, Err: err,
		Message: "the API server refused it: " + message}
}

// replaced reports whether the API server refused an apply because the object's UID is not the
// one the apply names: the object observed is gone, and another of its name is there.
func replaced(err error) bool {
	var status apierrors.APIStatus
	if !errors.As(err, &status) || status.Status().Details == nil {
		return false
	}
	for _, c := range status.Status().Details.Causes {
		if c.Field == "metadata.uid" {
			return true
		}
	}
	return false
}

// immutable reports whether the API server refused a change to a field it does not let change.
func immutable(err error) bool {
	var status apierrors.APIStatus
	if !errors.As(err, &status) || status.Status().Details == nil {
		return false
	}
	for _, c := range status.Status().Details.Causes {
		if c.Type == metav1.CauseTypeFieldValueInvalid && strings.Contains(c.Message, apivalidation.FieldImmutableErrorMsg) {
			return true
		}
	}
	return false
}

// Request returns obj, a typed object, an apply configuration or an unstructured object, as the
// request of a server-side apply: a copy, without what a client never sends (its status and
// creation timestamp).
func Request(obj any) (*unstructured.Unstructured, error) {
	u := &unstructured.Unstructured{}
	if in, ok := obj.(*unstructured.Unstructured); ok {
		u = in.DeepCopy()
	} else {
		data, err := json.Marshal(obj)
		if err != nil {
			return nil, fmt.Errorf("encoding %T: %w", obj, err)
		}
		if err := json.Unmarshal(data, &u.Object); err != nil {
			return nil, fmt.Errorf("decoding %T: %w", obj, err)
		}
	}
	delete(u.Object, "status")
	unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
	return u, nil
}

// Describe names obj for messages: "<Kind> <namespace>/<name>", or "<Kind> <name>" when it has
// no namespace.
func Describe(obj client.Object) string {
	kind := obj.GetObjectKind().GroupVersionKind().Kind
	if obj.GetNamespace() == "" {
		return kind + " " + obj.GetName()
	}
	return kind + " " + obj.GetNamespace() + "/" + obj.GetName()
}

// Stamp records in u, under fluxv1alpha2.AnnotationAppliedHash, a hash of all else u holds.
func Stamp(u *unstructured.Unstructured) error {
	annotations := u.GetAnnotations()
	delete(annotations, fluxv1alpha2.AnnotationAppliedHash)
	if len(annotations) == 0 {
		unstructured.RemoveNestedField(u.Object, "metadata", "annotations")
	}
	data, err := json.Marshal(u.Object)
	if err != nil {
		return fmt.Errorf("hashing %s: %w", Describe(u), err)
	}
	sum := sha256.Sum256(data)
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[fluxv1alpha2.AnnotationAppliedHash] = hex.EncodeToString(sum[:16])
	u.SetAnnotations(annotations)
	return nil
}

// UpToDate reports whether current, the object as observed, already holds what the stamped
// desired would apply: it is not being deleted, it carries desired's hash, and every field
// desired sets has the same value in it (the same digest, in a ConfigMap that a cache summarized
// with SummarizeConfigMaps).
func UpToDate(current client.Object, desired *unstructured.Unstructured) bool {
	if current.GetDeletionTimestamp() != nil ||
		current.GetAnnotations()[fluxv1alpha2.AnnotationAppliedHash] != desired.GetAnnotations()[fluxv1alpha2.AnnotationAppliedHash] {
		return false
	}
	var observed map[string]any
	if u, ok := current.(*unstructured.Unstructured); ok {
		observed = u.Object
	} else {
		var err error
		if observed, err = runtime.DefaultUnstructuredConverter.ToUnstructured(current); err != nil {
			return false
		}
	}
	fields := desired.Object
	if data, ok := observed["data"].(map[string]any); ok && summarized(data) {
		fields = summarizedDesired(fields)
	}
	for k, v := range fields {
		// A typed object read from a cache has no apiVersion and kind; status is not applied.
		if k == "apiVersion" || k == "kind" || k == "status" {
			continue
		}
		if !Holds(observed[k], v) {
			return false
		}
	}
	return true
}

// Holds reports whether observed holds every value of desired: maps key by key (a key that
// desired sets to its zero value may be missing, as the API server drops empty fields), lists
// element by element with the same length, numbers by value and quantities by amount.
func Holds(observed, desired any) bool {
	if isZero(desired) {
		return isZero(observed)
	}
	switch d := desired.(type) {
	case map[string]any:
		o, ok := observed.(map[string]any)
		if !ok {
			return false
		}
		for k, v := range d {
			if !Holds(o[k], v) {
				return false
			}
		}
		return true
	case []any:
		o, ok := observed.([]any)
		if !ok || len(o) != len(d) {
			return false
		}
		for i := range d {
			if !Holds(o[i], d[i]) {
				return false
			}
		}
		return true
	case string:
		o, ok := observed.(string)
		return ok && (o == d || sameQuantity(o, d))
	case bool:
		o, ok := observed.(bool)
		return ok && o == d
	}
	if dn, ok := number(desired); ok {
		on, ok := number(observed)
		return ok && on == dn
	}
	return false
}

// isZero reports whether v is what an omitted field reads as.
func isZero(v any) bool {
	switch x := v.(type) {
	case nil:
		return true
	case map[string]any:
		return len(x) == 0
	case []any:
		return len(x) == 0
	case string:
		return x == ""
	case bool:
		return !x
	}
	n, ok := number(v)
	return ok && n == 0
}

func number(v any) (float64, bool) {
	switch n := v.(type) {
	case int64:
		return float64(n), true
	case int32:
		return float64(n), true
	case int:
		return float64(n), true
	case float64:
		return n, true
	case float32:
		return float64(n), true
	case json.Number:
		f, err := n.Float64()
		return f, err == nil
	}
	return 0, false
}

// sameQuantity reports whether two strings are the same resource quantity written two ways
// ("1000m" and "1"): the API server stores quantities of built-in kinds canonically.
func sameQuantity(a, b string) bool {
	qa, err := resource.ParseQuantity(a)
	if err != nil {
		return false
	}
	qb, err := resource.ParseQuantity(b)
	return err == nil && qa.Cmp(qb) == 0
}
