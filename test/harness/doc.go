// Package harness starts the real pieces the e2e suite and the demo run
// against, and cleans every one of them up:
//
//   - a kube-apiserver and etcd through controller-runtime's envtest, on
//     127.0.0.1 only, with the binaries test/provision.sh builds
//     (StartControlPlane, Provision);
//   - the manifests of <repo>/manifests, applied exactly as
//     kustomization.yaml lists them, with strict field validation
//     (LoadManifests, ControlPlane.Apply);
//   - a federation of simulated vCenters (test/vcsim), each behind a loopback
//     fault Proxy, the cloud config for it, and the credentials in the
//     manifests' Secret (Start, Env);
//   - the CCM binary, built once (BuildCCM), run as a process in its own
//     process group with the DaemonSet's arguments and a token of the
//     manifests' ServiceAccount, never the administrator's (Env.StartCCM,
//     CCMProcess with Kill, Stop and Restart);
//   - Nodes as a kubelet with --cloud-provider=external registers them
//     (KubeletNode, Env.CreateNode, Env.SetReady, WaitForNodes), played by
//     the harness, or, with Options.RealNodes, registered by real kubelets
//     (StartKubelet: test/tools/vm-kubelet, the 1.37 kubelet's own code in a
//     network namespace holding its VM's IPs) and watched by a real
//     kube-controller-manager's node-lifecycle controller
//     (StartControllerManager); SetReady(false) then kills the kubelet.
//
// Child processes die with the process that started them (parent death
// signal); Shutdown stops everything still running, for watchdogs and
// signal handlers. envtest logs through controller-runtime's logger:
// callers should set one (ctrllog.SetLogger) or it complains once.
package harness

import _ "sigs.k8s.io/controller-runtime/pkg/envtest" // provisioned control plane
