#!/usr/bin/env bash
# Builds, vets and unit-tests both modules on every supported combination
# (the support table in hack/lib.sh), each module alone (GOWORK=off), in
# temporary copies: the working tree's go.mod files are never changed.
#
#   hack/compat-matrix.sh            every leg
#   hack/compat-matrix.sh root       the root module's legs only
#   hack/compat-matrix.sh freshctrl  freshctrl's legs only
#
# freshctrl is built against the root module served from a local file
# proxy at the version its go.mod requires, the way a user's go get gets it
# (not through go.work or a replace). Each leg pins the versions with go
# get, runs go mod tidy, then go build, go vet and go test -count=1 (add
# -race with MATRIX_TESTFLAGS=-race). Legs run MATRIX_JOBS at a time
# (default 2). Prints each leg's go test summary; exits non-zero if any leg
# fails. Logs stay in the printed directory when a leg fails.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

which=${1:-all}
case $which in all | root | freshctrl) ;; *) die "usage: $0 [all|root|freshctrl]" ;; esac
JOBS=${MATRIX_JOBS:-2}
TESTFLAGS=${MATRIX_TESTFLAGS:-}
TIMEOUT=${MATRIX_TEST_TIMEOUT:-15m}

work=$(mktemp -d "${TMPDIR:-/tmp}/freshinformer-matrix.XXXXXX")
keep=
cleanup() { [ -n "$keep" ] || rm -rf "$work"; }
trap cleanup EXIT
start=$SECONDS
check_workspace
setup_proxy "$work"

# leg NAME DIR CLIENT_GO [CONTROLLER_RUNTIME]: one combination in DIR.
leg() {
	local name=$1 dir=$2 cg=$3 cr=${4:-}
	local pins=("k8s.io/client-go@$cg" "k8s.io/api@$cg" "k8s.io/apimachinery@$cg")
	[ -z "$cr" ] || pins+=("sigs.k8s.io/controller-runtime@$cr")
	cd "$dir"
	drop_own_sums go.sum
	echo "== $name: go get ${pins[*]}"
	$GO get "${pins[@]}"
	$GO mod tidy
	# The pins must survive tidy: a combination MVS cannot keep is not one.
	local got want
	for want in "${pins[@]}"; do
		got=$($GO list -m -f '{{.Path}}@{{.Version}}' "${want%@*}")
		[ "$got" = "$want" ] || { echo "== $name: $want resolved to $got"; return 1; }
	done
	if [ -n "$cr" ]; then
		# freshctrl stands alone: none of its packages (tests included)
		# imports a package of the root module's internal/.
		local internal
		internal=$($GO list -f '{{range .Imports}}{{$.ImportPath}} {{.}}{{"\n"}}{{end}}{{range .TestImports}}{{$.ImportPath}} {{.}}{{"\n"}}{{end}}{{range .XTestImports}}{{$.ImportPath}} {{.}}{{"\n"}}{{end}}' ./... |
			grep " $ROOT_MODULE/internal/" || true)
		[ -z "$internal" ] || { echo "== $name: freshctrl imports the root module's internal packages:"; echo "$internal"; return 1; }
	fi
	echo "== $name: go build, go vet, go test"
	$GO build ./...
	$GO vet ./...
	# shellcheck disable=SC2086
	$GO test -count=1 -timeout "$TIMEOUT" $TESTFLAGS ./...
}

names=() dirs=() args=()
if [ "$which" != freshctrl ]; then
	for cg in "${CLIENT_GO_VERSIONS[@]}"; do
		names+=("root client-go $cg")
		dirs+=("$work/root-$cg")
		args+=("$cg")
	done
fi
if [ "$which" != root ]; then
	for combo in "${FRESHCTRL_COMBOS[@]}"; do
		read -r cg cr <<<"$combo"
		names+=("freshctrl client-go $cg controller-runtime $cr")
		dirs+=("$work/freshctrl-$cg-$cr")
		args+=("$cg $cr")
	done
fi

mkdir -p "$work/logs"
pids=()
for i in "${!names[@]}"; do
	if [[ ${dirs[$i]} == */root-* ]]; then
		cp -r "$work/src/root" "${dirs[$i]}"
	else
		cp -r "$work/src/freshctrl" "${dirs[$i]}"
	fi
	while [ "$(jobs -rp | wc -l)" -ge "$JOBS" ]; do sleep 1; done
	log "start: ${names[$i]}"
	# shellcheck disable=SC2086
	(
		s=$SECONDS
		set +e
		(set -e; leg "${names[$i]}" "${dirs[$i]}" ${args[$i]}) >"$work/logs/$i.log" 2>&1
		rc=$?
		if [ "$rc" = 0 ]; then
			echo "PASS $((SECONDS - s))s" >"$work/logs/$i.result"
		else
			echo "FAIL $((SECONDS - s))s" >"$work/logs/$i.result"
		fi
	) &
	pids+=($!)
done
wait "${pids[@]}" || true

failed=0
for i in "${!names[@]}"; do
	result=$(cat "$work/logs/$i.result" 2>/dev/null || echo "FAIL (no result)")
	echo
	echo "=== ${names[$i]}: $result"
	grep -E '^(ok|FAIL|---|panic:|\?|#)' "$work/logs/$i.log" || true
	if [[ $result != PASS* ]]; then
		failed=1
		echo "--- last lines of the log:"
		grep -vE '^go: (downloading|upgraded|added|downgraded|finding|found) ' "$work/logs/$i.log" | tail -n 40
	fi
done
echo
if [ "$failed" != 0 ]; then
	keep=1
	echo "compat-matrix: FAILED after $((SECONDS - start))s (logs in $work/logs)"
	exit 1
fi
echo "compat-matrix: every leg passed in $((SECONDS - start))s"
