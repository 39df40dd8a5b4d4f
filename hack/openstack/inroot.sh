#!/usr/bin/env bash
# Runs one command inside a release root (a debootstrap tree built by
# hack/openstack.sh install --release ...), in a private mount namespace:
# /proc, /dev, a fresh /tmp and the host paths the world needs are mounted
# into the root only inside that namespace, so the host never sees them and
# they vanish with the last process of the namespace, also when it crashes.
# Each host path is mounted at the same path inside the root, so the
# rendered configuration names the same files on both sides.
#
#   inroot.sh ROOTFS PATH... -- CMD [ARG...]
#
# The command keeps this process's PID (unshare and chroot exec it), so a
# PID file written by the caller names the service itself. Needs root.
set -euo pipefail

[ $# -ge 3 ] || { echo "usage: inroot.sh ROOTFS PATH... -- CMD [ARG...]" >&2; exit 2; }
rootfs=$1
shift
binds=()
while [ $# -gt 0 ] && [ "$1" != -- ]; do
	binds+=("$1")
	shift
done
[ "${1:-}" = -- ] && [ $# -ge 2 ] || { echo "inroot.sh: no command after --" >&2; exit 2; }
shift
[ -x "$rootfs/usr/bin/env" ] || { echo "inroot.sh: $rootfs is not a release root (no usr/bin/env)" >&2; exit 2; }

if [ "${TETHER_INROOT_NS:-}" != "$$" ]; then
	# Re-run this script in a new mount namespace whose mounts do not
	# propagate back to the host.
	export TETHER_INROOT_NS=$$
	exec unshare --mount --propagation private -- "$0" "$rootfs" "${binds[@]}" -- "$@"
fi

mount -t proc proc "$rootfs/proc"
mount --rbind /dev "$rootfs/dev"
# A fresh /tmp: the mount points of host paths under /tmp (a world's DIR,
# usually) are made here, not in the cached root.
mount -t tmpfs -o mode=1777 tmpfs "$rootfs/tmp"
for p in "${binds[@]}"; do
	[ -d "$p" ] || { echo "inroot.sh: $p is not a directory" >&2; exit 2; }
	mkdir -p "$rootfs$p"
	mount --bind "$p" "$rootfs$p"
done
# No bytecode written into the checkout's hack/openstack.
env=(PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 PYTHONDONTWRITEBYTECODE=1)
[ -z "${PYTHONPATH:-}" ] || env+=("PYTHONPATH=$PYTHONPATH")
exec chroot "$rootfs" /usr/bin/env -i "${env[@]}" "$@"
