#!/usr/bin/env bash
# Builds KubeVirt's node side from the kubevirt.io/kubevirt Go module pinned
# in tools/kubevirt-node (the same version and pins as tools/kubevirt, so the
# Go build cache of `make kubevirt` is reused): virt-handler, virt-launcher,
# virt-launcher-monitor, libvirt-hook-client, virt-chroot, virt-probe,
# virt-tail, virt-freezer, and container-disk (C, compiled static from the
# module's cmd/container-disk-v2alpha/main.c). As root, it then builds the
# launcher and handler images from Debian 12's packages
# (hack/kubevirt-node/images.sh), as tarballs that `ctr -n k8s.io images
# import` reads. Caches everything outside the checkout, keyed by the
# KubeVirt version and a checksum of everything that changes the outputs.
# It also renders virt-handler's DaemonSet with KubeVirt's install-strategy
# code (tools/kubevirt-node/cmd/kubevirt-handler-manifest) into
# manifests/virt-handler.yaml.
# Prints the cache directory (bin/, images/, manifests/, SHA256SUMS, VERSION) on stdout;
# progress goes to stderr.
#
#   hack/kubevirt-node.sh           build if needed, print the cache directory
#   hack/kubevirt-node.sh --verify  only check the cache
#
# The host needs gcc, libc6-dev (a static libc for container-disk) and
# linux-libc-dev (<linux/kvm.h> for virt-handler), and for the images
# debootstrap, setcap (libcap2-bin) and the Debian mirror; as root the script
# installs the missing packages, otherwise it names them and stops. A host
# that is not root gets the binaries only, and is told so.
# virt-launcher is built with -tags libvirt_dlopen: it loads libvirt at run
# time, so the build needs no libvirt headers.
#
# Cold build on 2 shared cores, with an empty Go build cache too: 422 s in
# all; the binaries 315 s (virt-handler 177 s, virt-freezer 87 s,
# virt-launcher 19 s, the others a few seconds each), the two images 107 s
# (debootstrap and apt from the mirror, about 1 minute each). With the Go
# build cache warm from `make kubevirt` the binaries took 250 s on a busier
# machine: cgo changes the build of every package under virt-handler and
# virt-launcher, so little of that cache applies to them.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
verify_only=
if [ "${1:-}" = "--verify" ]; then verify_only=1; shift; fi
mod="$root/tools/kubevirt-node"

log() { printf 'kubevirt-node: %s\n' "$*" >&2; }

[ -f "$mod/go.mod" ] || { log "no tools module at $mod (expected a go.mod there)"; exit 2; }

# name:cgo[:tags]. virt-handler needs cgo for <linux/kvm.h> (its node
# labeller); virt-launcher for libvirt, loaded with dlopen.
bins=(
	virt-handler:1
	virt-launcher:1:libvirt_dlopen
	virt-launcher-monitor:0
	virt-launcher/libvirt-hook-client:0
	virt-chroot:0
	virt-probe:0
	virt-tail:0
	virt-freezer:0
)

# The cache key covers the Go toolchain, the module graph, the module's own
# sources (the libnbd replacement), the replacement modules it shares with
# tools/kubevirt, and this script (the build flags).
key_input=$( {
	go env GOVERSION GOOS GOARCH
	gcc -dumpfullversion 2>/dev/null || true
	cat "$mod/go.mod" "$mod/go.sum" "$0" "$root/hack/kubevirt-node/images.sh" "$root/hack/kubevirt-node/guest.sh"
	find "$mod" "$root/tools/kubevirt/virttemplate" "$root/hack/rootfs-image" -name '*.go' -o -name go.mod | LC_ALL=C sort | xargs cat
} )
key=$(printf '%s' "$key_input" | sha256sum | cut -c1-16)
kv=$(awk '$1=="kubevirt.io/kubevirt"{print $2; exit} $1=="require" && $2=="kubevirt.io/kubevirt"{print $3; exit}' "$mod/go.mod")
cache_root=${TETHER_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/tether}
dir="$cache_root/kubevirt-node/$kv-$key"

# The images need root (debootstrap, chroot, setcap): a host that is not
# root gets the binaries only, and an entry without images is rebuilt when
# root asks for it.
images=
[ "$(id -u)" = 0 ] && images=1

