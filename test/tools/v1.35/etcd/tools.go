//go:build tools

// Package tools pins the etcd that Kubernetes 1.35's build/dependencies.yaml
// names, for `test/provision.sh 1.35`.
package tools

import (
	_ "go.etcd.io/etcd/server/v3"
)
