#!/usr/bin/env bash
# support-matrix.sh [VERSION...]: the integration smoke against each
# kube-apiserver version (default: every integration/tools/kube-<minor>
# module, `build-bins.sh --versions`). Per version: build (or reuse) its
# binaries, run the demo with -check on a throwaway control plane, then the
# smoke tests below (-race) on that version. Prints a Markdown report; with
# SUPPORT_MATRIX_DOC=file, also rewrites the report between the
# support-matrix markers in that file (docs/support-matrix.md). Every version
# is run even when one fails; the exit status is non-zero if anything failed.
#
# SUPPORT_TESTS (a go test -run pattern) replaces the smoke tests; "." runs
# the whole e2e package. DEMO_DURATION (default 20s) is the demo's run.
set -uo pipefail

GO=${GO:-go}
here=$(cd "$(dirname "$0")" && pwd)
integration=$(cd "$here/.." && pwd)
repo=$(cd "$integration/.." && pwd)

# The smoke: the server behaviour the library relies on (smoke_test.go), the
# basic wait guarantee, the quiet-resource waits (guarantee 5) and the etcd
# restore tests (guarantee 3).
SMOKE_TESTS=(
	TestWatchSeesConfigMapChanges TestQuietWatchGetsBookmark TestCompactionExpiresOldResourceVersions TestAPIServerRestart
	TestWaitForFreshnessAfterWrites TestBookmarkAdvancesQuietResource
	TestQuietWaitIsBounded TestSyncBusyAndQuiet TestProbesNeverReturnEarly TestQuietWaitWithoutWatchCache TestIdleWaitersCPU
	TestEtcdRestore TestEtcdRestoreWhileInformerBehind TestRestoreWindowOutrunByWrites TestRestoreWindowBehindProxy
)
default_run="^($(IFS='|'; echo "${SMOKE_TESTS[*]}"))\$"
run_pattern=${SUPPORT_TESTS:-$default_run}
demo_duration=${DEMO_DURATION:-20s}

