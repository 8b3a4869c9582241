#!/usr/bin/env bash
# with-reaper.sh CMD [ARGS...]: runs CMD with FRESHINFORMER_PID_DIR set to a
# fresh directory, in which package controlplane records every etcd and
# kube-apiserver it starts (and removes them again on a clean Stop). When CMD
# ends, for whatever reason (failure, Ctrl-C, SIGTERM, a SIGKILLed test
# binary), any process still recorded there is terminated: first SIGTERM to
# its process group, then SIGKILL. Only processes whose executable is still
# the recorded binary are touched, so a reused PID is never hit.
set -uo pipefail

piddir=$(mktemp -d "${TMPDIR:-/tmp}/freshinformer-pids.XXXXXX")
export FRESHINFORMER_PID_DIR=$piddir

# alive PID BINARY: the process exists and still runs BINARY.
alive() { [ "$(readlink "/proc/$1/exe" 2>/dev/null)" = "$2" ]; }

reap() {
	local f d pid bin victims=()
	for f in "$piddir"/[0-9]*; do
		[ -e "$f" ] || continue
		pid=$(basename "$f")
		bin=$(head -n1 "$f")
		if alive "$pid" "$bin"; then
			victims+=("$pid:$bin")
			# envtest starts each binary as its own process-group leader.
			kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null
		fi
	done
	for v in "${victims[@]}"; do
		pid=${v%%:*} bin=${v#*:}
		for _ in $(seq 50); do alive "$pid" "$bin" || break; sleep 0.1; done
		if alive "$pid" "$bin"; then kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null; fi
		echo "[reaper] terminated leftover $(basename "$bin") (pid $pid)" >&2
	done
	# Work directories (etcd data, certificates) of control planes that
	# were not stopped; only ever ones the harness created.
	for f in "$piddir"/dir.*; do
		[ -e "$f" ] || continue
		d=$(head -n1 "$f")
		case $(basename "$d") in
		freshinformer-controlplane-*) rm -rf -- "$d" && echo "[reaper] removed leftover $d" >&2 ;;
		esac
	done
	rm -rf "$piddir"
	return 0
}

# The command runs in a process group of its own (job control), so a signal
# for this script reaches every process under it: `go test` does not pass
# SIGTERM on to the test binary it runs, which would otherwise be orphaned.
# A terminal's Ctrl-C reaches this script (the foreground group) and is
# forwarded the same way.
set -m
forward() { kill "-$1" -- "-$child" 2>/dev/null; }
trap 'forward INT' INT
trap 'forward TERM' TERM
"$@" &
child=$!
# wait returns early when a trapped signal arrives; keep waiting for the child.
while :; do
	wait "$child"
	rc=$?
	kill -0 "$child" 2>/dev/null || break
done
reap
exit "$rc"
