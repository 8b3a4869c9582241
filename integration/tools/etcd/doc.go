// Package etcd pins etcd for the integration tests: the server (etcd) and
// etcdutl, etcd's offline tool, which the restore tests use to restore etcd
// from a snapshot (`etcdutl snapshot restore`, with and without
// --bump-revision) as an operator would. Both come from this one module, so
// they are always the same etcd version.
//
// It is a module of its own, apart from the kube-apiserver modules
// (integration/tools/kube-<minor>), so that every kube-apiserver version
// runs on the same etcd. integration/hack/build-bins.sh builds etcd (and,
// when asked, etcdutl) from here. Nothing imports this package: the imports
// are in tools.go behind the "tools" build tag. To bump etcd:
//
//	go get go.etcd.io/etcd/server/v3@vX.Y.Z go.etcd.io/etcd/etcdutl/v3@vX.Y.Z && go mod tidy
package etcd
