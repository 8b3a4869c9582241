// Package etcdutl pins etcdutl, etcd's offline tool, which the integration
// tests use to restore etcd from a snapshot (`etcdutl snapshot restore`,
// with and without --bump-revision) as an operator would.
//
// It is a module of its own, apart from integration/tools, so that the
// kube-apiserver and etcd build (keyed by integration/tools/go.sum) stays
// valid when etcdutl is added or bumped: integration/hack/build-bins.sh
// builds etcdutl separately, keyed by this module's go.sum. Keep its etcd
// version equal to the etcd server's in integration/tools/go.mod.
package etcdutl
