package apply_test

import (
	"crypto/sha256"
	"encoding/hex"
	"testing"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/fluxfed/fluxfed/internal/apply"
)

func sha(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// summarize runs the cache transform on cm and returns what the cache would hold.
func summarize(t *testing.T, cm *corev1.ConfigMap) *corev1.ConfigMap {
	t.Helper()
	got, err := apply.SummarizeConfigMaps(cm)
	require.NoError(t, err)
	return got.(*corev1.ConfigMap)
}

func TestSummarizeConfigMaps(t *testing.T) {
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "x", Labels: map[string]string{"l": "v"},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "fluxfed-member"}}},
		Data:       map[string]string{"entrypoint.sh": "#!/bin/sh\necho hi\n", "empty": ""},
		BinaryData: map[string][]byte{"blob": {0, 1, 2}},
	}
	got := summarize(t, cm.DeepCopy())
	require.Equal(t, map[string]string{"entrypoint.sh": sha("#!/bin/sh\necho hi\n"), "empty": sha(""), "fluxfed.io/summarized": "sha256"}, got.Data)
	require.Equal(t, map[string][]byte{"blob": []byte(sha("\x00\x01\x02"))}, got.BinaryData)
	require.Empty(t, got.ManagedFields)
	require.Equal(t, cm.Labels, got.Labels, "the metadata stays")

	again := summarize(t, got.DeepCopy())
	require.Equal(t, got, again, "summarizing a summary changes nothing")

	none := summarize(t, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "none"}})
	require.Equal(t, map[string]string{"fluxfed.io/summarized": "sha256"}, none.Data, "a ConfigMap without data is summarized too")

	other := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "d", ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "m"}}}}
	kept, err := apply.SummarizeConfigMaps(other)
	require.NoError(t, err)
	require.Same(t, other, kept)
	require.Len(t, other.ManagedFields, 1, "other kinds pass unchanged")
}

// TestUpToDateComparesASummaryByDigest: a ConfigMap that the cache summarized is up to date
// exactly when the unsummarized one would be: the same values, extra keys allowed, an edited,
// missing or emptied value not.
func TestUpToDateComparesASummaryByDigest(t *testing.T) {
	desired := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata":   map[string]any{"name": "x", "labels": map[string]any{"l": "v"}},
		"data":       map[string]any{"entrypoint.sh": "echo hi", "empty": ""},
		"binaryData": map[string]any{"blob": "AAEC"}, // 0, 1, 2
	}}
	require.NoError(t, apply.Stamp(desired))
	stored := func(change func(*corev1.ConfigMap)) *corev1.ConfigMap {
		cm := &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: "x", Labels: map[string]string{"l": "v"}, Annotations: desired.GetAnnotations()},
			Data:       map[string]string{"entrypoint.sh": "echo hi", "empty": "", "theirs": "t"},
			BinaryData: map[string][]byte{"blob": {0, 1, 2}},
		}
		if change != nil {
			change(cm)
		}
		return cm
	}
	for _, tc := range []struct {
		name   string
		change func(*corev1.ConfigMap)
		want   bool
	}{
		{"as applied, with a key of someone else's", nil, true},
		{"an edited value", func(cm *corev1.ConfigMap) { cm.Data["entrypoint.sh"] = "echo bye" }, false},
		{"a value edited to the digest of the desired one", func(cm *corev1.ConfigMap) { cm.Data["entrypoint.sh"] = sha("echo hi") }, false},
		{"a missing key", func(cm *corev1.ConfigMap) { delete(cm.Data, "entrypoint.sh") }, false},
		{"an emptied value", func(cm *corev1.ConfigMap) { cm.Data["entrypoint.sh"] = "" }, false},
		{"edited binary data", func(cm *corev1.ConfigMap) { cm.BinaryData["blob"] = []byte{9} }, false},
		{"an edited label", func(cm *corev1.ConfigMap) { cm.Labels["l"] = "w" }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, apply.UpToDate(stored(tc.change), desired), "as stored")
			require.Equal(t, tc.want, apply.UpToDate(summarize(t, stored(tc.change)), desired), "as the cache summarizes it")
		})
	}
	// Binary data that is not base64 is compared as it is, and no summary holds it.
	bad := desired.DeepCopy()
	bad.Object["binaryData"] = map[string]any{"blob": "not base64!"}
	require.False(t, apply.UpToDate(summarize(t, stored(nil)), bad))
}
