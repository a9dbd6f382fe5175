package hub

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
	"github.com/fluxfed/fluxfed/internal/apply"
)

// The hub proves which objects on a member are its own with a mark that only it can make: the
// annotation fluxv1alpha2.AnnotationProof, a keyed hash of where the object is and which root it
// was pushed for, under a key kept in a Secret of the hub's members namespace. The proof is part
// of the create request, so there is no moment at which an object the hub created lacks it: a
// create whose reply is lost, or a hub killed right after it, leaves an object that the next
// reconcile recognises. Labels, the origin UID and the root's status.pushed can be written by
// others; none of them is trusted to change or delete anything.
//
// A proof binds the hub, the member, the object's kind, namespace and name, and the root's
// namespace, name and UID: it cannot be moved to another object, another member or another root,
// and the objects of an earlier root of the same name are told apart from the new root's.

// proofVersion starts every proof, so that another scheme can be told from this one.
const proofVersion = "v1."

// proofContext is the first field of every hashed message: the key signs nothing else.
const proofContext = "fluxfed.io/proof/v1"

// ownershipKeyField is the data key of the ownership Secret that holds the key.
const ownershipKeyField = "key"

// ownershipKeyBytes is the size of a key the hub generates, and the least it accepts.
const ownershipKeyBytes = 32

// prover makes and checks the proofs of one hub.
type prover struct {
	hub string
	key []byte
}

// sign returns the proof of the object of kind at namespace/name on member, pushed for origin.
func (p *prover) sign(member, kind, namespace, name string, origin fluxv1alpha2.Origin) string {
	mac := hmac.New(sha256.New, p.key)
	for _, field := range []string{proofContext, p.hub, member, kind, namespace, name, origin.Namespace, origin.Name, string(origin.UID)} {
		// Each field with its length first: no two lists of fields hash alike.
		var n [4]byte
		binary.BigEndian.PutUint32(n[:], uint32(len(field)))
		mac.Write(n[:])
		mac.Write([]byte(field))
	}
	return proofVersion + base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
}

// mark sets on obj, which carries this hub's origin marks, its proof as an object of kind on
// member.
func (p *prover) mark(member, kind string, obj metav1.Object) error {
	origin, ok := fluxv1alpha2.OriginOf(obj)
	if !ok || origin.Hub != p.hub {
		return fmt.Errorf("%s %s/%s carries no origin of hub %s to prove", kind, obj.GetNamespace(), obj.GetName(), p.hub)
	}
	annotations := obj.GetAnnotations()
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[fluxv1alpha2.AnnotationProof] = p.sign(member, kind, obj.GetNamespace(), obj.GetName(), origin)
	obj.SetAnnotations(annotations)
	return nil
}

// verify returns the origin that obj, an object of kind on member, carries, and whether it
// carries this hub's proof of it: the hub created it there for that root.
func (p *prover) verify(member, kind string, obj metav1.Object) (fluxv1alpha2.Origin, bool) {
	origin, ok := fluxv1alpha2.OriginOf(obj)
	if !ok || origin.Hub != p.hub {
		return origin, false
	}
	got := obj.GetAnnotations()[fluxv1alpha2.AnnotationProof]
	want := p.sign(member, kind, obj.GetNamespace(), obj.GetName(), origin)
	return origin, hmac.Equal([]byte(got), []byte(want))
}

// ownedBy owns the objects of kind on member that carry this hub's proof for the root of UID
// root: the objects the hub created for it.
func (p *prover) ownedBy(member, kind string, root types.UID) apply.Owns {
	return func(obj metav1.Object) bool {
		origin, ok := p.verify(member, kind, obj)
		return ok && origin.UID == root
	}
}

// kindOf names the kind of an object the hub pushes: "Secret" or "MiniCluster".
func kindOf(obj client.Object) string {
	if _, ok := obj.(*corev1.Secret); ok {
		return "Secret"
	}
	return "MiniCluster"
}

// keyring holds the hub's key once it is read from its Secret, or first written there.
type keyring struct {
	mu     sync.Mutex
	prover *prover
}

