//go:build tools

// Package tools pins go.etcd.io/etcd/server/v3 (whose root package is the
// etcd main package) so that test/provision.sh can build a real etcd from the
// Go module proxy. To change the version, edit go.mod, run `go mod tidy` in
// this directory and update ETCD_VERSION in test/provision.sh.
package tools

import (
	_ "go.etcd.io/etcd/server/v3"
)
