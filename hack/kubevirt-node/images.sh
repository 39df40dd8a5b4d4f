#!/usr/bin/env bash
# Builds the launcher and handler images of the test world's real node from
# Debian 12's packages and the binaries hack/kubevirt-node.sh built, without
# a container engine: each root is made with debootstrap (minbase) and apt
# in a chroot, KubeVirt's own files are put where its images have them
# (cmd/virt-launcher/BUILD.bazel, cmd/virt-handler/BUILD.bazel), and the root
# is packed with hack/rootfs-image into a tarball that
# `ctr -n k8s.io images import` reads. Needs root (debootstrap, chroot,
# setcap); hack/kubevirt-node.sh calls it.
#
#   images.sh BIN KUBEVIRT_MODULE_DIR OUT VERSION
#
# writes OUT/virt-launcher.tar, OUT/virt-handler.tar and OUT/guest-kernel.tar
# (the test guest, hack/kubevirt-node/guest.sh), named
# tether.local/kubevirt/virt-launcher:VERSION, .../virt-handler:VERSION and
# .../guest-kernel:VERSION.
set -euo pipefail

[ $# -eq 4 ] || { echo "usage: images.sh BIN KUBEVIRT_MODULE_DIR OUT VERSION" >&2; exit 2; }
bin=$1 kvdir=$2 out=$3 version=$4
root=$(cd "$(dirname "$0")/../.." && pwd)
mirror=${TETHER_DEBIAN_MIRROR:-http://deb.debian.org/debian}
suite=bookworm

log() { printf 'kubevirt-node: %s\n' "$*" >&2; }

# What KubeVirt's launcher and handler bases hold (hack/rpm-deps.sh in the
# module), in Debian 12's names. Debian 12 has libvirt 9.0 and QEMU 7.2,
# older than the ones KubeVirt v1.9 is built for; the monolithic libvirtd
# stands in for virtqemud (below).
launcher_pkgs=(libvirt-clients libvirt-daemon libvirt-daemon-driver-qemu qemu-system-x86 qemu-utils
	findutils nftables procps tar xorriso util-linux)
handler_pkgs=(qemu-utils findutils iproute2 nftables procps tar util-linux xorriso)

work=$(mktemp -d "$out/.roots-XXXXXX")
trap 'rm -rf "$work"' EXIT

# strap DIR PKG...: a minimal Debian root with PKG installed by its own apt
# (no service started), trimmed of documentation and package lists.
strap() {
	local dir=$1
	shift
	debootstrap --variant=minbase "$suite" "$dir" "$mirror" >"$work/debootstrap.log" 2>&1 ||
		{ tail -5 "$work/debootstrap.log" >&2; log "debootstrap $suite from $mirror failed (above); TETHER_DEBIAN_MIRROR names another mirror"; exit 1; }
	printf '#!/bin/sh\nexit 101\n' >"$dir/usr/sbin/policy-rc.d"
	chmod +x "$dir/usr/sbin/policy-rc.d"
	cp /etc/resolv.conf "$dir/etc/resolv.conf" 2>/dev/null || true
	unshare --mount --propagation private -- sh -ec '
		dir=$1; shift
		mount -t proc proc "$dir/proc"
		chroot "$dir" /bin/sh -ec "export DEBIAN_FRONTEND=noninteractive; apt-get update -q; apt-get install -y -q --no-install-recommends $*; apt-get clean"
	' sh "$dir" "$@" >"$work/apt.log" 2>&1 ||
		{ tail -5 "$work/apt.log" >&2; log "installing $* in the image root failed (above)"; exit 1; }
	rm -f "$dir/usr/sbin/policy-rc.d"
	: >"$dir/etc/resolv.conf"
	rm -rf "$dir"/usr/share/doc/* "$dir"/usr/share/man/* "$dir"/usr/share/info/* \
		"$dir"/var/lib/apt/lists/* "$dir"/var/cache/apt/* "$dir"/var/log/*
	find "$dir/dev" -mindepth 1 -delete
	# KubeVirt's images have /var/run -> ../run, relative: virt-handler
	# reaches a launcher's files through /proc/PID/root/var/run.
	rm -rf "$dir/var/run"
	ln -s ../run "$dir/var/run"
}

# users DIR HOME: root and qemu (107:107), as KubeVirt's images have them;
# Debian's libvirtd also looks up the user and group libvirt-qemu (its
# build's default), whatever qemu.conf says, and fails to start without them.
users() {
	local dir=$1 home=$2
	cat >>"$dir/etc/passwd" <<-EOF
		qemu:x:107:107:qemu:$home:/bin/bash
		libvirt-qemu:x:64055:64055:libvirt qemu:/var/lib/libvirt:/usr/sbin/nologin
	EOF
	printf 'qemu:x:107:\nlibvirt-qemu:x:64055:\n' >>"$dir/etc/group"
	[ -z "$home" ] || install -d -o 107 -g 107 "$dir$home"
}

# pack DIR NAME ENTRYPOINT USER: the root as OUT/NAME.tar, an image named
# tether.local/kubevirt/NAME:VERSION. GNU tar keeps the file capabilities.
pack() {
	local dir=$1 name=$2 entry=$3 user=$4
	tar --create --file "$work/$name-layer.tar" --directory "$dir" --numeric-owner --sort=name \
		--xattrs --xattrs-include='security.capability' --pax-option=delete=atime,delete=ctime --exclude='./proc/*' --exclude='./sys/*' .
	(cd "$root" && go run ./hack/rootfs-image -layer "$work/$name-layer.tar" \
		-tag "tether.local/kubevirt/$name:$version" -out "$out/$name.tar" -entrypoint "$entry" -user "$user")
	rm -f "$work/$name-layer.tar"
}

t0=$(date +%s)
log "  building the launcher image root (Debian $suite: libvirt, QEMU) ..."
L=$work/launcher
strap "$L" "${launcher_pkgs[@]}"
for b in virt-launcher virt-launcher-monitor container-disk virt-freezer virt-probe virt-tail libvirt-hook-client; do
	install -m 0755 "$bin/$b" "$L/usr/bin/$b"
done
install -m 0755 "$kvdir/cmd/virt-launcher/node-labeller/node-labeller.sh" "$L/usr/bin/node-labeller.sh"
setcap cap_net_bind_service=+ep "$L/usr/bin/virt-launcher-monitor"
install -m 0644 "$kvdir/cmd/virt-launcher/qemu.conf" "$kvdir/cmd/virt-launcher/virtqemud.conf" "$L/etc/libvirt/"
install -m 0644 "$kvdir/cmd/virt-launcher/nsswitch.conf" "$L/etc/nsswitch.conf"
# The launcher runs as qemu (107) and replaces the hook at start, so the
# directory is the qemu user's (as the hook is, in KubeVirt's image).
install -d -o 107 -g 107 "$L/etc/libvirt/hooks"
install -m 0755 -o 107 -g 107 "$kvdir/cmd/virt-launcher/qemu" "$L/etc/libvirt/hooks/qemu"
# virt-launcher starts virtlogd with -f /etc/libvirt/virtlogd.conf, which
# Debian's package does not ship.
printf '# tether: virtlogd for virt-launcher, logging to stderr (virt-launcher reads it).\nlog_outputs = "3:stderr"\n' >"$L/etc/libvirt/virtlogd.conf"
# Debian 12 has no virtqemud, only the monolithic libvirtd. virt-launcher
# runs /usr/sbin/virtqemud -f /var/run/libvirt/virtqemud.conf and connects
# to /var/run/libvirt/virtqemud-sock (as root and as qemu, whose runtime
# directory is /var/run): libvirtd takes its place, and the launcher's
# socket name is linked to libvirtd's.
cat >"$L/usr/sbin/virtqemud" <<'EOF'
#!/bin/sh
# tether: Debian 12 has no virtqemud; libvirtd (its QEMU driver) stands in.
mkdir -p /var/run/libvirt
ln -sfn libvirt-sock /var/run/libvirt/virtqemud-sock
exec /usr/sbin/libvirtd "$@"
EOF
chmod 0755 "$L/usr/sbin/virtqemud"
users "$L" /home/qemu
# libvirtd daemonized (the node labeller's `virtqemud -d`) logs to
# /var/log/libvirt/libvirtd.log, whose directory strap emptied.
install -d "$L/var/log/libvirt"
pack "$L" virt-launcher /usr/bin/virt-launcher 107
log "  built the launcher image in $(( $(date +%s) - t0 ))s"

t0=$(date +%s)
log "  building the handler image root ..."
H=$work/handler
strap "$H" "${handler_pkgs[@]}"
install -m 0755 "$bin/virt-handler" "$bin/virt-chroot" "$H/usr/bin/"
users "$H" ""
pack "$H" virt-handler /usr/bin/virt-handler ""
log "  built the handler image in $(( $(date +%s) - t0 ))s"

t0=$(date +%s)
log "  building the guest's kernel-boot image ..."
G=$work/guest
"$root/hack/kubevirt-node/guest.sh" "$G"
pack "$G" guest-kernel /usr/bin/container-disk 107
log "  built the guest's kernel-boot image in $(( $(date +%s) - t0 ))s"
