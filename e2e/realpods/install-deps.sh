#!/usr/bin/env bash
# Installs what real pods need on this machine besides the Kubernetes binaries (e2e/k8sbin):
# containerd (and its ctr), runc and the CNI plugins bridge, host-local and loopback, from the
# Debian packages containerd, runc and containernetworking-plugins. It starts nothing: the packages
# bring no running service here (there is no init system), and the tests start their own
# containerd with its own root, state and socket.
#
# When something is missing it runs apt-get install as root; when it cannot (not root, or no
# apt-get), it names what is missing and the command that installs it, and exits 1. A warm run
# only looks: it installs nothing. Prints what it found on standard error, and the directory of the
# CNI plugins on its last line (the first of CNI_PATH, by default /usr/lib/cni:/opt/cni/bin, that
# has all three).
set -euo pipefail

cni_path=${CNI_PATH:-/usr/lib/cni:/opt/cni/bin}
cni_plugins=(bridge host-local loopback)

log() { printf 'real-pod-deps: %s\n' "$*" >&2; }

# find_cni prints the first directory of cni_path that has every plugin of cni_plugins.
find_cni() {
	local dir p
	IFS=: read -ra dirs <<<"$cni_path"
	for dir in "${dirs[@]}"; do
		for p in "${cni_plugins[@]}"; do
			[[ -x "$dir/$p" ]] || continue 2
		done
		echo "$dir"
		return 0
	done
	return 1
}

# find_missing sets missing to the Debian packages whose programs are not here and why to what
# is not found of each.
find_missing() {
	missing=() why=()
	if ! command -v containerd >/dev/null || ! command -v ctr >/dev/null; then
		missing+=(containerd) why+=("containerd (no containerd or ctr on PATH)")
	fi
	if ! command -v runc >/dev/null; then
		missing+=(runc) why+=("runc (no runc on PATH)")
	fi
	if ! find_cni >/dev/null; then
		missing+=(containernetworking-plugins)
		why+=("containernetworking-plugins (no directory of CNI_PATH=$cni_path has ${cni_plugins[*]})")
	fi
}

find_missing
if ((${#missing[@]} > 0)); then
	if [[ "$(id -u)" != 0 ]] || ! command -v apt-get >/dev/null; then
		cannot="not root"
		[[ "$(id -u)" == 0 ]] && cannot="no apt-get"
		for w in "${why[@]}"; do
			log "missing: $w"
		done
		log "cannot install them here ($cannot); install them as root with: apt-get install -y ${missing[*]}"
		exit 1
	fi
	log "installing ${missing[*]} with apt-get"
	t0=$(date +%s)
	export DEBIAN_FRONTEND=noninteractive
	apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null 2>&1 ||
		{ apt-get update -q >/dev/null && apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null; }
	log "installed them in $(($(date +%s) - t0))s"
	find_missing
	((${#missing[@]} == 0)) || { log "apt-get installed them, but still missing: ${why[*]}"; exit 1; }
fi

# The versions: containerd and runc say theirs; the CNI plugins only through their package.
read -r _ _ containerd_version _ < <(containerd --version)
read -r _ _ runc_version _ < <(runc --version)
cni=$(find_cni)
cni_version="version unknown"
if command -v dpkg-query >/dev/null; then
	cni_version=$(dpkg-query -W -f '${Version}' containernetworking-plugins 2>/dev/null || echo "version unknown")
fi
log "containerd $containerd_version ($(command -v containerd), $(command -v ctr))"
log "runc $runc_version ($(command -v runc))"
log "CNI plugins $cni_version (${cni_plugins[*]} in $cni)"
echo "$cni"
