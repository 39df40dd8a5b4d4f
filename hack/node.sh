#!/usr/bin/env bash
# Builds kubelet and kube-scheduler for the real node of the test world from
# the k8s.io/kubernetes module pinned in tools/node/go.mod (the same version
# as the control plane's, checked below), and caches them outside the
# checkout in an entry of their own, so the control plane's entry and key do
# not change. Prints the bin directory on stdout; progress goes to stderr.
#
#   hack/node.sh           build if needed, print the bin directory
#   hack/node.sh --verify  check the cached binaries, print the directory
#   hack/node.sh --host    install the node's parts from Debian when missing
#                          (containerd, runc, the CNI plugins, iptables; root)
set -euo pipefail

if [ "${1:-}" = "--host" ]; then
	pkgs=(containerd runc containernetworking-plugins iptables)
	missing=()
	for p in "${pkgs[@]}"; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
	done
	[ ${#missing[@]} -eq 0 ] && exit 0
	if [ "$(id -u)" != 0 ]; then
		printf 'node: the real node needs %s: run as root: apt-get update && apt-get install --no-install-recommends %s\n' "${missing[*]}" "${missing[*]}" >&2
		exit 0 # the suites that need the node skip, saying why
	fi
	printf 'node: installing %s from Debian\n' "${missing[*]}" >&2
	apt-get update >&2
	# No init system starts containerd: the test world runs its own.
	DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}" >&2
	exit 0
fi

root=$(cd "$(dirname "$0")/.." && pwd)
mod="$root/tools/node"
bins=(kubelet kube-scheduler)

log() { printf 'node: %s\n' "$*" >&2; }

k8s=$(awk '$1=="k8s.io/kubernetes"{print $2; exit}' "$mod/go.mod")
cp_k8s=$(awk '$1=="k8s.io/kubernetes"{print $2; exit}' "$root/tools/controlplane/go.mod")
if [ "$k8s" != "$cp_k8s" ]; then
	log "tools/node pins k8s.io/kubernetes $k8s but tools/controlplane pins $cp_k8s: pin the same version in both"
	exit 1
fi
key_input=$( { go env GOVERSION GOOS GOARCH; cat "$mod/go.mod" "$mod/go.sum"; cat "$mod"/cmd/*/main.go; } )
key=$(printf '%s' "$key_input" | sha256sum | cut -c1-16)
cache_root=${TETHER_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/tether}
dir="$cache_root/node/k8s-$k8s-$key"

verify() {
	[ -f "$dir/SHA256SUMS" ] || return 1
	(cd "$dir/bin" && sha256sum --quiet --check ../SHA256SUMS) >/dev/null 2>&1
}

if verify; then
	echo "$dir/bin"
	exit 0
fi
if [ "${1:-}" = "--verify" ]; then
	log "no valid cache at $dir (run hack/node.sh to build it)"
	exit 1
fi
if [ -d "$dir" ]; then
	log "cache entry $dir is incomplete or corrupt; rebuilding it"
	rm -rf "$dir"
fi

mkdir -p "$cache_root/node"
tmp=$(mktemp -d "$cache_root/node/.build-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/bin"

log "building kubelet and kube-scheduler of Kubernetes $k8s from Go modules"
start=$(date +%s)
cd "$mod"
go mod download
for b in "${bins[@]}"; do
	t0=$(date +%s)
	log "  building $b ..."
	CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o "$tmp/bin/$b" "./cmd/$b"
	log "  built $b in $(( $(date +%s) - t0 ))s"
done
(cd "$tmp/bin" && sha256sum "${bins[@]}" > ../SHA256SUMS)
printf 'kubernetes %s\nkey %s\nbuilt %s\n' "$k8s" "$key" "$(date -u +%FT%TZ)" > "$tmp/VERSION"
mv "$tmp" "$dir"
trap - EXIT
log "done in $(( $(date +%s) - start ))s: $dir/bin"
echo "$dir/bin"
