package workload

import (
	"encoding/json"
	"fmt"
)

// convert turns a typed API struct embedded in the MiniCluster spec (a core/v1 security
// context, resource requirements, a resource claim) into its apply configuration. Apply
// configurations mirror the typed structs field by field under the same JSON names, so a JSON
// round trip carries every field, including ones added in later API versions.
func convert[AC any](typed any) (*AC, error) {
	data, err := json.Marshal(typed)
	if err != nil {
		return nil, fmt.Errorf("encoding %T: %w", typed, err)
	}
	out := new(AC)
	if err := json.Unmarshal(data, out); err != nil {
		return nil, fmt.Errorf("decoding %T as %T: %w", typed, out, err)
	}
	return out, nil
}
