#!/usr/bin/env bash
# Binary size: builds the same small program (a pods and a configmaps
# informer with their listers, Start, WaitForCacheSync) twice, once on
# client-go's informer factory and once on freshinformer's
# (internal/factory/internal/binsize/testdata/{clientgo,fresh}), with go.mod's
# versions (GOWORK=off), and prints both sizes and their ratio, with the
# default flags and with -ldflags='-s -w'. Fails if the program on
# freshinformer's factory is more than BINSIZE_LIMIT (default 1.05) times
# the size of its client-go twin with the default flags.
#
#   hack/binsize.sh
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
LIMIT=${BINSIZE_LIMIT:-1.05}
src=./internal/factory/internal/binsize/testdata
out=$(mktemp -d "${TMPDIR:-/tmp}/freshinformer-binsize.XXXXXX")
trap 'rm -rf "$out"' EXIT

status=0
for ldflags in "" "-s -w"; do
	GOWORK=off $GO build -ldflags="$ldflags" -o "$out/clientgo" "$src/clientgo"
	GOWORK=off $GO build -ldflags="$ldflags" -o "$out/fresh" "$src/fresh"
	base=$(stat -c %s "$out/clientgo")
	ours=$(stat -c %s "$out/fresh")
	ratio=$(awk -v a="$ours" -v b="$base" 'BEGIN { printf "%.3f", a / b }')
	echo "binsize (ldflags '${ldflags}'): client-go's factory $base bytes, freshinformer's $ours bytes, ratio $ratio"
	if [ -z "$ldflags" ] && awk -v r="$ratio" -v l="$LIMIT" 'BEGIN { exit !(r > l) }'; then
		echo "binsize: the program on freshinformer's factory is more than $LIMIT times its client-go twin" >&2
		status=1
	fi
done
exit $status
