//go:build tools

// Package tools pins k8s.io/kubernetes/cmd/kube-apiserver of Kubernetes 1.35
// for TestKubernetesVersions: `test/provision.sh 1.35` builds it (see
// test/tools/kube-apiserver/tools.go for how to move to another patch
// release; the staging modules are pinned to v0.1.35.Z).
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
)
