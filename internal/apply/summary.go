package apply

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"

	corev1 "k8s.io/api/core/v1"
)

// summarizedKey marks a ConfigMap whose values a cache replaced by their digests. The API server
// never returns it, since a ConfigMap's keys cannot hold a slash, so no stored ConfigMap passes
// for a summarized one.
const summarizedKey = "fluxfed.io/summarized"

// SummarizeConfigMaps is a cache transform that keeps a ConfigMap without its managedFields and
// with each value of its data and binaryData replaced by the value's SHA-256 digest. A
// MiniCluster's entrypoint script is 22 KB of each of its ConfigMaps, and nothing that reads them
// from the cache needs the text: UpToDate compares a summarized ConfigMap's values by digest, so
// a hand-edited value is still put back. Other objects pass unchanged. It is idempotent.
func SummarizeConfigMaps(obj any) (any, error) {
	cm, ok := obj.(*corev1.ConfigMap)
	if !ok {
		return obj, nil
	}
	cm.ManagedFields = nil
	if summarized(cm.Data) {
		return cm, nil
	}
	data := make(map[string]string, len(cm.Data)+1)
	for k, v := range cm.Data {
		data[k] = digest([]byte(v))
	}
	data[summarizedKey] = "sha256"
	cm.Data = data
	for k, v := range cm.BinaryData {
		cm.BinaryData[k] = []byte(digest(v))
	}
	return cm, nil
}

func summarized[V any](data map[string]V) bool {
	_, ok := data[summarizedKey]
	return ok
}

func digest(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// summarizedDesired returns desired's fields as a summarized ConfigMap holds them: the values of
// data and binaryData (base64, as in JSON) replaced by their digests. A value of another type, or
// binary data that is not base64, is left as it is, which no summary holds.
func summarizedDesired(desired map[string]any) map[string]any {
	out := make(map[string]any, len(desired))
	for k, v := range desired {
		out[k] = v
	}
	if data, ok := desired["data"].(map[string]any); ok {
		digests := make(map[string]any, len(data))
		for k, v := range data {
			if s, ok := v.(string); ok {
				v = digest([]byte(s))
			}
			digests[k] = v
		}
		out["data"] = digests
	}
	if data, ok := desired["binaryData"].(map[string]any); ok {
		digests := make(map[string]any, len(data))
		for k, v := range data {
			if s, ok := v.(string); ok {
				if b, err := base64.StdEncoding.DecodeString(s); err == nil {
					v = base64.StdEncoding.EncodeToString([]byte(digest(b)))
				}
			}
			digests[k] = v
		}
		out["binaryData"] = digests
	}
	return out
}