// prover returns the hub's prover, reading its key from the ownership Secret, or generating one
// and creating the Secret when there is none. A key is never replaced: a hub that lost its key
// no longer recognises what it created, so a Secret that holds no usable key is an error to be
// fixed by hand, not something to overwrite.
func (r *Reconciler) prover(ctx context.Context) (*prover, error) {
	r.keys.mu.Lock()
	defer r.keys.mu.Unlock()
	if r.keys.prover != nil {
		return r.keys.prover, nil
	}
	key, err := r.readKey(ctx)
	if apierrors.IsNotFound(err) {
		key = make([]byte, ownershipKeyBytes)
		if _, err := rand.Read(key); err != nil {
			return nil, fmt.Errorf("generating the hub's ownership key: %w", err)
		}
		switch err = r.createKey(ctx, key); {
		case apierrors.IsAlreadyExists(err):
			// Another replica of the hub made it first: its key is the hub's.
			key, err = r.readKey(ctx)
		case err == nil:
			ctrl.LoggerFrom(ctx).Info("Created the hub's ownership key", "secret", klogKey(r.opts.MembersNamespace, r.opts.OwnershipKeySecret))
		}
	}
	if err != nil {
		return nil, err
	}
	r.keys.prover = &prover{hub: r.opts.Name, key: key}
	return r.keys.prover, nil
}

// readKey reads the key from the ownership Secret, past the cache.
func (r *Reconciler) readKey(ctx context.Context) ([]byte, error) {
	secret := &corev1.Secret{}
	key := client.ObjectKey{Namespace: r.opts.MembersNamespace, Name: r.opts.OwnershipKeySecret}
	if err := r.live.Get(ctx, key, secret); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, err
		}
		return nil, fmt.Errorf("reading the hub's ownership key (Secret %s): %w", key, err)
	}
	data := secret.Data[ownershipKeyField]
	if len(data) < ownershipKeyBytes {
		return nil, fmt.Errorf("the hub's ownership key Secret %s holds no key (data %q of at least %d bytes): it was changed by hand; "+
			"put back the key it held, or delete it only if the hub has pushed nothing with it (docs/security.md)",
			key, ownershipKeyField, ownershipKeyBytes)
	}
	return data, nil
}

// createKey creates the ownership Secret with key, immutable: a key is never changed in place.
func (r *Reconciler) createKey(ctx context.Context, key []byte) error {
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: r.opts.MembersNamespace, Name: r.opts.OwnershipKeySecret,
			Labels: map[string]string{"app.kubernetes.io/name": "fluxfed", "app.kubernetes.io/component": "hub"}},
		Type:      corev1.SecretTypeOpaque,
		Immutable: ptr.To(true),
		Data:      map[string][]byte{ownershipKeyField: key},
	}
	if err := r.client.Create(ctx, secret); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return err
		}
		return fmt.Errorf("creating the hub's ownership key (Secret %s/%s): %w", secret.Namespace, secret.Name, err)
	}
	return nil
}

// keepKey puts back the ownership Secret, with the key the hub holds, when it was deleted while
// the hub runs: without it, the next start of the hub would make a new key and recognise nothing
// it created before.
func (r *Reconciler) keepKey(ctx context.Context) error {
	r.keys.mu.Lock()
	p := r.keys.prover
	r.keys.mu.Unlock()
	if p == nil {
		return nil
	}
	name := klogKey(r.opts.MembersNamespace, r.opts.OwnershipKeySecret)
	switch key, err := r.readKey(ctx); {
	case apierrors.IsNotFound(err):
		ctrl.LoggerFrom(ctx).Info("Putting back the hub's ownership key, which was deleted", "secret", name)
		if err := r.createKey(ctx, p.key); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
		return nil
	case err != nil:
		return err
	case !hmac.Equal(key, p.key):
		return fmt.Errorf("the hub's ownership key Secret %s holds another key than the one this hub started with: restarted, the hub "+
			"would not recognise what it created; put back the key it held (docs/security.md)", name)
	}
	return nil
}

func klogKey(namespace, name string) string { return namespace + "/" + name }
