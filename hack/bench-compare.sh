#!/usr/bin/env bash
# bench-compare.sh REF [PKG BENCH]...: compares benchmarks of the working
# tree with those of git revision REF, side by side in one run. Each pair is
# a package and a -bench regexp. The test binaries of both trees are built
# first, then run alternately (old, new, old, new, ...) COUNT times, so that
# drift on a shared machine falls on both alike; benchstat prints the table.
# Each side runs its own tests: the script says when a package's test files
# differ between the trees, since a changed benchmark measures something else.
#
#   hack/bench-compare.sh HEAD~3 ./cache 'InformerEvents|WaitForFreshness' ./freshness 'Wait'
#
# COUNT (default 10) runs; BENCHTIME (default 1s); OUT (default a temporary
# directory) keeps old.txt and new.txt.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
export GOWORK=  # the working tree builds as developers build it

ref=${1:?usage: bench-compare.sh REF [PKG BENCH]...}
shift
(($# >= 2 && $# % 2 == 0)) || die "give package and -bench regexp pairs"
COUNT=${COUNT:-10}
BENCHTIME=${BENCHTIME:-1s}
OUT=${OUT:-$(mktemp -d)}
old=$(mktemp -d)
trap 'git -C "$REPO" worktree remove --force "$old" >/dev/null 2>&1 || true' EXIT
git -C "$REPO" worktree add --detach -q "$old" "$ref"
command -v benchstat >/dev/null || die "benchstat missing: go install golang.org/x/perf/cmd/benchstat@latest"

pairs=("$@")
for ((i = 0; i < ${#pairs[@]}; i += 2)); do
  pkg=${pairs[i]}
  # Each side runs its own tests: a changed benchmark is a second variable.
  if ! git -C "$REPO" diff --quiet "$ref" -- "${pkg#./}/*_test.go"; then
    log "note: $pkg's test files differ from $ref's (git diff $ref -- '${pkg#./}/*_test.go'); a difference may be the benchmark's own"
  fi
  (cd "$old" && $GO test -c -o "$OUT/old-$i.test" "$pkg")
  (cd "$REPO" && $GO test -c -o "$OUT/new-$i.test" "$pkg")
done
: >"$OUT/old.txt"
: >"$OUT/new.txt"
for ((n = 1; n <= COUNT; n++)); do
  log "round $n of $COUNT"
  for ((i = 0; i < ${#pairs[@]}; i += 2)); do
    pkgdir=${pairs[i]}
    for side in old new; do
      dir=$REPO
      [ "$side" = old ] && dir=$old
      # Run in the package's folder, as go test does (testdata).
      (cd "$dir/$pkgdir" && "$OUT/$side-$i.test" -test.run '^$' -test.bench "${pairs[i + 1]}" \
        -test.benchmem -test.benchtime "$BENCHTIME" -test.count 1) | grep -E '^(Benchmark|goos|goarch|pkg|cpu)' >>"$OUT/$side.txt"
    done
  done
done
benchstat "$OUT/old.txt" "$OUT/new.txt"
log "raw results in $OUT"
