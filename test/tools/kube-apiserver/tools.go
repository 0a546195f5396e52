//go:build tools

// Package tools pins k8s.io/kubernetes/cmd/kube-apiserver so that
// test/provision.sh can build a real kube-apiserver from the Go module proxy.
//
// To move to another Kubernetes release vX.Y.Z: set the require of
// k8s.io/kubernetes in go.mod to vX.Y.Z, regenerate the replace block from
// the staging modules that k8s.io/kubernetes@vX.Y.Z's go.mod lists as v0.0.0
// (grep -E '^\s+k8s.io/\S+ v0.0.0$'), pinning each to v0.Y.Z, then run
// `go mod tidy` in this directory and update KUBE_VERSION in test/provision.sh.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
)
