// Package fluxcore finds the flux-core build (the real Flux brokers and the `flux` command) that
// build.sh beside it makes from flux-core's release tarball, so that tests can run real Flux.
package fluxcore

import (
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/fluxfed/fluxfed/e2e/envfile"
)

//go:embed versions.env
var versionsEnv string

//go:embed shim/eth0.c
var eth0Source []byte

// EnvPrefix names the variable that points at a flux-core installation prefix (the directory
// that holds bin/flux); `make test` sets it to what build.sh printed.
const EnvPrefix = "FLUXFED_FLUX_CORE"

// EnvCache names the variable that overrides the root of build.sh's cache.
const EnvCache = "FLUXFED_FLUX_CACHE"

// Versions holds the pinned version and checksum from versions.env.
type Versions struct {
	// FluxCore is flux-core's version, e.g. 0.88.0.
	FluxCore string
	// SHA256 is the checksum of its source tarball.
	SHA256 string
}

// Pinned returns what build.sh builds.
func Pinned() Versions {
	v, err := parseVersions(versionsEnv)
	if err != nil {
		// versions.env is embedded at build time and covered by a test.
		panic(err)
	}
	return v
}

func parseVersions(env string) (Versions, error) {
	values, err := envfile.Parse(env, "FLUX_CORE_VERSION", "FLUX_CORE_SHA256")
	if err != nil {
		return Versions{}, err
	}
	v := Versions{FluxCore: values["FLUX_CORE_VERSION"], SHA256: values["FLUX_CORE_SHA256"]}
	if v.FluxCore == "" || len(v.SHA256) != 64 {
		return Versions{}, errors.New("versions.env: FLUX_CORE_VERSION and a 64-digit FLUX_CORE_SHA256 are required")
	}
	return v, nil
}

// cacheRoot is build.sh's cache: $FLUXFED_FLUX_CACHE, by default ~/.cache/fluxfed/flux-core.
func cacheRoot() (string, error) {
	if root := os.Getenv(EnvCache); root != "" {
		return root, nil
	}
	base, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("finding the user cache directory: %w", err)
	}
	return filepath.Join(base, "fluxfed", "flux-core"), nil
}

// CacheDir returns the prefix build.sh builds the pinned version for: <cache>/<version>.
func CacheDir() (string, error) {
	root, err := cacheRoot()
	if err != nil {
		return "", err
	}
	return filepath.Join(root, Pinned().FluxCore), nil
}

// Shim returns the path of eth0.so, built by build.sh from shim/eth0.c as this source has it: with it
// preloaded (LD_PRELOAD) and FLUXFED_ETH0 set to an IPv4 address, a process sees an interface
// eth0 with that address.
func Shim() (string, error) {
	root, err := cacheRoot()
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(eth0Source)
	path := filepath.Join(root, "eth0-"+hex.EncodeToString(sum[:8])+".so")
	if _, err := os.Stat(path); err != nil {
		return "", fmt.Errorf("%s is missing: run `make flux-core`, which builds it from e2e/fluxcore/shim/eth0.c", path)
	}
	return path, nil
}

// Prefix returns the flux-core installation to run: $FLUXFED_FLUX_CORE when set, else the cache.
// The error says how to build it when it is missing.
func Prefix() (string, error) {
	dir, from := os.Getenv(EnvPrefix), EnvPrefix
	if dir == "" {
		var err error
		if dir, err = CacheDir(); err != nil {
			return "", err
		}
		from = "the flux-core cache"
	}
	if info, err := os.Stat(Flux(dir)); err != nil || info.Mode()&0o111 == 0 {
		return "", fmt.Errorf("%s (%s) has no bin/flux: run `make flux-core` to build flux-core %s (about 5 minutes the first time), "+
			"or point %s at an installation of it", dir, from, Pinned().FluxCore, EnvPrefix)
	}
	return dir, nil
}

// Flux returns the path of the flux command of the installation at prefix.
func Flux(prefix string) string { return filepath.Join(prefix, "bin", "flux") }

// Version returns what `flux version` says of the commands of the installation at prefix:
// "0.88.0", say.
func Version(prefix string) (string, error) {
	out, err := exec.Command(Flux(prefix), "version").Output()
	if err != nil {
		return "", fmt.Errorf("running %s version: %w", Flux(prefix), err)
	}
	for line := range strings.SplitSeq(string(out), "\n") {
		if rest, ok := strings.CutPrefix(line, "commands:"); ok {
			if f := strings.Fields(rest); len(f) > 0 {
				return f[0], nil
			}
		}
	}
	return "", fmt.Errorf("%s version printed no commands line: %q", Flux(prefix), out)
}
