#!/usr/bin/env bash
# The API-compatibility check (docs/releasing.md): compares the exported API
# of each module in the working tree with a previous release, using
# golang.org/x/exp/cmd/apidiff.
#
#   hack/apidiff.sh          against each module's latest release tag
#                            (root vX.Y.Z, freshctrl freshctrl/vX.Y.Z);
#                            a module with no tag yet is skipped, said so
#   hack/apidiff.sh REF      against git REF (a tag, branch or commit) for both
#
# Prints every change; exits 1 if a module has an incompatible one, unless
# APIDIFF_ALLOW_INCOMPATIBLE=1 (a release that removes deprecated API, as
# docs/releasing.md allows, sets it and says so in the CHANGELOG).
set -euo pipefail
source "$(dirname "$0")/lib.sh"

APIDIFF_VERSION=v0.0.0-20261113113407-e3970619a1a4 # golang.org/x/exp
ref=${1:-}

git -C "$REPO" rev-parse --is-inside-work-tree >/dev/null 2>&1 || die "needs a git work tree"
work=$(mktemp -d "${TMPDIR:-/tmp}/freshinformer-apidiff.XXXXXX")
trap 'rm -rf "$work"' EXIT
GOBIN="$work/bin" $GO install "golang.org/x/exp/cmd/apidiff@$APIDIFF_VERSION"
apidiff=$work/bin/apidiff

# latest_tag PREFIX prints the highest PREFIXvX.Y.Z tag, or nothing.
latest_tag() {
	git -C "$REPO" tag --list "${1}v*" --sort=-v:refname |
		grep -E "^${1}v[0-9]+\.[0-9]+\.[0-9]+$" | head -n 1 || true
}

# Both sides are loaded with the same, newest supported dependencies (a
# module that only requires them joins the workspace): the API of a module
# mentions client-go's and controller-runtime's types, which differ between
# their versions, and go.mod requires the lowest.
read -r pin_cg pin_cr <<<"${FRESHCTRL_COMBOS[-1]}"
mkdir -p "$work/pin"
printf 'module example.com/apidiffpin\n\ngo 1.26.0\n\nrequire (\n\tk8s.io/api %s\n\tk8s.io/apimachinery %s\n\tk8s.io/client-go %s\n\tsigs.k8s.io/controller-runtime %s\n)\n' \
	"$pin_cg" "$pin_cg" "$pin_cg" "$pin_cr" >"$work/pin/go.mod"

# api TREE MODULE SUBDIR OUT writes the API of MODULE, whose directory is
# TREE/SUBDIR, to OUT. The module is loaded in a workspace with the root
# module of the same tree (and the pin); the root module without freshctrl,
# whose packages its pattern would also match.
api() {
	local tree=$1 module=$2 sub=$3 out=$4
	local uses="\t$tree\n\t$work/pin\n" replace=
	if [ "$sub" != . ]; then
		uses+="\t$tree/$sub\n"
		# A workspace still reads the go.mod of the root version freshctrl
		# requires, which may not be published.
		replace="replace $ROOT_MODULE $(required_root_version "$tree/$sub/go.mod") => $tree"
	fi
	printf "go 1.26.0\n\nuse (\n$uses)\n\n%s\n" "$replace" >"$out.work"
	(cd "$tree/$sub" && GOWORK="$out.work" "$apidiff" -m -w "$out" "$module")
}

failed=0
check() {
	local module=$1 sub=$2 prefix=$3 base=$ref
	[ -n "$base" ] || base=$(latest_tag "$prefix")
	if [ -z "$base" ]; then
		echo "apidiff: $module: no release tag ${prefix}vX.Y.Z yet: nothing to compare with (skipped)"
		return
	fi
	local old="$work/old-${sub//\//_}"
	mkdir -p "$old"
	git -C "$REPO" archive "$base" | tar -x -C "$old"
	if [ ! -f "$old/$sub/go.mod" ]; then
		echo "apidiff: $module: not a module at $base (skipped)"
		return
	fi
	local name=${sub//\//_}
	api "$old" "$module" "$sub" "$work/$name.old"
	api "$REPO" "$module" "$sub" "$work/$name.new"
	echo "== apidiff $module: $base -> working tree"
	"$apidiff" -m "$work/$name.old" "$work/$name.new" | tee "$work/$name.report"
	local incompatible
	incompatible=$("$apidiff" -m -incompatible "$work/$name.old" "$work/$name.new")
	if [ -n "$incompatible" ]; then
		if [ "${APIDIFF_ALLOW_INCOMPATIBLE:-}" = 1 ]; then
			echo "apidiff: $module: incompatible changes allowed by APIDIFF_ALLOW_INCOMPATIBLE=1"
		else
			echo "apidiff: $module: INCOMPATIBLE changes since $base (docs/releasing.md)"
			failed=1
		fi
	else
		echo "apidiff: $module: compatible with $base"
	fi
}

check "$ROOT_MODULE" . ""
check "$FRESHCTRL_MODULE" freshctrl freshctrl/
exit "$failed"
