#!/usr/bin/env bash
# Builds flux-core, the real Flux brokers and `flux` command that fluxfed's real-Flux tests run,
# from its release tarball, into a cache outside the source tree; beside it, eth0.so (shim/eth0.c), the
# shim that lets every real broker bind its own loopback address as its pod's eth0.
#
# The tarball is FLUX_CORE_TARBALL (a path or a URL) when set; else a copy beside this checkout
# (../shared/flux-core/, as on the machines where fluxfed is developed) or one this script cached
# before; else flux-core's release on GitHub. Its SHA-256 must be the one in versions.env.
#
# flux-core finds its rc scripts, modules and Python bindings by the prefix it was configured
# with, so it is built for the directory it runs from: $FLUXFED_FLUX_CACHE/<version>/ (default
# ~/.cache/fluxfed/flux-core). Its Debian build dependencies are installed with apt-get when this
# runs as root; otherwise the script names the missing packages and the command that installs
# them. A warm run checks that the build is there and answers with its version, and builds nothing.
# Prints the prefix on its last line; tests find it through FLUXFED_FLUX_CORE or the cache.
#
# With FLUX_CORE_PREFIX set (an absolute path), it builds instead a flux-core for that prefix, where
# something else will run it (the flux view of real pods: /mnt/flux/view), and installs it with
# DESTDIR into $FLUXFED_FLUX_CACHE/<version>-for<prefix, / as ->/ (for /mnt/flux/view:
# 0.88.0-for-mnt-flux-view/mnt/flux/view/bin/flux). It cannot run from there, so the warm check
# is the build's completion mark. Prints that DESTDIR on its last line.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=versions.env
source "$here/versions.env"
cache_root=${FLUXFED_FLUX_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/fluxfed/flux-core}
prefix="$cache_root/$FLUX_CORE_VERSION"
tarball_name="flux-core-$FLUX_CORE_VERSION.tar.gz"
release_url="https://github.com/flux-framework/flux-core/releases/download/v$FLUX_CORE_VERSION/$tarball_name"
# dest is where `make install` puts the build (DESTDIR), empty when it runs where it is installed.
dest=
if [[ -n "${FLUX_CORE_PREFIX:-}" ]]; then
	[[ "$FLUX_CORE_PREFIX" =~ ^(/[A-Za-z0-9._-]+)+$ ]] || {
		printf 'flux-core: FLUX_CORE_PREFIX=%q is not an absolute path of plain names\n' "$FLUX_CORE_PREFIX" >&2
		exit 1
	}
	prefix=$FLUX_CORE_PREFIX
	dest="$cache_root/$FLUX_CORE_VERSION-for${FLUX_CORE_PREFIX//\//-}"
fi

log() { printf 'flux-core: %s\n' "$*" >&2; }

up_to_date() {
	if [[ -n "$dest" ]]; then
		[[ -x "$dest$prefix/bin/flux" && "$(cat "$dest/.complete" 2>/dev/null)" == "$FLUX_CORE_VERSION" ]]
		return
	fi
	[[ -f "$prefix/.complete" && -x "$prefix/bin/flux" ]] || return 1
	"$prefix/bin/flux" version 2>/dev/null | grep -Eq "^commands:[[:space:]]*$FLUX_CORE_VERSION([[:space:]]|$)"
}

# build_shim builds eth0.so from shim/eth0.c into the cache, named after the source's checksum, unless
# it is there.
build_shim() {
	local sum shim
	sum=$(sha256sum "$here/shim/eth0.c" | cut -c1-16)
	shim="$cache_root/eth0-$sum.so"
	[[ -f "$shim" ]] && return 0
	mkdir -p "$cache_root"
	gcc -shared -fPIC -O2 -Wall -Wextra -Werror -o "$shim.tmp" "$here/shim/eth0.c" -ldl -lpthread
	mv -f "$shim.tmp" "$shim"
	log "built $shim"
}

if up_to_date; then
	if [[ -n "$dest" ]]; then
		log "cached in $dest (for $prefix)"
		echo "$dest"
		exit 0
	fi
	build_shim
	log "cached in $prefix"
	echo "$prefix"
	exit 0
fi

