package cloud_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/backends"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/cloud/metadata"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/cloud/nodes"
)

// A stretched cluster c-1: hosts esx-a1, esx-a2 in site A's host group,
// esx-b1 in site B's; the region from its tag. vcB reads its zones from
// tags (its own empty mapping).
const hostGroupsBase = "labels:\n  zone: zone\n  region: region\n  zoneHostGroups:\n    site-a-hosts: site-a\n  zoneHostGroupPattern: '^(?P<zone>site-.+)-hosts$'\n"

const groupGauge = "cloudprovider_vsphere_nodes_zone_host_group_unresolved"

// onHost is node-a's VM on host of the stretched cluster, in groups.
func onHost(host string, groups ...string) backends.VM {
	vm := placedVM("dc0", host, "c-1")
	vm.Host, vm.HostGroups, vm.HostGroupsKnown = "host-"+host, groups, true
	return vm
}

func hostGroupsWorld(t *testing.T, nodes ...*v1.Node) *driftWorld {
	t.Helper()
	w := newDriftWorldBase(t, hostGroupsBase, "", nodes...)
	// vcB's own section: an empty mapping, zones from tags.
	w.base = hostGroupsBase
	writeAtomically(t, w.path, hostGroupsConfig(w)+hostGroupsBase)
	w.c.Reload(t.Context())
	return w
}

// hostGroupsConfig is the fleet's config with vcB's own empty mapping.
func hostGroupsConfig(w *driftWorld) string {
	return strings.Replace(w.f.yaml("", "vcA", "vcB"), "    server: vcB.example.com\n",
		"    server: vcB.example.com\n    labels:\n      zoneHostGroups: {}\n", 1)
}

// At initialization: the zone of the host group of the VM's host (the
// mapping, or the pattern), the region its tag's; the zone tag of a
// vCenter that reads host groups is not read. A host in no mapped group,
// in groups of two zones, or whose groups are not known keeps the Node
// tainted with an Event naming the host and its groups; vcB's VMs still
// get their zone from tags.
func TestZoneFromHostGroupsAtInitialization(t *testing.T) {
	w := hostGroupsWorld(t)
	vcA, vcB := w.f["vcA"], w.f["vcB"]
	meta := func() (zone, region string, err error) {
		t.Helper()
		md, err := w.c.InstanceMetadata(t.Context(), providerNode("node-a", uuidA))
		if err != nil {
			return "", "", err
		}
		return md.Zone, md.Region, nil
	}
	vcA.Add(onHost("esx-a1", "site-a-hosts"), tags("z-tag", "r-1"))
	if zone, region, err := meta(); err != nil || zone != "site-a" || region != "r-1" {
		t.Fatalf("site A: zone %q region %q, %v; want site-a, r-1 (not the zone tag)", zone, region, err)
	}
	vcA.Add(onHost("esx-b1", "site-b-hosts", "gpu-hosts"), tags("z-tag", "r-1"))
	if zone, _, err := meta(); err != nil || zone != "site-b" {
		t.Fatalf("site B by the pattern: zone %q, %v; want site-b", zone, err)
	}

	for _, tc := range []struct {
		vm     backends.VM
		reason string
		says   string
	}{
		{onHost("esx-x1", "gpu-hosts"), metadata.ReasonZoneHostGroupMissing,
			"its host esx-x1 of cluster c-1 is in host groups gpu-hosts, none of labels.zoneHostGroups"},
		{onHost("esx-x2"), metadata.ReasonZoneHostGroupMissing, "its host esx-x2 of cluster c-1 is in no host group of labels.zoneHostGroups"},
		{onHost("esx-x3", "site-a-hosts", "site-b-hosts"), metadata.ReasonZoneHostGroupAmbiguous,
			"is in host groups of different zones, site-a-hosts → site-a, site-b-hosts → site-b"},
		{func() backends.VM { vm := onHost("esx-x4"); vm.HostGroupsKnown = false; return vm }(), metadata.ReasonZoneHostGroupMissing,
			"the host groups of its host esx-x4 of cluster c-1 are not known yet"},
	} {
		vcA.Add(tc.vm, tags("z-tag", "r-1"))
		_, _, err := meta()
		var ge *metadata.ZoneHostGroupError
		if !errors.As(err, &ge) || ge.Reason() != tc.reason || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%s: %v; want a %s error saying %q", tc.vm.HostName, err, tc.reason, tc.says)
			continue
		}
		w.waitEvent(t, tc.reason, tc.says)
	}
	// Two groups of one zone are one zone.
	vcA.Add(onHost("esx-a2", "site-a-hosts", "site-a-gpu"), tags("", "r-1"))
	if zone, _, err := meta(); err != nil || zone != "site-a" {
		t.Fatalf("two groups of one zone: %q, %v", zone, err)
	}
	// The region tag missing is still ZoneTagMissing.
	vcA.Add(onHost("esx-a1", "site-a-hosts"), tags("", ""))
	if _, _, err := meta(); err == nil || !strings.Contains(err.Error(), `region (category "region")`) {
		t.Fatalf("no region tag: %v", err)
	}

	// vcB: zones from tags, whatever its hosts' groups.
	vcA.Remove("vm-1")
	vcB.Add(onHost("esx-a1", "site-a-hosts"), tags("z-tag", "r-2"))
	if zone, region, err := meta(); err != nil || zone != "z-tag" || region != "r-2" {
		t.Fatalf("vcB: zone %q region %q, %v; want its tags", zone, region, err)
	}
}

