#!/usr/bin/env bash
# Builds KubeVirt's virt-api and virt-controller (and tether's manifest
# generator, which asks KubeVirt's install-strategy code for what
# virt-operator would install) from the kubevirt.io/kubevirt Go module pinned
# in a tools module, and kwok (tools/kwok), which plays the kubelets; caches
# them outside the checkout, keyed by the KubeVirt version and a checksum of
# everything that changes the binaries.
# Prints the cache directory (bin/ and manifests/ under it) on stdout;
# progress goes to stderr.
#
#   hack/kubevirt.sh [--verify] [MODULE]
#
# MODULE is the tools module of one KubeVirt line (default tools/kubevirt,
# KubeVirt v1.9). --verify only checks the cache.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
verify_only=
if [ "${1:-}" = "--verify" ]; then verify_only=1; shift; fi
mod="$root/${1:-tools/kubevirt}"
kwokmod="$root/tools/kwok"
bins=(virt-api virt-controller kubevirt-manifests)

log() { printf 'kubevirt: %s\n' "$*" >&2; }

[ -f "$mod/go.mod" ] || { log "no tools module at $mod (expected a go.mod there)"; exit 2; }

key_input=$( { go env GOVERSION GOOS GOARCH; cat "$mod/go.mod" "$mod/go.sum" "$kwokmod/go.mod" "$kwokmod/go.sum"; find "$mod" -name '*.go' -o -name go.mod | LC_ALL=C sort | xargs cat; } )
key=$(printf '%s' "$key_input" | sha256sum | cut -c1-16)
kv=$(awk '$1=="kubevirt.io/kubevirt"{print $2; exit} $1=="require" && $2=="kubevirt.io/kubevirt"{print $3; exit}' "$mod/go.mod")
cache_root=${TETHER_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/tether}
dir="$cache_root/kubevirt/$kv-$key"

verify() {
	[ -f "$dir/SHA256SUMS" ] || return 1
	(cd "$dir" && sha256sum --quiet --check SHA256SUMS) >/dev/null 2>&1
}

if verify; then
	echo "$dir"
	exit 0
fi
if [ -n "$verify_only" ]; then
	log "no valid cache at $dir (run hack/kubevirt.sh to build it)"
	exit 1
fi
if [ -d "$dir" ]; then
	log "cache entry $dir is incomplete or corrupt; rebuilding it"
	rm -rf "$dir"
fi

mkdir -p "$cache_root/kubevirt"
tmp=$(mktemp -d "$cache_root/kubevirt/.build-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/bin" "$tmp/manifests"

log "building KubeVirt $kv virt-api and virt-controller, and kwok, from Go modules (first time: about 15 minutes on 2 cores)"
start=$(date +%s)
cd "$mod"
go mod download
for b in "${bins[@]}"; do
	t0=$(date +%s)
	log "  building $b ..."
	CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o "$tmp/bin/$b" "./cmd/$b"
	log "  built $b in $(( $(date +%s) - t0 ))s"
done
t0=$(date +%s)
log "  building kwok ..."
(cd "$kwokmod" && go mod download && CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o "$tmp/bin/kwok" sigs.k8s.io/kwok/cmd/kwok)
log "  built kwok in $(( $(date +%s) - t0 ))s"
# What virt-operator would install into namespace kubevirt (its log lines
# about absent monitoring namespaces go to stderr and are dropped).
"$tmp/bin/kubevirt-manifests" --namespace kubevirt > "$tmp/manifests/kubevirt.yaml" 2>/dev/null
(cd "$tmp" && sha256sum bin/* manifests/* > SHA256SUMS)
printf 'kubevirt %s\nkey %s\nbuilt %s\n' "$kv" "$key" "$(date -u +%FT%TZ)" > "$tmp/VERSION"
mv "$tmp" "$dir"
trap - EXIT
log "done in $(( $(date +%s) - start ))s: $dir"
echo "$dir"
