#!/usr/bin/env bash
# Builds the Kubernetes binaries that fluxfed's tests run as local processes, from Go modules
# through the module proxy: kube-apiserver, kube-controller-manager, kube-scheduler, kubectl and
# kubelet (k8s.io/kubernetes), etcd (go.etcd.io/etcd/server/v3), kwok (sigs.k8s.io/kwok) and CoreDNS
# (github.com/coredns/coredns, with only the plugins of COREDNS_PLUGINS in versions.env, never
# forward: the clusters' DNS asks no server outside). Beside them, in crds/, it puts the Prometheus Operator's ServiceMonitor CRD, copied from that operator's module, so
# that the chart's tests check the ServiceMonitor they render against its real schema.
#
# k8s.io/kubernetes replaces its k8s.io/* staging modules with ./staging paths that do not exist in
# the published module, so the build module below points every one of them at the published
# k8s.io module of the matching v0.x.y. etcd is built at the version Kubernetes itself requires.
# CoreDNS needs other versions of the k8s.io modules than Kubernetes, so it has a build module of its
# own.
#
# Binaries land in $FLUXFED_K8S_CACHE/<kubernetes version>/ (default ~/.cache/fluxfed/k8s). A warm
# run checks that every binary is there and reports the expected version, and builds nothing. A
# run that finds some binaries missing (a new one added here, or an interrupted build) builds only
# those: each binary is written under a temporary name and renamed, so one that is there is whole.
# Prints the directory on its last line; tests find it through KUBEBUILDER_ASSETS or the cache.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=versions.env
source "$here/versions.env"
cache_root=${FLUXFED_K8S_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/fluxfed/k8s}
out="$cache_root/$KUBE_VERSION"
binaries=(kube-apiserver kube-controller-manager kube-scheduler kubectl etcd kwok kubelet coredns)
# The CoreDNS plugins built in (versions.env); `coredns -plugins` lists them; coredns_is_pinned checks.
IFS=, read -ra coredns_plugins <<<"$COREDNS_PLUGINS"
for p in "${coredns_plugins[@]}"; do
	[[ "$p" =~ ^[a-z0-9_]+$ && "$p" != forward ]] || { printf 'k8s-binaries: versions.env: COREDNS_PLUGINS: %q is not a plugin this build allows\n' "$p" >&2; exit 1; }
done

log() { printf 'k8s-binaries: %s\n' "$*" >&2; }

up_to_date() {
	local b
	for b in "${binaries[@]}"; do
		[[ -x "$out/$b" ]] || return 1
	done
	[[ "$("$out/kube-apiserver" --version 2>/dev/null)" == "Kubernetes $KUBE_VERSION" ]] || return 1
	coredns_is_pinned || return 1
	[[ -f "$out/.complete" ]] || return 1
}

# coredns_is_pinned says whether $out/coredns is the pinned version with every plugin of
# coredns_plugins and no forward plugin. (`coredns -plugins` also lists the plugins that those
# register in turn, metadata, prometheus and transfer, which no Corefile can use: only
# coredns_plugins are directives.)
coredns_is_pinned() {
	[[ "$("$out/coredns" -version 2>/dev/null | head -n 1)" == "CoreDNS-${COREDNS_VERSION#v}" ]] || return 1
	local listed p
	listed=$("$out/coredns" -plugins 2>/dev/null) || return 1
	for p in "${coredns_plugins[@]}"; do
		grep -qx "$p" <<<"$listed" || return 1
	done
	! grep -qx forward <<<"$listed"
}