# What flux-core 0.88.0 needs to build on Debian bookworm, and brings in what it needs to run
# (libzmq5, libjansson4, ...). Lua 5.3: bookworm's lua-posix has no module for 5.4.
packages=(autoconf automake libtool make pkg-config gcc g++ libc6-dev libzmq3-dev libjansson-dev
	liblz4-dev libhwloc-dev libsqlite3-dev uuid-dev libarchive-dev libncurses-dev python3-dev
	python3-cffi python3-yaml python3-ply python3-setuptools lua5.3 liblua5.3-dev lua-posix)
missing=()
for p in "${packages[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]} > 0)); then
	if [[ $(id -u) -ne 0 ]] || ! command -v apt-get >/dev/null; then
		log "missing Debian packages to build flux-core: ${missing[*]}"
		log "install them (as root): apt-get install -y ${missing[*]}"
		exit 1
	fi
	log "installing ${#missing[@]} Debian packages: ${missing[*]}"
	t0=$(date +%s)
	export DEBIAN_FRONTEND=noninteractive
	apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null 2>&1 ||
		{ apt-get update -q >/dev/null && apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null; }
	log "installed them in $(($(date +%s) - t0))s"
fi

# find_tarball prints the path of a verified tarball, copying it into the cache first.
mkdir -p "$cache_root"
cached="$cache_root/$tarball_name"
checked() { [[ -s "$1" ]] && echo "$FLUX_CORE_SHA256  $1" | sha256sum -c --quiet - >/dev/null 2>&1; }
find_tarball() {
	local candidates=() c
	if [[ -n "${FLUX_CORE_TARBALL:-}" && ! "$FLUX_CORE_TARBALL" =~ ^https?:// ]]; then
		candidates+=("$FLUX_CORE_TARBALL")
	fi
	candidates+=("$here/../../../shared/flux-core/$tarball_name" "$cached")
	for c in "${candidates[@]}"; do
		if checked "$c"; then
			if ! [[ "$c" -ef "$cached" ]]; then
				cp "$c" "$cached.tmp"
				mv -f "$cached.tmp" "$cached"
			fi
			echo "$cached"
			return 0
		elif [[ -e "$c" && "$c" == "${FLUX_CORE_TARBALL:-}" ]]; then
			log "$c does not have the SHA-256 of versions.env ($FLUX_CORE_SHA256)"
			return 1
		fi
	done
	local url=${FLUX_CORE_TARBALL:-$release_url}
	[[ "$url" =~ ^https?:// ]] || url=$release_url
	log "downloading $url"
	if ! curl -fsSL --max-time 300 -o "$cached.tmp" "$url"; then
		log "cannot download $url: set FLUX_CORE_TARBALL to a copy of $tarball_name"
		return 1
	fi
	checked "$cached.tmp" || { log "$url does not have the SHA-256 of versions.env"; rm -f "$cached.tmp"; return 1; }
	mv -f "$cached.tmp" "$cached"
	echo "$cached"
}
tarball=$(find_tarball)

start=$(date +%s)
work="$cache_root/.build-$FLUX_CORE_VERSION"
if [[ -n "$dest" ]]; then
	work="$dest.build"
	rm -rf "$work" "$dest"
else
	rm -rf "$work" "$prefix"
fi
mkdir -p "$work"
trap 'rm -rf "$work"' EXIT
tar -xzf "$tarball" -C "$work"
cd "$work/flux-core-$FLUX_CORE_VERSION"
# The tarball has no .git to take the version from; the Python with ply, cffi and yaml is
# Debian's, whatever else is first on PATH.
export FLUX_VERSION=$FLUX_CORE_VERSION LUA=lua5.3 PYTHON=/usr/bin/python3
log "building flux-core $FLUX_CORE_VERSION for $prefix (cold builds take about 5 minutes on 2 cores)"
{
	[[ -x configure ]] || ./autogen.sh
	./configure --prefix="$prefix" --disable-docs
	make -j"$(nproc)"
	make install ${dest:+DESTDIR="$dest"}
} >"$work/build.log" 2>&1 || {
	tail -40 "$work/build.log" >&2
	log "the build failed; the end of its log is above"
	exit 1
}
if [[ -n "$dest" ]]; then
	echo "$FLUX_CORE_VERSION" >"$dest/.complete"
	log "built in $(($(date +%s) - start))s for $prefix: $dest"
	echo "$dest"
	exit 0
fi
touch "$prefix/.complete"
log "built in $(($(date +%s) - start))s: $("$prefix/bin/flux" version | head -1)"
build_shim
echo "$prefix"
