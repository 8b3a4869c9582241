//go:build tools

package etcdutl

import (
	_ "go.etcd.io/etcd/etcdutl/v3"
)