verify() {
	[ -f "$dir/SHA256SUMS" ] || return 1
	grep -q ' manifests/virt-handler.yaml$' "$dir/SHA256SUMS" || return 1
	[ -z "$images" ] || grep -q ' images/' "$dir/SHA256SUMS" || return 1
	(cd "$dir" && sha256sum --quiet --check SHA256SUMS) >/dev/null 2>&1
}

if verify; then
	echo "$dir"
	exit 0
fi
if [ -n "$verify_only" ]; then
	log "no valid cache at $dir (run hack/kubevirt-node.sh to build it)"
	exit 1
fi

# What the host needs to compile: gcc, a static libc, the kernel headers.
pkgs=(gcc libc6-dev linux-libc-dev)
missing=()
for p in "${pkgs[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
	if [ "$(id -u)" != 0 ]; then
		log "this host cannot build KubeVirt's node side: it needs ${missing[*]}; run as root: apt-get update && apt-get install --no-install-recommends ${missing[*]}"
		exit 1
	fi
	log "installing ${missing[*]} from Debian"
	apt-get update >&2
	DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}" >&2
fi

if [ -d "$dir" ]; then
	log "cache entry $dir is incomplete or corrupt; rebuilding it"
	rm -rf "$dir"
fi
mkdir -p "$cache_root/kubevirt-node"
tmp=$(mktemp -d "$cache_root/kubevirt-node/.build-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/bin"

log "building KubeVirt $kv's virt-handler, virt-launcher and their helpers from Go modules"
start=$(date +%s)
cd "$mod"
go mod download
for spec in "${bins[@]}"; do
	IFS=: read -r pkg cgo tags <<<"$spec"
	b=${pkg##*/}
	t0=$(date +%s)
	log "  building $b ..."
	CGO_ENABLED=$cgo go build -trimpath -tags "$tags" -ldflags='-s -w' -o "$tmp/bin/$b" "kubevirt.io/kubevirt/cmd/$pkg"
	log "  built $b in $(( $(date +%s) - t0 ))s"
done
# container-disk is C; its source is read from the module cache, never kept
# in the checkout. It is the container-disk containers' command and the
# hot-plug attachment pod's.
kvdir=$(go list -m -f '{{.Dir}}' kubevirt.io/kubevirt)
log "  building container-disk ..."
gcc -static -O2 -o "$tmp/bin/container-disk" "$kvdir/cmd/container-disk-v2alpha/main.c"
strip "$tmp/bin/container-disk"
# virt-handler's DaemonSet as virt-operator renders it (install-strategy
# code of the same module); the test world adapts it to its real node.
mkdir -p "$tmp/manifests"
log "  rendering virt-handler's DaemonSet ..."
CGO_ENABLED=0 go build -trimpath -o "$tmp/kubevirt-handler-manifest" ./cmd/kubevirt-handler-manifest
"$tmp/kubevirt-handler-manifest" --namespace kubevirt >"$tmp/manifests/virt-handler.yaml" 2>"$tmp/manifest.log" ||
	{ cat "$tmp/manifest.log" >&2; log "rendering virt-handler's DaemonSet failed (above)"; exit 1; }
rm -f "$tmp/kubevirt-handler-manifest" "$tmp/manifest.log"

if [ -n "$images" ]; then
	pkgs=(debootstrap libcap2-bin tar)
	missing=()
	for p in "${pkgs[@]}"; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
	done
	if [ ${#missing[@]} -gt 0 ]; then
		log "installing ${missing[*]} from Debian"
		apt-get update >&2
		DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}" >&2
	fi
	mkdir -p "$tmp/images"
	"$root/hack/kubevirt-node/images.sh" "$tmp/bin" "$kvdir" "$tmp/images" "$kv"
else
	log "not root: building no launcher and handler images (they need debootstrap, chroot and setcap as root); the binaries are in $dir/bin"
fi

(cd "$tmp" && sha256sum bin/* manifests/* $( [ -z "$images" ] || echo images/*.tar ) > SHA256SUMS)
printf 'kubevirt %s\nkey %s\nbuilt %s\n' "$kv" "$key" "$(date -u +%FT%TZ)" > "$tmp/VERSION"
mv "$tmp" "$dir"
trap - EXIT
log "done in $(( $(date +%s) - start ))s: $dir"
echo "$dir"
