//go:build tools

// Package tools pins k8s.io/kubernetes/cmd/kube-controller-manager so that
// test/provision.sh can build a real kube-controller-manager from the Go
// module proxy, for tests that need the node lifecycle controller a cluster
// runs (a Node whose kubelet stops heartbeating goes Unknown and is tainted
// unreachable).
//
// It moves with test/tools/kube-apiserver: same k8s.io/kubernetes release,
// same replace block (see that module's tools.go for how to regenerate it),
// then `go mod tidy` here.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
)
