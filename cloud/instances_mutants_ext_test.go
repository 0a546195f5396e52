package cloud_test

// InstancesV2 over in-memory vCenters, one answer at a time: power states,
// the ip family of the vCenter that found the VM, placement labels, zone
// and region, absence. Fast counterparts of the vcsim scenarios, asserting
// each branch of instances.go (see test/mutation.sh).

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/backends"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/cloud"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/cloud/nodes"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/test/backendtest"
)

func TestInstancesOverFakeVCenters(t *testing.T) {
	s := servers{"east.example.com": backendtest.New(), "west.example.com": backendtest.New()}
	const (
		uuidOn    = "42000011-0000-4000-8000-000000000011"
		uuidOff   = "42000012-0000-4000-8000-000000000012"
		uuidSusp  = "42000013-0000-4000-8000-000000000013"
		uuidNone  = "42000014-0000-4000-8000-000000000014"
		uuidZone  = "42000015-0000-4000-8000-000000000015"
		uuidWest  = "42000016-0000-4000-8000-000000000016"
		uuidGone  = "42000017-0000-4000-8000-000000000017"
		uuidNoTag = "42000018-0000-4000-8000-000000000018"
	)
	add := func(server, id, uuid string, power backends.PowerState, tags map[string]string, edit func(*backends.VM)) {
		vm := fakeVM("dc0", id, "node-"+id, uuid)
		vm.PowerState = power
		if edit != nil {
			edit(&vm)
		}
		s[server].Add(vm, tags)
	}
	both := map[string]string{"k8s-zone": "z1", "k8s-region": "r1"}
	add("east.example.com", "on", uuidOn, backends.PoweredOn, both, func(vm *backends.VM) { vm.HostName = "esx-1" })
	add("east.example.com", "off", uuidOff, backends.PoweredOff, both, nil)
	add("east.example.com", "susp", uuidSusp, backends.Suspended, both, nil)
	add("east.example.com", "none", uuidNone, "", both, nil)
	add("east.example.com", "zone", uuidZone, backends.PoweredOn, map[string]string{"k8s-zone": "z1"}, nil)
	add("east.example.com", "notag", uuidNoTag, backends.PoweredOn, nil, nil)
	add("east.example.com", "gone", uuidGone, backends.PoweredOn, both, nil)
	add("west.example.com", "west", uuidWest, backends.PoweredOn, both, func(vm *backends.VM) {
		vm.NICs = []backends.NIC{{Network: "VM Network", IPs: []string{"fd00::16"}, DeviceConfigID: 4000}}
	})
	cfg := s.config("", "east=east.example.com") +
		"  west:\n    server: west.example.com\n    ipFamily: [ipv6]\n" +
		"labels:\n  zone: k8s-zone\n  region: k8s-region\nnodes:\n  placementLabels: [host, cluster]\n"
	path := filepath.Join(t.TempDir(), "vsphere.conf")
	writeAtomically(t, path, cfg)
	c, err := cloud.NewFromFile(path, s.options())
	if err != nil {
		t.Fatal(err)
	}
	client := fake.NewClientset()
	startWith(t, c, client)
	ctx := t.Context()

	for uuid, want := range map[string]bool{uuidOn: false, uuidOff: true, uuidSusp: true, uuidNone: false} {
		if got, err := c.InstanceShutdown(ctx, providerNode("n", uuid)); err != nil || got != want {
			t.Errorf("InstanceShutdown(%s) = %v, %v; want %v", uuid, got, err, want)
		}
	}
	if got, err := c.InstanceShutdown(ctx, providerNode("n", "42000019-0000-4000-8000-000000000019")); err != nil || got {
		t.Errorf("InstanceShutdown(no such VM) = %v, %v; want false", got, err)
	}

	md, err := c.InstanceMetadata(ctx, kubeletNode("node-on", uuidOn))
	if err != nil {
		t.Fatal(err)
	}
	if md.Zone != "z1" || md.Region != "r1" || md.ProviderID != "vsphere://"+uuidOn {
		t.Errorf("metadata %+v; want zone z1, region r1 and the VM's providerID", md)
	}
	if got := md.AdditionalLabels; got["vsphere-federated-ccm.io/host"] != "esx-1" || got[nodes.LabelVCenter] != "east" {
		t.Errorf("labels %v; want the host and the vCenter", got)
	}
	if _, ok := md.AdditionalLabels["vsphere-federated-ccm.io/cluster"]; ok {
		t.Errorf("labels %v: an empty cluster label", md.AdditionalLabels)
	}
	// The vCenter that found it says the ip family: west's is IPv6.
	md, err = c.InstanceMetadata(ctx, kubeletNode("node-west", uuidWest))
	if err != nil || !slices.ContainsFunc(md.NodeAddresses, func(a v1.NodeAddress) bool { return a.Type == v1.NodeInternalIP && a.Address == "fd00::16" }) {
		t.Fatalf("metadata in west (ipFamily ipv6) = %+v, %v; want its IPv6 address", md, err)
	}
	_, err = c.InstanceMetadata(ctx, kubeletNode("node-zone", uuidZone))
	if err == nil || !strings.Contains(err.Error(), `region (category "k8s-region")`) || strings.Contains(err.Error(), "zone (category") {
		t.Errorf("region tag missing: err = %v; want the region alone named", err)
	}
	_, err = c.InstanceMetadata(ctx, kubeletNode("node-notag", uuidNoTag))
	if err == nil || !strings.Contains(err.Error(), `zone (category "k8s-zone")`) || !strings.Contains(err.Error(), `region (category "k8s-region")`) {
		t.Errorf("no tag: err = %v; want zone and region named", err)
	}

	// Gone: absent once the record is read; found: exists.
	if ok, err := c.InstanceExists(ctx, providerNode("node-on", uuidOn)); !ok || err != nil {
		t.Fatalf("InstanceExists(node-on) = %v, %v", ok, err)
	}
	s["east.example.com"].Remove("gone")
	eventually(t, "node-gone reported absent", func() bool {
		ok, err := c.InstanceExists(ctx, providerNode("node-gone", uuidGone))
		return !ok && err == nil
	})
}
