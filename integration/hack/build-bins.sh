#!/usr/bin/env bash
# Builds kube-apiserver and etcd from the Go modules pinned in
# integration/tools and caches them outside the clone, keyed by the tools
# module's go.sum and `go version`, so fresh clones on the same machine reuse
# them.
#
#   build-bins.sh          build if needed; print the binaries' directory last
#   build-bins.sh --dir    only print the directory (no build)
#
# Progress goes to stderr; stdout carries only the directory.
set -euo pipefail

GO=${GO:-go}
here=$(cd "$(dirname "$0")" && pwd)
tools=$(cd "$here/../tools" && pwd)

# Keep in sync with integration/tools/go.mod (KUBE_VERSION there).
KUBE_VERSION=v1.36.3
kube_minor=${KUBE_VERSION#v1.}
kube_minor=${kube_minor%%.*}
KUBE_LDFLAGS="-s -w -X k8s.io/component-base/version.gitVersion=$KUBE_VERSION -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$kube_minor -X k8s.io/component-base/version.gitTreeState=clean"
ETCD_LDFLAGS="-s -w"

# The recipe (flags) is part of the key so changing it rebuilds.
key=$({ cat "$tools/go.sum"; $GO version; echo "$KUBE_LDFLAGS|$ETCD_LDFLAGS|cgo0"; } | sha256sum | cut -c1-16)
root="${XDG_CACHE_HOME:-$HOME/.cache}/freshinformer/bins"
dir="$root/$key"

if [ "${1:-}" = "--dir" ]; then
	echo "$dir"
	exit 0
fi

log() { printf '[bins %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

complete() { [ -x "$dir/kube-apiserver" ] && [ -x "$dir/etcd" ] && [ -f "$dir/.complete" ]; }

# etcdutl (offline snapshot restore) comes from its own module,
# integration/tools/etcdutl, and is keyed by that module's go.sum through a
# stamp file next to it: adding or bumping it never invalidates the
# kube-apiserver/etcd build above. It is built into the same directory, so
# KUBEBUILDER_ASSETS finds all three.
etcdutl_mod="$tools/etcdutl"
etcdutl_stamp=".etcdutl-$({ cat "$etcdutl_mod/go.sum"; $GO version; echo "$ETCD_LDFLAGS|cgo0"; } | sha256sum | cut -c1-16)"
etcdutl_ok() { [ -x "$dir/etcdutl" ] && [ -f "$dir/$etcdutl_stamp" ]; }

build_etcdutl() {
	log "building etcdutl from Go modules (integration/tools/etcdutl) into $dir"
	local s=$SECONDS t
	t=$(mktemp "$dir/.etcdutl.XXXXXX")
	(cd "$etcdutl_mod" && GOWORK=off CGO_ENABLED=0 GOFLAGS="-mod=readonly -buildvcs=false" \
		$GO build -trimpath -ldflags "$ETCD_LDFLAGS" -o "$t" go.etcd.io/etcd/etcdutl/v3) || { rm -f "$t"; return 1; }
	"$t" version >/dev/null
	rm -f "$dir"/.etcdutl-*
	mv -f "$t" "$dir/etcdutl"
	date -u +%FT%TZ >"$dir/$etcdutl_stamp"
	log "etcdutl built in $((SECONDS - s))s"
}

if complete && etcdutl_ok; then
	log "cached: $dir"
	echo "$dir"
	exit 0
fi

mkdir -p "$root"
# One build at a time per machine; a second caller waits and then reuses.
exec 9>"$root/.lock"
if ! flock -n 9; then
	log "another build holds $root/.lock; waiting"
	flock 9
fi
if complete; then
	etcdutl_ok || build_etcdutl
	log "cached (built by another process): $dir"
	echo "$dir"
	exit 0
fi

log "building kube-apiserver $KUBE_VERSION and etcd from Go modules into $dir"
log "first build: downloads ~570 MB of modules (~40 s), then compiles for 6-10 min on 2 cores (adds ~2 GB to the Go build cache); later runs reuse $root"
tmp=$(mktemp -d "$root/.build.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

start=$SECONDS
cd "$tools"
# Static, reproducible binaries; -mod=readonly so a stale go.mod fails loudly
# instead of being rewritten.
# GOWORK=off: the tools modules are not in the repository's go.work.
export GOWORK=off CGO_ENABLED=0 GOFLAGS="-mod=readonly -buildvcs=false"

log "downloading modules"
$GO mod download
log "modules ready after $((SECONDS - start))s; compiling etcd"
$GO build -trimpath -ldflags "$ETCD_LDFLAGS" -o "$tmp/etcd" go.etcd.io/etcd/server/v3
log "etcd built after $((SECONDS - start))s; compiling kube-apiserver (the long part)"
$GO build -trimpath -ldflags "$KUBE_LDFLAGS" -o "$tmp/kube-apiserver" k8s.io/kubernetes/cmd/kube-apiserver
log "kube-apiserver built after $((SECONDS - start))s"

"$tmp/etcd" --version >/dev/null
"$tmp/kube-apiserver" --version >&2
{ echo "kube=$KUBE_VERSION"; $GO version; date -u +%FT%TZ; } >"$tmp/.complete"

rm -rf "$dir"
mv "$tmp" "$dir"
trap - EXIT
build_etcdutl
log "done in $((SECONDS - start))s: $dir"
ls -l "$dir" >&2
echo "$dir"
