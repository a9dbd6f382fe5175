// Package envfile reads the versions.env files of e2e's build scripts: KEY=VALUE lines that a
// shell script sources and Go code embeds, with # comments and blank lines.
package envfile

import (
	"fmt"
	"slices"
	"strings"
)

// Parse returns the values of the keys env sets. A line that is not KEY=VALUE, or that sets a
// key not in known, is an error naming it.
func Parse(env string, known ...string) (map[string]string, error) {
	values := map[string]string{}
	for line := range strings.SplitSeq(env, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		key, value, ok := strings.Cut(line, "=")
		if !ok {
			return nil, fmt.Errorf("versions.env: line %q is not KEY=VALUE", line)
		}
		if !slices.Contains(known, key) {
			return nil, fmt.Errorf("versions.env: unknown key %q", key)
		}
		values[key] = value
	}
	return values, nil
}
