// Package harness starts the real pieces the e2e suite and the demo run
// against: a kube-apiserver and etcd (through controller-runtime's envtest,
// with the binaries test/provision.sh builds), a federation of simulated
// vCenters, and the CCM binary as a process.
package harness

import _ "sigs.k8s.io/controller-runtime/pkg/envtest" // provisioned control plane
