#!/usr/bin/env bash
# Builds krew's own tools (krew and validate-krew-manifest) for the krew
# manifest test, in their own module graph (krew's is far older than
# tether's), and caches them outside the checkout, keyed by the krew and Go
# versions. Prints the bin directory on stdout; progress goes to stderr.
set -euo pipefail

krew=v0.4.3
cache_root=${TETHER_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/tether}
dir="$cache_root/krew/$krew-$(go env GOVERSION GOOS GOARCH | tr '\n' '-' | sed 's/-$//')"

if [ -x "$dir/bin/krew" ] && [ -x "$dir/bin/validate-krew-manifest" ]; then
	echo "$dir/bin"
	exit 0
fi
printf 'krew: building krew %s and validate-krew-manifest from Go modules\n' "$krew" >&2
mkdir -p "$cache_root/krew"
tmp=$(mktemp -d "$cache_root/krew/.build-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
# Outside any module, so that tether's go.mod and GOFLAGS play no part.
(cd "$tmp" && GOFLAGS=-mod=mod GOBIN="$tmp/bin" CGO_ENABLED=0 \
	go install "sigs.k8s.io/krew/cmd/krew@$krew" "sigs.k8s.io/krew/cmd/validate-krew-manifest@$krew")
rm -rf "$dir"
mv "$tmp" "$dir"
trap - EXIT
echo "$dir/bin"
