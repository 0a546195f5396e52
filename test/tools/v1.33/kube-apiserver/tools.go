//go:build tools

// Package tools pins k8s.io/kubernetes/cmd/kube-apiserver of Kubernetes 1.33
// for TestKubernetesVersions: `test/provision.sh 1.33` builds it (see
// test/tools/kube-apiserver/tools.go for how to move to another patch
// release; the staging modules are pinned to v0.1.33.Z).
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
)
