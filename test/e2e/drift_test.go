package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/cloud/metadata"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/cloud/nodes"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/discovery"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/test/harness"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/test/vcsim"
)

// Nodes follow their VMs as the simulated vCenters move them: a vMotion to
// another cluster in another zone is reported (TopologyDrift, the drift
// gauge) and cleared when it comes back; a move to another datacenter and
// to another vCenter makes the location labels follow; with
// nodes.reconcileTopology set by a config edit (no restart) every
// drifted Node's zone and region labels are rewritten. Every Node is kept
// throughout.
func TestDrift(t *testing.T) {
	t.Parallel()
	env := newEnv(t, harness.Options{VCenters: 2, Datacenters: 2, MachinesPerPool: 2})
	ctx := t.Context()
	vc1, vc2 := env.Fed.VCenter("vc1"), env.Fed.VCenter("vc2")
	// In vc1's DC0: a VM of the cluster (DC0_C0_H0) and one of the
	// standalone host (DC0_H0), each compute resource its own zone (and
	// another VM left on each, whose zone the moves read).
	var inCluster, standalone *vcsim.VM
	for _, vm := range vmsOf(env, "vc1", "DC0") {
		if strings.Contains(vm.Host, "_C") {
			inCluster = vm
		} else {
			standalone = vm
		}
	}
	if inCluster == nil || standalone == nil || inCluster.Zone == standalone.Zone {
		t.Fatalf("vc1 DC0's VMs %v: want one in the cluster and one on the standalone host, in two zones", vmsOf(env, "vc1", "DC0"))
	}
	// And one of vc1 DC1's cluster.
	var inDC1 *vcsim.VM
	for _, vm := range vmsOf(env, "vc1", "DC1") {
		if vm.Host == "DC1_C0_H0" {
			inDC1 = vm
		}
	}
	vms := []*vcsim.VM{inCluster, standalone, inDC1}
	nodesSection := "nodes:\n  placementLabels: [host, cluster]\n"
	writeConfig(t, env, env.CloudConfigYAML+nodesSection)
	createNodes(t, env, vms)
	// --v=5: the pass's line per Node ("Node compared with its VM", or why
	// nothing was concluded), to tell a slow inventory from a wrong pass.
	ccm := startCCM(t, env, "ccm", harness.CCMOptions{Flags: map[string]string{"v": "5"}})
	nudgeInitialized(t, env, vms, time.Minute)
	deletions := watchDeletions(t, env)
	token := metricsReaderToken(t, env)

	node := func(vm *vcsim.VM) *corev1.Node {
		n, err := env.Client.CoreV1().Nodes().Get(ctx, harness.NodeName(vm), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	// label waits for vm's Node to carry key=want ("": not at all).
	label := func(vm *vcsim.VM, key, want string, timeout time.Duration) error {
		var last string
		err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
			v, ok := node(vm).Labels[key]
			last = v
			return want == "" && !ok || ok && v == want, nil
		})
		if err != nil {
			return fmt.Errorf("node %s: label %s = %q, want %q within %s", harness.NodeName(vm), key, last, want, timeout)
		}
		return nil
	}
	mustLabel := func(vm *vcsim.VM, key, want string) {
		t.Helper()
		if err := label(vm, key, want, time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	// placementLabel waits for a placement label (host, cluster), read from
	// the inventory's entities.
	placementLabel := func(vm *vcsim.VM, key, want string) {
		t.Helper()
		if err := label(vm, key, want, 30*time.Second); err != nil {
			t.Errorf("placement label: %v", err)
		}
	}
	// event waits for an Event of reason on vm's Node whose message holds
	// every part.
	event := func(vm *vcsim.VM, reason string, parts ...string) {
		t.Helper()
		err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
			for _, e := range events(t, env, "default", "Node", harness.NodeName(vm)) {
				if e.Reason != reason {
					continue
				}
				all := true
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
	}
	metric := func(want float64, name string, labels ...string) {
		t.Helper()
		metricIs(t, ccm, token, want, name, labels...)
	}

	// At initialization: the zone, and the labels below it.
	mustLabel(inCluster, corev1.LabelTopologyZone, inCluster.Zone)
	placementLabel(inCluster, metadata.LabelHost, inCluster.Host)
	placementLabel(inCluster, metadata.LabelCluster, "DC0_C0")
	placementLabel(standalone, metadata.LabelHost, standalone.Host)
	mustLabel(standalone, metadata.LabelCluster, "") // a standalone host has none
	metric(0, "cloudprovider_vsphere_nodes_topology_drift", "kind", "zone")
	// The simulator's VMs have no disk.EnableUUID.
	event(inCluster, nodes.ReasonDiskUUIDDisabled, "disk.EnableUUID")
	metric(3, "cloudprovider_vsphere_nodes_disk_uuid_disabled")

	// A vMotion of the cluster's VM to the standalone host: another zone.
	initialZone, initialHost := inCluster.Zone, inCluster.Host
	if err := env.Fed.Relocate(ctx, inCluster, standalone.Host); err != nil {
		t.Fatal(err)
	}
	event(inCluster, nodes.ReasonTopologyDrift, "zone "+initialZone+" → "+inCluster.Zone)
	metric(1, "cloudprovider_vsphere_nodes_topology_drift", "kind", "zone")
	placementLabel(inCluster, metadata.LabelHost, standalone.Host)
	placementLabel(inCluster, metadata.LabelCluster, "")
	if z := node(inCluster).Labels[corev1.LabelTopologyZone]; z != initialZone {
		t.Fatalf("zone label %q rewritten; reconcileTopology is off", z)
	}
	// And back: cleared.
	if err := env.Fed.Relocate(ctx, inCluster, initialHost); err != nil {
		t.Fatal(err)
	}
	event(inCluster, nodes.ReasonTopologyDriftCleared)
	metric(0, "cloudprovider_vsphere_nodes_topology_drift", "kind", "zone")
	placementLabel(inCluster, metadata.LabelHost, initialHost)

	// To vc1's DC1: the location labels follow at once. The moved VM is
	// a new object: its zone and region are judged once the backend's tag
	// cache holds it (loaded at the next lookup of the Node, its periodic
	// status update), then its drift too.
	oldZone, oldRegion := inCluster.Zone, inCluster.Region
	if err := env.Fed.Move(ctx, inCluster, vc1, "DC1", vc1.Hosts("DC1")[0]); err != nil {
		t.Fatal(err)
	}
	mustLabel(inCluster, nodes.LabelDatacenter, "DC1")
	event(inCluster, nodes.ReasonTopologyDrift, "datacenter DC0 → DC1")
	metric(1, "cloudprovider_vsphere_nodes_moves_total", "kind", "datacenter")
	event(inCluster, nodes.ReasonTopologyDrift, "zone "+oldZone+" → "+inCluster.Zone, "region "+oldRegion+" → "+inCluster.Region)
	placementLabel(inCluster, metadata.LabelCluster, "DC1_C0")

	// The standalone host's VM to vc2 (a cross-vCenter vMotion).
	standaloneZone, standaloneRegion := standalone.Zone, standalone.Region
	if err := env.Fed.Move(ctx, standalone, vc2, "DC0", vc2.Hosts("DC0")[0]); err != nil {
		t.Fatal(err)
	}
	mustLabel(standalone, nodes.LabelVCenter, "vc2")
	mustLabel(standalone, nodes.LabelServer, discovery.ServerLabelValue(discovery.ServerKey(vc2.Host, env.Proxies["vc2"].Port())))
	event(standalone, nodes.ReasonTopologyDrift, "vcenter vc1 → vc2")
	metric(1, "cloudprovider_vsphere_nodes_moves_total", "kind", "vcenter")
	event(standalone, nodes.ReasonTopologyDrift, "zone "+standaloneZone+" → "+standalone.Zone, "region "+standaloneRegion+" → "+standalone.Region)
	placementLabel(standalone, metadata.LabelCluster, "DC0_C0") // vc2's DC0_C0_H0

	// DRS moves the DC1 VM to DC1's standalone host: another zone.
	dc1Zone := inDC1.Zone
	if err := env.Fed.Relocate(ctx, inDC1, "DC1_H0"); err != nil {
		t.Fatal(err)
	}
	event(inDC1, nodes.ReasonTopologyDrift, "zone "+dc1Zone+" → "+inDC1.Zone)
	metric(3, "cloudprovider_vsphere_nodes_topology_drift", "kind", "zone")
	metric(2, "cloudprovider_vsphere_nodes_topology_drift", "kind", "region")

	// reconcileTopology, by an edit: zone and region follow the VMs.
	pid := ccm.Pid()
	writeConfig(t, env, env.CloudConfigYAML+nodesSection+"  reconcileTopology: true\n")
	for _, vm := range vms {
		mustLabel(vm, corev1.LabelTopologyZone, vm.Zone)
		mustLabel(vm, corev1.LabelFailureDomainBetaZone, vm.Zone) // the beta twin the controller set
		mustLabel(vm, corev1.LabelTopologyRegion, vm.Region)
		event(vm, nodes.ReasonTopologyDriftCleared)
	}
	event(inDC1, nodes.ReasonTopologyReconciled, "zone "+dc1Zone+" → "+inDC1.Zone)
	event(standalone, nodes.ReasonTopologyReconciled, "region "+standaloneRegion+" → "+standalone.Region)
	metric(0, "cloudprovider_vsphere_nodes_topology_drift", "kind", "zone")
	metric(0, "cloudprovider_vsphere_nodes_topology_drift", "kind", "region")
	metric(3, "cloudprovider_vsphere_node_label_updates_total", "label", "zone")
	sameProcess(t, ccm, pid)

	// disk.EnableUUID set on a VM: no longer reported.
	if err := env.Fed.VCenter(inDC1.VCenter).SetExtraConfig(ctx, inDC1, "disk.EnableUUID", "TRUE"); err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		ss, _, err := ccm.Scrape(ctx, token)
		v, _ := ss.Sum("cloudprovider_vsphere_nodes_disk_uuid_disabled")
		return err == nil && v == 2, nil
	}); err != nil {
		t.Errorf("nodes_disk_uuid_disabled not 2 after disk.EnableUUID=TRUE on one VM")
	}

	if gone := deletions.Deleted(names(vms)); len(gone) > 0 {
		t.Fatalf("Nodes deleted while their VMs moved: %v", gone)
	}
}
