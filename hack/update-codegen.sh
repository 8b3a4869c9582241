#!/usr/bin/env bash
# Generates the example CRD controller's code with k8s.io/code-generator
# (kube_codegen.sh, as sample-controller does): deepcopy functions in
# examples/crdcontroller/apis, and its clientset, listers and informers in
# examples/crdcontroller/generated; then the informer factory's ListScope
# method (what cache.InformerFor reads) with this module's cmd/scope-gen.
# The version is go.mod's client-go's, so that the generated code builds
# on every supported client-go.
#
#   hack/update-codegen.sh           # write the files
#   hack/update-codegen.sh --verify  # fail if the committed files differ
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
export GOWORK=off
module=$($GO list -m)
version=$($GO list -m -f '{{.Version}}' k8s.io/client-go)
codegen=$(cd "${TMPDIR:-/tmp}" && GOFLAGS=-mod=mod $GO mod download -json "k8s.io/code-generator@$version" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')
[ -n "$codegen" ] || { echo "update-codegen: cannot download k8s.io/code-generator@$version" >&2; exit 1; }

example=examples/crdcontroller
tmp=$(mktemp -d "${TMPDIR:-/tmp}/freshinformer-codegen.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
# The generators install into GOBIN: a directory of ours, not the user's.
export GOBIN="$tmp/bin"
$GO build -o "$GOBIN/scope-gen" ./cmd/scope-gen

# generate writes the code into the module rooted at the current directory.
generate() {
	# kube_codegen first removes what it generated before, from these.
	mkdir -p "$example/generated/clientset" "$example/generated/listers" "$example/generated/informers"
	# shellcheck source=/dev/null
	source "$codegen/kube_codegen.sh"
	kube::codegen::gen_helpers --boilerplate hack/boilerplate.go.txt "$example/apis"
	kube::codegen::gen_client --with-watch \
		--output-dir "$example/generated" \
		--output-pkg "$module/$example/generated" \
		--boilerplate hack/boilerplate.go.txt \
		"$example/apis"
	"$GOBIN/scope-gen" -boilerplate hack/boilerplate.go.txt "$example/generated/informers/externalversions"
}

if [ "${1:-}" != --verify ]; then
	generate >/dev/null
	exit 0
fi
# Generate in a module of the API types alone, then compare.
mkdir -p "$tmp/mod/$example" "$tmp/mod/hack"
cp go.mod go.sum "$tmp/mod/"
cp hack/boilerplate.go.txt "$tmp/mod/hack/"
cp -r "$example/apis" "$tmp/mod/$example/"
(cd "$tmp/mod" && generate >/dev/null)
status=0
for d in apis generated; do
	if ! diff -r "$example/$d" "$tmp/mod/$example/$d" >&2; then
		status=1
	fi
done
if [ $status != 0 ]; then
	echo "update-codegen: $example's generated code is stale: run hack/update-codegen.sh" >&2
	exit 1
fi
echo "update-codegen: $example's generated code is current (code-generator $version)"
