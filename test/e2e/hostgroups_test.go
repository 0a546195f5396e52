package e2e

// Zones from DRS host groups (labels.zoneHostGroups) on the real
// apiserver: a stretched cluster of two sites, each a host group of one
// simulated cluster. The zone is the group of the VM's host at
// initialization; a host moved between the groups and a VM vMotioned
// across are zone drifts (Events, the gauge, the label rewritten with
// reconcileTopology); a VM on a host of no group keeps its Node tainted.

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/cloud/metadata"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/cloud/nodes"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/test/harness"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/test/vcsim"
)

func TestZonesFromHostGroups(t *testing.T) {
	t.Parallel()
	env := newEnv(t, harness.Options{VCenters: 1, Datacenters: 1, MachinesPerPool: 2})
	ctx := t.Context()
	vc := env.Fed.VCenter("vc1")
	// DC0_C0 stretched over two sites: H0 site A's, a new H1 site B's.
	must(t, vc.AddClusterHost(ctx, "DC0_C0", "DC0_C0_H1"))
	must(t, vc.SetHostGroup(ctx, "DC0_C0", "site-a-hosts", "DC0_C0_H0"))
	must(t, vc.SetHostGroup(ctx, "DC0_C0", "site-b-hosts", "DC0_C0_H1"))
	var inCluster []*vcsim.VM
	var standalone *vcsim.VM
	for _, vm := range vmsOf(env, "vc1", "DC0") {
		switch vm.Host {
		case "DC0_C0_H0":
			inCluster = append(inCluster, vm)
		case "DC0_H0":
			standalone = vm
		}
	}
	if len(inCluster) != 2 || standalone == nil {
		t.Fatalf("DC0's VMs %v: want two on DC0_C0_H0 and one on DC0_H0", vmsOf(env, "vc1", "DC0"))
	}
	a, b := inCluster[0], inCluster[1]
	const tagLabels = "labels:\n  zone: k8s-zone\n  region: k8s-region\n"
	if !strings.Contains(env.CloudConfigYAML, tagLabels) {
		t.Fatalf("the harness's config has no %q", tagLabels)
	}
	// The zone category stays: host groups take precedence for vc1.
	cfg := strings.Replace(env.CloudConfigYAML, tagLabels, tagLabels+"  zoneHostGroups:\n    site-a-hosts: site-a\n    site-b-hosts: site-b\n", 1)
	writeConfig(t, env, cfg)
	createNodes(t, env, []*vcsim.VM{a, b, standalone})
	ccm := startCCM(t, env, "ccm", harness.CCMOptions{})
	nudgeInitialized(t, env, []*vcsim.VM{a, b}, time.Minute)
	token := metricsReaderToken(t, env)

	node := func(vm *vcsim.VM) *corev1.Node {
		n, err := env.Client.CoreV1().Nodes().Get(ctx, harness.NodeName(vm), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	label := func(vm *vcsim.VM, key, want string) {
		t.Helper()
		err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
			return node(vm).Labels[key] == want, nil
		})
		if err != nil {
			t.Fatalf("node %s: label %s = %q, want %q", harness.NodeName(vm), key, node(vm).Labels[key], want)
		}
	}
	// event waits for an Event of reason on vm's Node whose message holds
	// every part, and returns how long that took.
	event := func(vm *vcsim.VM, reason string, parts ...string) time.Duration {
		t.Helper()
		start := time.Now()
		err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
			for _, e := range events(t, env, "default", "Node", harness.NodeName(vm)) {
				all := e.Reason == reason
				for _, p := range parts {
					all = all && strings.Contains(e.Message, p)
				}
				if all {
					return true, nil
				}
			}
			return false, nil
		})
		if err != nil {
			t.Fatalf("no %s Event on %s naming %q: %v", reason, harness.NodeName(vm), parts, events(t, env, "default", "Node", harness.NodeName(vm)))
		}
		return time.Since(start)
	}
	metric := func(want float64, name string, labels ...string) {
		t.Helper()
		metricIs(t, ccm, token, want, name, labels...)
	}
	const drift = "cloudprovider_vsphere_nodes_topology_drift"

	// At initialization: site A's zone (not the cluster's zone tag), the
	// region from its tag.
	for _, vm := range []*vcsim.VM{a, b} {
		if n := node(vm); n.Labels[corev1.LabelTopologyZone] != "site-a" || n.Labels[corev1.LabelTopologyRegion] != vm.Region {
			t.Fatalf("node %s: zone %q region %q; want site-a, %s", n.Name, n.Labels[corev1.LabelTopologyZone], n.Labels[corev1.LabelTopologyRegion], vm.Region)
		}
	}
	// The standalone host is in no group: tainted, and said so.
	event(standalone, metadata.ReasonZoneHostGroupMissing, "its host DC0_H0 is in no host group of labels.zoneHostGroups")
	metric(1, "cloudprovider_vsphere_nodes_uninitialized", "reason", metadata.ReasonZoneHostGroupMissing)
	if harness.Initialized(node(standalone)) {
		t.Fatalf("node %s initialized without a zone", harness.NodeName(standalone))
	}

	// The administrator moves H0 to site B's group (in both a moment:
	// ambiguous, then site B's only): both Nodes drift.
	must(t, vc.SetHostGroup(ctx, "DC0_C0", "site-b-hosts", "DC0_C0_H0", "DC0_C0_H1"))
	must(t, vc.SetHostGroup(ctx, "DC0_C0", "site-a-hosts"))
	took := event(a, nodes.ReasonTopologyDrift, "zone site-a → site-b", "host group site-b-hosts")
	event(b, nodes.ReasonTopologyDrift, "zone site-a → site-b")
	t.Logf("HOSTGROUPS host moved between groups: TopologyDrift in %s", took.Round(time.Millisecond))
	metric(2, drift, "kind", "zone")
	if z := node(a).Labels[corev1.LabelTopologyZone]; z != "site-a" {
		t.Fatalf("zone label %q rewritten; reconcileTopology is off", z)
	}
	// And back: cleared.
	must(t, vc.SetHostGroup(ctx, "DC0_C0", "site-a-hosts", "DC0_C0_H0"))
	must(t, vc.SetHostGroup(ctx, "DC0_C0", "site-b-hosts", "DC0_C0_H1"))
	event(a, nodes.ReasonTopologyDriftCleared)
	metric(0, drift, "kind", "zone")

	// A vMotion of a to H1, across the sites.
	must(t, env.Fed.Relocate(ctx, a, "DC0_C0_H1"))
	took = event(a, nodes.ReasonTopologyDrift, "zone site-a → site-b", "its host DC0_C0_H1 is in host group site-b-hosts")
	t.Logf("HOSTGROUPS vMotion across sites: TopologyDrift in %s", took.Round(time.Millisecond))
	metric(1, drift, "kind", "zone")

	// reconcileTopology, by an edit: a's zone label follows.
	writeConfig(t, env, cfg+"nodes:\n  reconcileTopology: true\n")
	label(a, corev1.LabelTopologyZone, "site-b")
	event(a, nodes.ReasonTopologyReconciled, "zone site-a → site-b")
	metric(0, drift, "kind", "zone")
	if z := node(b).Labels[corev1.LabelTopologyZone]; z != "site-a" {
		t.Fatalf("node %s zone %q; its VM stayed in site A", harness.NodeName(b), z)
	}
}
