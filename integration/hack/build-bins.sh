#!/usr/bin/env bash
# Builds kube-apiserver and etcd from Go modules and caches them outside the
# clone, so that fresh clones on the same machine reuse them:
# kube-apiserver from integration/tools/kube-<minor> (KUBE picks the minor),
# etcd (and, when asked, etcdutl) from integration/tools/etcd. The cache
# directory is keyed by both modules' go.sum, `go version` and the build
# flags.
#
#   build-bins.sh             build kube-apiserver and etcd if needed; print the directory last
#   build-bins.sh --etcdutl   the same, and etcdutl (the restore tests need it)
#   build-bins.sh --dir       only print the directory (no build)
#   build-bins.sh --versions  list the kube-apiserver versions there are modules for
#
# KUBE=1.37 (or v1.37.2, checked against the module) picks the version; the
# default is DEFAULT_KUBE below. Progress goes to stderr; stdout carries only
# the directory.
set -euo pipefail

# The kube-apiserver version `make integration`, `make demo` and CI use: the
# newest supported (make support-matrix runs the others).
DEFAULT_KUBE=1.37

GO=${GO:-go}
here=$(cd "$(dirname "$0")" && pwd)
tools_root=$(cd "$here/../tools" && pwd)
etcd_mod="$tools_root/etcd"

# kube_version GO.MOD: the k8s.io/kubernetes version that module requires.
kube_version() {
	awk '{ for (i = 1; i < NF; i++) if ($i == "k8s.io/kubernetes" && $(i + 1) ~ /^v1\./) { print $(i + 1); exit } }' "$1"
}

etcdutl=false dir_only=false
for arg in "$@"; do
	case $arg in
	--etcdutl) etcdutl=true ;;
	--dir) dir_only=true ;;
	--versions)
		for m in "$tools_root"/kube-*/go.mod; do
			kube_version "$m"
		done
		exit 0
		;;
	*) echo "build-bins.sh: unknown argument $arg (--etcdutl, --dir, --versions)" >&2; exit 2 ;;
	esac
done