if [ $# -gt 0 ]; then
	versions=("$@")
else
	mapfile -t versions < <(GO=$GO "$here/build-bins.sh" --versions)
fi

log() { printf '[support-matrix %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
secs() { awk -v s="$1" 'BEGIN { if (s >= 60) printf "%dm%02ds", s / 60, s % 60; else printf "%ds", s }'; }

work=$(mktemp -d "${TMPDIR:-/tmp}/support-matrix.XXXXXX")
trap 'rm -rf "$work"' EXIT

log "building the demo, withcluster and the e2e test binary"
(cd "$repo" && $GO build -o "$work/demo" ./examples/demo) || exit 1
(cd "$integration" && $GO build -o "$work/withcluster" ./cmd/withcluster) || exit 1
(cd "$integration" && $GO test -race -c -o "$work/e2e.test" ./e2e) || exit 1

failed=0
summary=() details=()
declare -A cell # cell[test|version] = "PASS 12s"
declare -a seen_tests

for v in "${versions[@]}"; do
	log "== kube-apiserver $v"
	s=$SECONDS
	if ! dir=$(KUBE=$v GO=$GO "$here/build-bins.sh" --etcdutl); then
		summary+=("| $v | | FAIL (see the log) | not run | not run |")
		failed=1
		continue
	fi
	build=$((SECONDS - s))
	kube=$(sed -n 's/^kube=//p' "$dir/.complete")
	etcd=$(sed -n 's/^etcd=//p' "$dir/.complete")
	[ -n "$etcd" ] || etcd=$("$dir/etcd" --version | sed -n 's/^etcd Version: /v/p')
	build_note="$(secs "$build")"
	[ "$build" -lt 5 ] && build_note="cached"

	log "$kube: the demo, -check, for $demo_duration"
	s=$SECONDS
	KUBEBUILDER_ASSETS=$dir "$here/with-reaper.sh" "$work/withcluster" -- \
		"$work/demo" -check -quiet -duration "$demo_duration" -metrics-addr 127.0.0.1:0 >"$work/demo-$v.log" 2>&1
	demo_rc=$?
	demo_time=$((SECONDS - s))
	sed 's/^/    /' "$work/demo-$v.log" >&2
	demo_result=PASS
	[ $demo_rc -eq 0 ] || { demo_result=FAIL; failed=1; }
	demo_note=$(sed -n 's/^\[demo\] check passed: \([0-9]*\) writes.*/\1 writes, none stale after the wait/p' "$work/demo-$v.log")
	p99=$(sed -n 's/.*time until the cache was fresh: .*p99 \([^ ]*\) .*/\1/p' "$work/demo-$v.log")
	[ -n "$p99" ] && demo_note="$demo_note, wait p99 $p99"

	log "$kube: go test -race -run '$run_pattern' ./e2e"
	s=$SECONDS
	(cd "$integration/e2e" && KUBEBUILDER_ASSETS=$dir "$here/with-reaper.sh" \
		"$work/e2e.test" -test.v -test.count=1 -test.timeout=30m -test.run "$run_pattern") >"$work/e2e-$v.log" 2>&1
	e2e_rc=$?
	e2e_time=$((SECONDS - s))
	grep -E '^(--- |ok|FAIL|PASS|panic)' "$work/e2e-$v.log" | sed 's/^/    /' >&2
	pass=$(grep -c '^--- PASS' "$work/e2e-$v.log")
	fail=$(grep -c '^--- FAIL' "$work/e2e-$v.log")
	skip=$(grep -c '^--- SKIP' "$work/e2e-$v.log")
	e2e_result=PASS
	if [ $e2e_rc -ne 0 ] || [ "$fail" -gt 0 ] || [ "$pass" -eq 0 ]; then
		e2e_result=FAIL
		failed=1
		[ "$fail" -eq 0 ] && tail -40 "$work/e2e-$v.log" >&2
		# What each failed test said: its block after "--- FAIL".
		awk '/^--- FAIL/ { p = 1; print; next } /^(--- |=== |ok|FAIL|PASS)/ { p = 0 } p' "$work/e2e-$v.log" | cut -c1-400 | sed 's/^/    /' >&2
	fi
	while read -r status name took; do
		[[ " ${seen_tests[*]:-} " == *" $name "* ]] || seen_tests+=("$name")
		cell["$name|$v"]="$status ${took//[()]/}"
	done < <(sed -n 's/^--- \(PASS\|FAIL\|SKIP\): \([^ ]*\) \(([0-9.]*s)\)$/\1 \2 \3/p' "$work/e2e-$v.log")

	summary+=("| $kube | $etcd | $build_note | $demo_result ($(secs "$demo_time"); ${demo_note:-see the log}) | $e2e_result: $pass passed, $fail failed, $skip skipped ($(secs "$e2e_time")) |")
	log "$kube: build $build_note, demo $demo_result, e2e $e2e_result"
done

{
	echo "Run on $(date -u +%Y-%m-%d) with $($GO version | awk '{print $3}'), $(nproc) cores (load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)). Demo: \`demo -check -duration $demo_duration\` on its own control plane. Tests: \`go test -race -run '$run_pattern' ./e2e\`, one control plane for the package (the restore tests make their own)."
	echo
	echo "| kube-apiserver | etcd | build | demo | e2e smoke |"
	echo "|---|---|---|---|---|"
	printf '%s\n' "${summary[@]}"
	echo
	printf '| test |'
	for v in "${versions[@]}"; do printf ' %s |' "$v"; done
	printf '\n|---|'
	for _ in "${versions[@]}"; do printf -- '---|'; done
	printf '\n'
	for t in "${seen_tests[@]:-}"; do
		[ -n "$t" ] || continue
		printf '| %s |' "$t"
		for v in "${versions[@]}"; do printf ' %s |' "${cell["$t|$v"]:-not run}"; done
		printf '\n'
	done
} >"$work/report.md"

cat "$work/report.md"
if [ -n "${SUPPORT_MATRIX_DOC:-}" ]; then
	doc=$SUPPORT_MATRIX_DOC
	begin='<!-- support-matrix:begin'
	end='<!-- support-matrix:end -->'
	if ! grep -q "^$begin" "$doc" || ! grep -q "^$end" "$doc"; then
		echo "support-matrix.sh: $doc has no support-matrix markers" >&2
		exit 1
	fi
	awk -v begin="$begin" -v end="$end" -v report="$work/report.md" '
		index($0, begin) == 1 { print; while ((getline line < report) > 0) print line; skip = 1; next }
		index($0, end) == 1 { skip = 0 }
		!skip { print }' "$doc" >"$work/doc" && cp "$work/doc" "$doc"
	log "wrote the report into $doc"
fi
if [ $failed -ne 0 ]; then
	log "FAIL"
	exit 1
fi
log "PASS"
