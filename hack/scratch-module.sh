#!/usr/bin/env bash
# What a user does, on every combination of the support table: in an empty
# module, go get the root module and freshctrl at a version (served from a
# local file proxy as they will be after their tags are pushed, in front of
# the usual module proxy), write a program from the README's snippets,
# build, vet and run it. On client-go 0.37 the program also uses the
# README's Lifecycle() recipe and passes the factory as 0.37's
# informers.SharedInformerFactory.
#
#   hack/scratch-module.sh
#
# ROOT_VERSION / FRESHCTRL_VERSION choose the versions served (default: the
# root version freshctrl's go.mod requires, for both). Exits non-zero on any
# failure.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

work=$(mktemp -d "${TMPDIR:-/tmp}/freshinformer-scratch.XXXXXX")
keep=
cleanup() { [ -n "$keep" ] || rm -rf "$work"; }
trap cleanup EXIT
start=$SECONDS
setup_proxy "$work"

write_program() {
	local cg=$1 with_freshctrl=$2
	cat >main.go <<'EOF'
// A program written from the README: the drop-in factory and a wait for a
// write's resource version.
package main

import (
	"context"
	"fmt"
	"os"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/freshinformer/freshinformer/cache"
	"github.com/freshinformer/freshinformer/freshtest"
)

func main() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	client := freshtest.NewClientset() // a real clientset in production
	factory := cache.NewSharedInformerFactory(client, 0)
	defer func() { cancel(); factory.Shutdown() }()
	cms := factory.Core().V1().ConfigMaps()
	informer, lister := cms.Informer(), cms.Lister()
	newerGroups(ctx, factory)
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())

	cm, err := client.CoreV1().ConfigMaps("ns").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "settings"}}, metav1.CreateOptions{})
	if err != nil {
		fail(err)
	}
	if err := cache.WaitForFreshness(ctx, informer, cm.ResourceVersion); err != nil {
		fail(err)
	}
	if _, err := lister.ConfigMaps("ns").Get("settings"); err != nil {
		fail(err)
	}
	managerFields()
	fmt.Println("fresh at", cm.ResourceVersion)
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, err)
	os.Exit(1)
}
EOF
	if [ "$with_freshctrl" = yes ]; then
		cat >manager.go <<'EOF'
package main

import (
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/freshinformer/freshinformer/freshctrl"
)

// managerFields is the README's manager setup (not started: there is no
// cluster here).
func managerFields() {
	_ = ctrl.Options{
		NewCache:  freshctrl.NewCache,
		NewClient: freshctrl.NewClient,
	}
	_ = freshctrl.NewRequeuer()
}
EOF
	else
		printf 'package main\n\nfunc managerFields() {}\n' >manager.go
	fi
	case $cg in
	v0.36.*)
		cat >groups.go <<'EOF'
package main

import (
	"context"

	"k8s.io/client-go/informers"

	"github.com/freshinformer/freshinformer/cache"
)

// On client-go 0.36 the factory is an informers.SharedInformerFactory.
func newerGroups(_ context.Context, f *cache.SharedInformerFactory) {
	var _ informers.SharedInformerFactory = f
}
EOF
		;;
	*)
		cat >groups.go <<'EOF'
package main

import (
	"context"

	"k8s.io/client-go/informers"
	"k8s.io/client-go/informers/lifecycle"

	"github.com/freshinformer/freshinformer/cache"
)

// factory is the README's recipe for client-go 0.37, whose factory
// interface adds Lifecycle().
type factory struct{ *cache.SharedInformerFactory }

func (f factory) Lifecycle() lifecycle.Interface {
	return cache.NewGroup(f.SharedInformerFactory, lifecycle.New)
}

func newerGroups(_ context.Context, f *cache.SharedInformerFactory) {
	var shared informers.SharedInformerFactory = factory{f}
	inf := shared.Lifecycle().V1alpha1().Evictions().Informer()
	if _, ok := cache.FreshInformerOf(inf); !ok {
		fail(errNotFresh{})
	}
}

type errNotFresh struct{}

func (errNotFresh) Error() string { return "the Lifecycle() informer is not a FreshInformer" }
EOF
		;;
	esac
}

# user NAME CLIENT_GO [CONTROLLER_RUNTIME]
user() {
	local name=$1 cg=$2 cr=${3:-}
	local dir="$work/$name"
	local gets=("$ROOT_MODULE@$ROOT_VERSION" "k8s.io/client-go@$cg" "k8s.io/api@$cg" "k8s.io/apimachinery@$cg")
	[ -z "$cr" ] || gets+=("$FRESHCTRL_MODULE@$FRESHCTRL_VERSION" "sigs.k8s.io/controller-runtime@$cr")
	mkdir -p "$dir" && cd "$dir"
	$GO mod init example.com/freshuser
	echo "== go get ${gets[*]}"
	$GO get "${gets[@]}"
	write_program "$cg" "$([ -n "$cr" ] && echo yes || echo no)"
	$GO mod tidy
	local want got
	for want in "${gets[@]}"; do
		got=$($GO list -m -f '{{.Path}}@{{.Version}}' "${want%@*}")
		[ "$got" = "$want" ] || { echo "== $want resolved to $got"; return 1; }
	done
	$GO build -o app .
	$GO vet .
	./app
}

failed=0
run() {
	local name=$1 s=$SECONDS rc
	log "$*"
	set +e
	(set -e; user "$@") >"$work/$name.log" 2>&1
	rc=$?
	set -e
	if [ "$rc" = 0 ]; then
		echo "=== $name: PASS $((SECONDS - s))s ($(tail -n 1 "$work/$name.log"))"
	else
		failed=1
		echo "=== $name: FAIL $((SECONDS - s))s"
		tail -n 40 "$work/$name.log"
	fi
}

for cg in "${CLIENT_GO_VERSIONS[@]}"; do
	run "root-$cg" "$cg"
done
for combo in "${FRESHCTRL_COMBOS[@]}"; do
	read -r cg cr <<<"$combo"
	run "freshctrl-$cg-$cr" "$cg" "$cr"
done

if [ "$failed" != 0 ]; then
	keep=1
	echo "scratch-module: FAILED after $((SECONDS - start))s (logs in $work)"
	exit 1
fi
echo "scratch-module: a new module builds and runs on every combination ($((SECONDS - start))s)"
