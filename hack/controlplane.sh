#!/usr/bin/env bash
# Builds etcd, kube-apiserver and kube-controller-manager from the upstream Go
# modules pinned in tools/controlplane/go.mod, and caches the binaries outside
# the checkout, keyed by the pinned versions. Prints the cache directory on
# stdout; progress goes to stderr.
#
#   hack/controlplane.sh          build if needed, print the bin directory
#   hack/controlplane.sh --verify check the cached binaries, print the directory
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
mod="$root/tools/controlplane"
bins=(etcd kube-apiserver kube-controller-manager)

log() { printf 'controlplane: %s\n' "$*" >&2; }

# The cache key covers everything that changes the binaries: the Go toolchain
# and the exact module graph (go.mod + go.sum) and the mains.
key_input=$( { go env GOVERSION GOOS GOARCH; cat "$mod/go.mod" "$mod/go.sum"; cat "$mod"/cmd/*/main.go; } )
key=$(printf '%s' "$key_input" | sha256sum | cut -c1-16)
k8s=$(awk '$1=="k8s.io/kubernetes"{print $2; exit}' "$mod/go.mod")
etcd=$(awk '$1=="go.etcd.io/etcd/server/v3"{print $2; exit}' "$mod/go.mod")
cache_root=${TETHER_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/tether}
dir="$cache_root/controlplane/k8s-$k8s-etcd-$etcd-$key"

verify() {
	[ -f "$dir/SHA256SUMS" ] || return 1
	(cd "$dir/bin" && sha256sum --quiet --check ../SHA256SUMS) >/dev/null 2>&1
}

if verify; then
	echo "$dir/bin"
	exit 0
fi
if [ "${1:-}" = "--verify" ]; then
	log "no valid cache at $dir (run hack/controlplane.sh to build it)"
	exit 1
fi
if [ -d "$dir" ]; then
	log "cache entry $dir is incomplete or corrupt; rebuilding it"
	rm -rf "$dir"
fi

mkdir -p "$cache_root/controlplane"
tmp=$(mktemp -d "$cache_root/controlplane/.build-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/bin"

log "building Kubernetes $k8s and etcd $etcd from Go modules (first time: about 10-15 minutes on 2 cores)"
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
printf 'kubernetes %s\netcd %s\nkey %s\nbuilt %s\n' "$k8s" "$etcd" "$key" "$(date -u +%FT%TZ)" > "$tmp/VERSION"
mv "$tmp" "$dir"
trap - EXIT
log "done in $(( $(date +%s) - start ))s: $dir/bin"
echo "$dir/bin"
