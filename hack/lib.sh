# Shared by the hack/ scripts (source it; not run on its own).
#
# The support table lives here, once: every script builds and tests what it
# lists. docs/releasing.md and the README show the same table.

# client-go (with k8s.io/api and k8s.io/apimachinery at the same version):
# go.mod requires the first, the lowest supported.
CLIENT_GO_VERSIONS=(v0.36.6 v0.37.2)

# freshctrl's combinations, "client-go controller-runtime". controller-runtime
# v0.25 requires client-go 0.37, so (0.36, v0.25) cannot be built: go get
# refuses it. freshctrl's go.mod requires the first.
FRESHCTRL_COMBOS=("v0.36.6 v0.24.1" "v0.37.2 v0.24.1" "v0.37.2 v0.25.2")

ROOT_MODULE=github.com/freshinformer/freshinformer
FRESHCTRL_MODULE=$ROOT_MODULE/freshctrl

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
GO=${GO:-go}

log() { printf '[%s %s] %s\n' "$(basename "$0" .sh)" "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "$*"; exit 1; }

# The scripts build each module alone, as a user gets it: never through the
# repository's go.work.
export GOWORK=off

# required_root_version [GO_MOD] prints the version of the root module
# freshctrl's go.mod (or GO_MOD) requires.
required_root_version() {
	$GO mod edit -print "${1:-$REPO/freshctrl/go.mod}" | awk -v m="$ROOT_MODULE" '
		$1 == m && $2 ~ /^v/ { print $2; exit }
		$1 == "require" && $2 == m { print $3; exit }'
}

# check_workspace fails unless go.work's replace of the root module names
# the version freshctrl requires (a workspace reads that version's go.mod,
# which is not published before the release).
check_workspace() {
	[ -f "$REPO/go.work" ] || return 0
	local want got
	want=$(required_root_version)
	got=$($GO work edit -print "$REPO/go.work" | awk -v m="$ROOT_MODULE" '$1 == "replace" && $2 == m && $3 ~ /^v/ { print $3; exit }')
	[ "$got" = "$want" ] || die "go.work replaces $ROOT_MODULE ${got:-at no version}, freshctrl/go.mod requires $want: make them the same"
}

# copy_tree SRC DEST copies the files of SRC that git tracks or would track
# (not ignored), or every file when SRC is not in a git work tree.
copy_tree() {
	local src=$1 dest=$2
	mkdir -p "$dest"
	if git -C "$src" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
		(cd "$src" && git ls-files -z --cached --others --exclude-standard . |
			xargs -0 -r sh -c 'for f; do [ -e "$f" ] && printf "%s\0" "$f"; done' sh |
			tar --null -T - -cf -) | tar -xf - -C "$dest"
	else
		(cd "$src" && tar --exclude=.git -cf - .) | tar -xf - -C "$dest"
	fi
}

# setup_proxy WORK serves the working tree's root module at ROOT_VERSION and
# freshctrl at FRESHCTRL_VERSION from a file proxy under WORK, in front of
# the local module cache and the usual proxy, and points the go command at
# it with a module cache of its own (so a version served earlier from other
# sources is never reused). Exports GOPROXY, GOMODCACHE, GONOSUMDB, GOFLAGS,
# GODEBUG.
setup_proxy() {
	local work=$1
	ROOT_VERSION=${ROOT_VERSION:-$(required_root_version)}
	FRESHCTRL_VERSION=${FRESHCTRL_VERSION:-$ROOT_VERSION}
	[ -n "$ROOT_VERSION" ] || die "freshctrl/go.mod does not require $ROOT_MODULE"

	local main_cache upstream
	main_cache=$($GO env GOMODCACHE)
	upstream=$($GO env GOPROXY)
	mkdir -p "$work/bin" "$work/proxy"
	(cd "$REPO/hack" && $GO build -o "$work/bin/modzip" ./modzip)

	copy_tree "$REPO" "$work/src/root"
	copy_tree "$REPO/freshctrl" "$work/src/freshctrl"
	"$work/bin/modzip" -dir "$work/src/root" -version "$ROOT_VERSION" -proxy "$work/proxy"
	"$work/bin/modzip" -dir "$work/src/freshctrl" -version "$FRESHCTRL_VERSION" -proxy "$work/proxy"
	log "serving $ROOT_MODULE@$ROOT_VERSION and $FRESHCTRL_MODULE@$FRESHCTRL_VERSION from the working tree"

	# A module cache of our own, kept between runs (the build cache keys on
	# its paths) but emptied of our modules, which change under one version.
	export GOMODCACHE=${FRESHINFORMER_MODCACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/freshinformer/modcache}
	mkdir -p "$GOMODCACHE"
	exec 8>"$GOMODCACHE.lock"
	if ! flock -n 8; then
		log "another hack script uses $GOMODCACHE; waiting"
		flock 8
	fi
	local d
	for d in "$GOMODCACHE/github.com/freshinformer" "$GOMODCACHE/cache/download/github.com/freshinformer"; do
		if [ -e "$d" ]; then
			chmod -R u+w "$d" && rm -rf "$d"
		fi
	done
	# The go command's module index takes a module cache directory as
	# immutable; ours is not (the same version is served with new content).
	export GODEBUG="${GODEBUG:+$GODEBUG,}goindex=0"
	export GOPROXY="file://$work/proxy,file://$main_cache/cache/download,$upstream"
	export GONOSUMDB=github.com/freshinformer GOPRIVATE= GONOPROXY=
	local flags
	flags=$($GO env GOFLAGS)
	export GOFLAGS="${flags:+$flags }-modcacherw"
}

# drop_own_sums FILE removes the lines of our modules from a go.sum: their
# hashes are those of the tree being tested, not of a published release.
drop_own_sums() {
	[ -f "$1" ] || return 0
	sed -i "\#^github.com/freshinformer/#d" "$1"
}