// An initialized Node of the stretched cluster: its host moved to site B's
// group, then its VM vMotioned to a host of site B, are zone drifts
// (TopologyDrift naming the group, the gauge), cleared when back; a host
// in no mapped group is reported (ZoneHostGroupMissing, the gauge); with
// reconcileTopology the zone label follows. The pass asks no vCenter.
func TestZoneFromHostGroupsDrift(t *testing.T) {
	node := initializedNode()
	node.Labels[v1.LabelTopologyZone], node.Labels[v1.LabelFailureDomainBetaZone] = "site-a", "site-a"
	w := hostGroupsWorld(t, node)
	vcA := w.f["vcA"]
	vcA.Add(onHost("esx-a1", "site-a-hosts"), tags("z-tag", "r-1"))
	time.Sleep(200 * time.Millisecond) // passes
	if got := w.events(t, nodes.ReasonTopologyDrift); len(got) != 0 {
		t.Fatalf("TopologyDrift %q: the zone is the group's, not the tag's", got)
	}
	calls := w.calls()

	// The administrator moves esx-a1 to site B's group.
	vcA.Add(onHost("esx-a1", "site-b-hosts"), tags("z-tag", "r-1"))
	w.waitEvent(t, nodes.ReasonTopologyDrift, "zone site-a → site-b; its host esx-a1 is in host group site-b-hosts (labels.zoneHostGroups)")
	w.waitValue(t, 1, driftGauge, "kind", "zone")
	// Back, then a vMotion to esx-b1, site B's.
	vcA.Add(onHost("esx-a1", "site-a-hosts"), tags("z-tag", "r-1"))
	w.waitEvent(t, nodes.ReasonTopologyDriftCleared, "match")
	w.waitValue(t, 0, driftGauge, "kind", "zone")
	vcA.Add(onHost("esx-b1", "site-b-hosts"), tags("z-tag", "r-1"))
	w.waitEvent(t, nodes.ReasonTopologyDrift, "its host esx-b1 is in host group site-b-hosts")
	w.waitValue(t, 1, driftGauge, "kind", "zone")
	if got := w.node(t, "node-a").Labels[v1.LabelTopologyZone]; got != "site-a" {
		t.Fatalf("zone label %q rewritten; reconcileTopology is off", got)
	}

	// A host added to the cluster and to no group.
	vcA.Add(onHost("esx-new"), tags("z-tag", "r-1"))
	w.waitEvent(t, metadata.ReasonZoneHostGroupMissing, "its host esx-new of cluster c-1 is in no host group")
	w.waitValue(t, 1, groupGauge, "reason", metadata.ReasonZoneHostGroupMissing)
	vcA.Add(onHost("esx-b1", "site-b-hosts"), tags("z-tag", "r-1"))
	w.waitValue(t, 0, groupGauge, "reason", metadata.ReasonZoneHostGroupMissing)
	if got := w.calls(); got != calls {
		t.Fatalf("%d backend calls by the pass; it reads the inventories only", got-calls)
	}

	// reconcileTopology: the zone label follows the group.
	writeAtomically(t, w.path, hostGroupsConfig(w)+hostGroupsBase+"nodes:\n  reconcileTopology: true\n")
	w.c.Reload(t.Context())
	w.waitLabel(t, "node-a", v1.LabelTopologyZone, "site-b")
	w.waitLabel(t, "node-a", v1.LabelFailureDomainBetaZone, "site-b")
	w.waitEvent(t, nodes.ReasonTopologyReconciled, "zone site-a → site-b")
	if n, err := w.client.CoreV1().Nodes().Get(t.Context(), "node-a", metav1.GetOptions{}); err != nil || n.Labels[v1.LabelTopologyRegion] != "r-1" {
		t.Fatalf("region label: %v, %v", n, err)
	}
}
