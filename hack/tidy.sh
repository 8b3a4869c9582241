#!/usr/bin/env bash
# go mod tidy for every module of the repository, each alone (go mod tidy
# ignores go.work). freshctrl requires a version of the root module; while
# that version is not published (the next release), freshctrl is tidied
# against the working tree's root served from a local file proxy at that
# version, and the root module's lines are then dropped from
# freshctrl/go.sum: their hashes are the working tree's, not the release's
# (the release records the real ones, docs/releasing.md).
#
#   hack/tidy.sh
#
# integration/tools is not touched: integration/hack/gen-tools-gomod.sh
# writes it.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

for dir in . hack examples/crcounter integration integration/kcmbench; do
	log "go mod tidy in $dir"
	(cd "$REPO/$dir" && $GO mod tidy)
done

ROOT_VERSION=$(required_root_version)
if (cd "$REPO/freshctrl" && $GO list -m "$ROOT_MODULE@$ROOT_VERSION" >/dev/null 2>&1); then
	log "go mod tidy in freshctrl ($ROOT_MODULE@$ROOT_VERSION is published)"
	(cd "$REPO/freshctrl" && $GO mod tidy)
	exit 0
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/freshinformer-tidy.XXXXXX")
trap 'rm -rf "$work"' EXIT
setup_proxy "$work"
log "go mod tidy in freshctrl (against $ROOT_MODULE@$ROOT_VERSION from the working tree: not published yet)"
(cd "$REPO/freshctrl" && drop_own_sums go.sum && $GO mod tidy && drop_own_sums go.sum)