# fetch_crds copies the ServiceMonitor CRD out of the pinned Prometheus Operator module (3.7 MB,
# from the module proxy) unless it is there already.
servicemonitor_crd="$out/crds/monitoring.coreos.com_servicemonitors.yaml"
fetch_crds() {
	[[ -s "$servicemonitor_crd" ]] && return 0
	local mod="github.com/prometheus-operator/prometheus-operator@$PROMETHEUS_OPERATOR_VERSION" dir
	log "fetching the ServiceMonitor CRD of $mod"
	dir=$(cd / && GOFLAGS=-mod=mod go mod download -json "$mod" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
	local src="$dir/example/prometheus-operator-crd/monitoring.coreos.com_servicemonitors.yaml"
	[[ -s "$src" ]] || { log "cannot download $mod, or it has no $src"; exit 1; }
	mkdir -p "$out/crds"
	cp "$src" "$servicemonitor_crd.tmp"
	chmod 0644 "$servicemonitor_crd.tmp"
	mv "$servicemonitor_crd.tmp" "$servicemonitor_crd"
}

if up_to_date; then
	fetch_crds
	log "cached in $out"
	echo "$out"
	exit 0
fi

start=$(date +%s)
staging_version="v0.${KUBE_VERSION#v1.}"
work="$cache_root/.build-$KUBE_VERSION"
rm -rf "$work"
mkdir -p "$work/etcd" "$work/coredns" "$out"
trap 'rm -rf "$work"' EXIT
cd "$work"

kube_mod=$(go mod download -json "k8s.io/kubernetes@$KUBE_VERSION" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",$/\1/p')
[[ -f "$kube_mod" ]] || { log "cannot download k8s.io/kubernetes@$KUBE_VERSION"; exit 1; }
etcd_version=$(awk '$1 == "go.etcd.io/etcd/server/v3" {print $2; exit}' "$kube_mod")
[[ -n "$etcd_version" ]] || { log "k8s.io/kubernetes@$KUBE_VERSION does not name an etcd server version"; exit 1; }

{
	echo "module fluxfed.local/k8sbin"
	echo
	echo "go 1.26"
	echo
	echo "require ("
	echo "	k8s.io/kubernetes $KUBE_VERSION"
	echo "	go.etcd.io/etcd/server/v3 $etcd_version"
	echo "	sigs.k8s.io/kwok $KWOK_VERSION"
	echo ")"
	echo
	echo "replace ("
	# Every "k8s.io/x => ./staging/src/k8s.io/x" becomes "k8s.io/x => k8s.io/x v0.N.P".
	awk -v v="$staging_version" '$2 == "=>" && $3 ~ /^\.\/staging\// {printf "\t%s => %s %s\n", $1, $1, v}' "$kube_mod"
	echo ")"
} >go.mod

cat >etcd/main.go <<'GO'
// Command etcd is etcd's own server entry point, built at the version Kubernetes requires.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
GO

cat >tools.go <<'GO'
//go:build tools

package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubectl"
	_ "k8s.io/kubernetes/cmd/kubelet"
	_ "sigs.k8s.io/kwok/cmd/kwok"
)
GO

{
	echo "module fluxfed.local/coredns"
	echo
	echo "go 1.26"
	echo
	echo "require github.com/coredns/coredns $COREDNS_VERSION"
} >coredns/go.mod
{
	echo "// Command coredns is CoreDNS with only the plugins fluxfed's clusters use."
	echo "package main"
	echo
	echo "import ("
	echo "	\"log\""
	echo
	echo "	\"github.com/coredns/coredns/core/dnsserver\""
	echo "	\"github.com/coredns/coredns/coremain\""
	printf '\t_ "github.com/coredns/coredns/plugin/%s"\n' "${coredns_plugins[@]}"
	echo ")"
	echo
	echo "func main() {"
	printf '\tif err := dnsserver.SetDirectives([]string{%s}); err != nil {\n' "$(printf '"%s", ' "${coredns_plugins[@]}" | sed 's/, $//')"
	echo "		log.Fatal(err)"
	echo "	}"
	echo "	coremain.Run()"
	echo "}"
} >coredns/main.go

log "resolving modules (k8s.io/kubernetes $KUBE_VERSION, etcd $etcd_version, kwok $KWOK_VERSION, CoreDNS $COREDNS_VERSION)"
go mod tidy -e >/dev/null 2>"$work/tidy.log" || { cat "$work/tidy.log" >&2; exit 1; }
(cd coredns && go mod tidy) >/dev/null 2>"$work/tidy-coredns.log" || { cat "$work/tidy-coredns.log" >&2; exit 1; }

minor=${KUBE_VERSION#v1.}
minor=${minor%%.*}
ldflags="-s -w"
for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
	ldflags+=" -X $p.gitVersion=$KUBE_VERSION -X $p.gitMajor=1 -X $p.gitMinor=$minor"
	ldflags+=" -X $p.gitTreeState=clean -X $p.buildDate=1970-01-01T00:00:00Z"
done

# A kube-apiserver of another version means the directory holds something else: rebuild it all.
if [[ -x "$out/kube-apiserver" && "$("$out/kube-apiserver" --version 2>/dev/null)" != "Kubernetes $KUBE_VERSION" ]]; then
	log "$out/kube-apiserver is not $KUBE_VERSION: rebuilding every binary"
	rm -f "${binaries[@]/#/$out/}"
fi
if [[ -x "$out/coredns" ]] && ! coredns_is_pinned; then
	log "$out/coredns is not CoreDNS $COREDNS_VERSION with plugins ${coredns_plugins[*]}: rebuilding it"
	rm -f "$out/coredns"
fi

build() { # name package [ldflags]
	if [[ -x "$out/$1" ]]; then
		log "$1 is there already"
		return 0
	fi
	local t0=$(date +%s)
	log "building $1 (cold builds take minutes on 2 cores)"
	CGO_ENABLED=0 go build -trimpath -ldflags "$3" -o "$out/$1.tmp" "$2"
	mv "$out/$1.tmp" "$out/$1"
	log "built $1 in $(($(date +%s) - t0))s"
}

rm -f "$out/.complete"
build kube-apiserver k8s.io/kubernetes/cmd/kube-apiserver "$ldflags"
build etcd ./etcd "-s -w"
build kube-controller-manager k8s.io/kubernetes/cmd/kube-controller-manager "$ldflags"
build kube-scheduler k8s.io/kubernetes/cmd/kube-scheduler "$ldflags"
build kubectl k8s.io/kubernetes/cmd/kubectl "$ldflags"
build kwok sigs.k8s.io/kwok/cmd/kwok "-s -w -X sigs.k8s.io/kwok/pkg/consts.Version=$KWOK_VERSION"
build kubelet k8s.io/kubernetes/cmd/kubelet "$ldflags"
(cd coredns && build coredns . "-s -w -X github.com/coredns/coredns/coremain.gitTag=$COREDNS_VERSION")
cp go.mod "$out/build.go.mod"
fetch_crds
touch "$out/.complete"
log "done in $(($(date +%s) - start))s: $out"
echo "$out"
