#!/bin/sh
# Runs one container of a simulated pod for real, as a kubelet would, but on this machine's own
# files: run by e2e/realflux inside `unshare --uts --mount`, as root.
#
#   sandbox.sh ROOT HOSTNAME HOSTS TERMLOG WORKDIR [-m SRC:DST[:ro]]... -- COMMAND [ARG]...
#
# ROOT (an empty directory) becomes the container's root: this machine's system directories
# bound read-only (/usr, /bin, /lib..., /etc), and everything else empty (tmpfs), so that no
# mount point is ever made on this machine's own disk. /etc/hosts is HOSTS, /dev/termination-log
# is TERMLOG, each -m binds a volume's directory SRC at DST, and the host name is HOSTNAME. Then
# COMMAND runs in WORKDIR with the environment this script was given. The mounts are private to
# the mount namespace and go with it.
set -eu

root=$1 hostname=$2 hosts=$3 termlog=$4 workdir=$5
shift 5
mounts=
while [ "$#" -gt 0 ] && [ "$1" = -m ]; do
	mounts="$mounts $2"
	shift 2
done
[ "${1-}" = -- ] || { echo "sandbox.sh: want -- before the command" >&2; exit 2; }
shift

mount --make-rprivate /
mount -t tmpfs -o mode=0755 fluxfed-root "$root"

# bind SRC DST [ro]: a directory or file of this machine at DST in the new root.
bind() {
	# A mount point is made only where nothing is: never write over a file of this machine
	# (/etc/hosts is a file of the read-only /etc, mounted over, not written).
	if [ -d "$1" ]; then
		[ -e "$root$2" ] || mkdir -p "$root$2"
	elif [ ! -e "$root$2" ]; then
		mkdir -p "$(dirname "$root$2")"
		: >"$root$2"
	fi
	mount --rbind "$1" "$root$2"
	if [ "${3-}" = ro ]; then
		mount -o remount,bind,ro "$root$2"
	fi
}

# The system: programs, libraries and configuration, read-only. A top-level directory that is a
# symbolic link (/bin -> usr/bin on a merged /usr) stays one.
for d in /usr /bin /sbin /lib /lib32 /lib64 /libx32 /etc; do
	if [ -L "$d" ]; then
		ln -s "$(readlink "$d")" "$root$d"
	elif [ -d "$d" ]; then
		bind "$d" "$d" ro
	fi
done
# Extra directories of this machine the container needs at the same path, read-only: the
# flux-core installation, which finds its modules by the prefix it was built for.
for d in ${FLUXFED_SANDBOX_BIND-}; do
	bind "$d" "$d" ro
done
mkdir -p "$root/proc" "$root/sys" "$root/tmp" "$root/run" "$root/var/tmp" "$root/dev"
mount --rbind /proc "$root/proc"
mount --rbind /sys "$root/sys"
mount -t tmpfs -o mode=1777 fluxfed-tmp "$root/tmp"
mount -t tmpfs -o mode=0755 fluxfed-run "$root/run"
mount -t tmpfs -o mode=1777 fluxfed-var-tmp "$root/var/tmp"
mount -t tmpfs -o mode=0755 fluxfed-dev "$root/dev"
for n in null zero full random urandom tty; do
	bind "/dev/$n" "/dev/$n"
done
mkdir -p "$root/dev/shm" "$root/dev/pts"
mount -t tmpfs -o mode=1777 fluxfed-shm "$root/dev/shm"
ln -s /proc/self/fd "$root/dev/fd"
ln -s /proc/self/fd/0 "$root/dev/stdin"
ln -s /proc/self/fd/1 "$root/dev/stdout"
ln -s /proc/self/fd/2 "$root/dev/stderr"

bind "$termlog" /dev/termination-log
bind "$hosts" /etc/hosts
for m in $mounts; do
	src=${m%%:*}
	rest=${m#*:}
	dst=${rest%%:*}
	ro=
	[ "$rest" = "$dst" ] || ro=${rest#*:}
	bind "$src" "$dst" $ro
done

hostname "$hostname"
mkdir -p "$root$workdir"
exec chroot "$root" /bin/sh -c 'cd "$1" && shift && exec "$@"' sandbox "$workdir" "$@"