# KUBE: "1.37", "v1.37" or "v1.37.2" (then the module must pin exactly that).
kube=${KUBE:-$DEFAULT_KUBE}
kube=${kube#v}
[[ $kube =~ ^1\.([0-9]+)(\.[0-9]+)?$ ]] || { echo "build-bins.sh: KUBE=$kube: want a version like 1.37 or v1.37.2" >&2; exit 2; }
kube_minor=${BASH_REMATCH[1]}
kube_mod="$tools_root/kube-1.$kube_minor"
if [ ! -f "$kube_mod/go.mod" ]; then
	echo "build-bins.sh: no module for kube-apiserver 1.$kube_minor (integration/tools/kube-1.$kube_minor); KUBE_VERSION=v1.$kube_minor.N integration/hack/gen-tools-gomod.sh makes one" >&2
	exit 2
fi
KUBE_VERSION=$(kube_version "$kube_mod/go.mod")
[ -n "$KUBE_VERSION" ] || { echo "build-bins.sh: $kube_mod/go.mod does not require k8s.io/kubernetes" >&2; exit 1; }
if [ -n "${BASH_REMATCH[2]}" ] && [ "v$kube" != "$KUBE_VERSION" ]; then
	echo "build-bins.sh: KUBE=v$kube, but integration/tools/kube-1.$kube_minor pins $KUBE_VERSION (KUBE_VERSION=v$kube integration/hack/gen-tools-gomod.sh moves it)" >&2
	exit 2
fi
ETCD_VERSION=$(awk '$1 == "go.etcd.io/etcd/server/v3" { print $2; exit }' "$etcd_mod/go.mod")

KUBE_LDFLAGS="-s -w -X k8s.io/component-base/version.gitVersion=$KUBE_VERSION -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$kube_minor -X k8s.io/component-base/version.gitTreeState=clean"
ETCD_LDFLAGS="-s -w"

# The recipe (flags) is part of the key so changing it rebuilds.
key=$({ cat "$kube_mod/go.sum" "$etcd_mod/go.sum"; $GO version; echo "$KUBE_LDFLAGS|$ETCD_LDFLAGS|cgo0"; } | sha256sum | cut -c1-16)
root="${XDG_CACHE_HOME:-$HOME/.cache}/freshinformer/bins"
dir="$root/$key"

if $dir_only; then
	echo "$dir"
	exit 0
fi

log() { printf '[bins %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

complete() { [ -x "$dir/kube-apiserver" ] && [ -x "$dir/etcd" ] && [ -f "$dir/.complete" ]; }
# etcdutl comes from the etcd module, which is part of the key: a directory
# whose etcdutl exists has the right one. It is built on its own, only for
# the callers that restore etcd (make integration, make support-matrix).
etcdutl_ok() { ! $etcdutl || [ -x "$dir/etcdutl" ]; }

# Static, reproducible binaries; -mod=readonly so a stale go.mod fails
# loudly instead of being rewritten. GOWORK=off: the tools modules are not in
# the repository's go.work.
export GOWORK=off CGO_ENABLED=0 GOFLAGS="-mod=readonly -buildvcs=false"

build_etcdutl() {
	log "building etcdutl $ETCD_VERSION (integration/tools/etcd) into $dir"
	local s=$SECONDS t
	t=$(mktemp "$dir/.etcdutl.XXXXXX")
	(cd "$etcd_mod" && $GO build -trimpath -ldflags "$ETCD_LDFLAGS" -o "$t" go.etcd.io/etcd/etcdutl/v3) || { rm -f "$t"; return 1; }
	"$t" version >/dev/null
	mv -f "$t" "$dir/etcdutl"
	log "etcdutl built in $((SECONDS - s))s"
}

# used marks the directory as the one last built or reused, which is the one
# controlplane.FindBinaries falls back on when nothing names a directory.
used() {
	touch "$dir/.complete"
	echo "$dir"
}

if complete && etcdutl_ok; then
	log "cached: kube-apiserver $KUBE_VERSION, etcd $ETCD_VERSION in $dir"
	used
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
	log "cached: kube-apiserver $KUBE_VERSION, etcd $ETCD_VERSION in $dir"
	used
	exit 0
fi

log "building kube-apiserver $KUBE_VERSION (integration/tools/kube-1.$kube_minor) and etcd $ETCD_VERSION (integration/tools/etcd) into $dir"
log "first build: downloads ~570 MB of modules, then compiles: 10-15 min measured on busy 2-core machines, less when idle (adds ~2 GB to the Go build cache); later runs reuse $root"
tmp=$(mktemp -d "$root/.build.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

start=$SECONDS
log "downloading modules"
(cd "$etcd_mod" && $GO mod download)
(cd "$kube_mod" && $GO mod download)
log "modules ready after $((SECONDS - start))s; compiling etcd"
(cd "$etcd_mod" && $GO build -trimpath -ldflags "$ETCD_LDFLAGS" -o "$tmp/etcd" go.etcd.io/etcd/server/v3)
log "etcd built after $((SECONDS - start))s; compiling kube-apiserver (the long part)"
(cd "$kube_mod" && $GO build -trimpath -ldflags "$KUBE_LDFLAGS" -o "$tmp/kube-apiserver" k8s.io/kubernetes/cmd/kube-apiserver)
log "kube-apiserver built after $((SECONDS - start))s"

"$tmp/etcd" --version >/dev/null
"$tmp/kube-apiserver" --version >&2
{ echo "kube=$KUBE_VERSION"; echo "etcd=$ETCD_VERSION"; $GO version; date -u +%FT%TZ; } >"$tmp/.complete"

rm -rf "$dir"
mv "$tmp" "$dir"
trap - EXIT
$etcdutl && build_etcdutl
log "done in $((SECONDS - start))s: $dir"
ls -l "$dir" >&2
used
