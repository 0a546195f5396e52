package discovery_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/backends"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/discovery"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/test/backendtest"
)

// specs parses datacenters entries as the config does.
func specs(t *testing.T, entries ...string) []config.DatacenterSpec {
	t.Helper()
	var out []config.DatacenterSpec
	for _, e := range entries {
		s, err := config.ParseDatacenter(e)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, s)
	}
	return out
}

// placedVCenter is one fake vCenter with a VM in each of two datacenters
// that sit in folders: east (datacenter-3, /emea/east) and west
// (datacenter-4, /amer/west), as backends/vsphere reports them.
func placedVCenter() (*backendtest.Backend, map[string]backends.VM) {
	b := backendtest.New()
	vms := map[string]backends.VM{}
	for i, dc := range []config.Datacenter{
		{Name: "east", ID: "datacenter-3", Path: "/emea/east"},
		{Name: "west", ID: "datacenter-4", Path: "/amer/west"},
	} {
		vm := backends.VM{
			Ref:          backends.VMRef{Datacenter: dc.Name, ID: "vm-" + dc.Name},
			DatacenterID: dc.ID, DatacenterPath: dc.Path,
			Name: "node-" + dc.Name, UUID: uuidOf(9, i, 0), PowerState: backends.PoweredOn,
		}
		b.AddDatacenter(dc) // still there once its VM is gone
		b.Add(vm, nil)
		vms[dc.Name] = vm
	}
	return b, vms
}

func datacenterDiscoverer(t *testing.T, b backends.Backend, dcs []config.DatacenterSpec) *discovery.Discoverer {
	t.Helper()
	d := discovery.New([]discovery.Target{{Name: "vc1", Server: "vc1:443", Backend: b, RequestTimeout: time.Second, ConsecutiveFailures: 5, OpenTimeout: time.Minute, Datacenters: dcs}}, discovery.Options{})
	scanEvery(t, d, time.Second)
	t.Cleanup(d.Close)
	return d
}

// Issue 22 §3: a datacenter configured by managed object reference or
// inventory path (CPI, since v1.32) serves its VMs; before, only names
// matched and such a datacenter's VMs were "outside the configured
// datacenters".
func TestDatacenterByIDOrPathServesItsVMs(t *testing.T) {
	for _, entry := range []string{"east", "Datacenter:datacenter-3", "datacenter-3", "/emea/east", "emea/east"} {
		t.Run(entry, func(t *testing.T) {
			b, vms := placedVCenter()
			d := datacenterDiscoverer(t, b, specs(t, entry))
			ctx := t.Context()
			res, err := d.Locate(ctx, byUUID(vms["east"].UUID))
			if err != nil || res == nil || res.VM.Ref != vms["east"].Ref {
				t.Fatalf("Locate(VM in %s) = %v, %v; want it found", entry, res, err)
			}
			var oe *discovery.OutsideError
			if _, err := d.Locate(ctx, byUUID(vms["west"].UUID)); !errors.As(err, &oe) {
				t.Fatalf("Locate(VM in west) err = %v; want OutsideError", err)
			}
		})
	}
}

// A Node labelled with the name of a datacenter configured by ID or path
// is in a configured datacenter: its VM's absence is absence.
func TestLabelledDatacenterConfiguredByIDOrPath(t *testing.T) {
	for _, entry := range []string{"Datacenter:datacenter-3", "/emea/east"} {
		t.Run(entry, func(t *testing.T) {
			b, vms := placedVCenter()
			d := datacenterDiscoverer(t, b, specs(t, entry, "other-dc"))
			vm := vms["east"]
			b.Remove(vm.Ref.ID)
			keys := discovery.NodeKeys{Name: vm.Name, ProviderID: discovery.ProviderID(vm.UUID), ClaimedVCenter: "vc1", ClaimedDatacenter: "east"}
			if res, err := d.Exists(t.Context(), keys); err != nil || res != nil {
				t.Fatalf("Exists(deleted VM, labelled east, configured %s) = %v, %v; want nil, nil", entry, res, err)
			}
			// Labelled with a datacenter the config does not name: kept.
			keys.ClaimedDatacenter = "west"
			if _, err := d.Exists(t.Context(), keys); err == nil || !strings.Contains(err.Error(), "no longer configured") {
				t.Fatalf("Exists(labelled west) err = %v; want not configured", err)
			}
		})
	}
}

// Rule 1: a datacenter configured by ID says its name only through its
// vCenter. While the vCenter cannot say it, a Node labelled with some
// datacenter is never found absent.
func TestDatacenterIDNotResolvedIsNeverAbsence(t *testing.T) {
	b, vms := placedVCenter()
	d := datacenterDiscoverer(t, b, specs(t, "Datacenter:datacenter-3"))
	vm := vms["east"]
	b.Remove(vm.Ref.ID)
	b.FailDatacenters(errors.New("no answer within requestTimeout"))
	keys := discovery.NodeKeys{Name: vm.Name, ProviderID: discovery.ProviderID(vm.UUID), ClaimedVCenter: "vc1", ClaimedDatacenter: "east"}
	res, err := d.Exists(t.Context(), keys)
	if err == nil || res != nil {
		t.Fatalf("Exists with the datacenter's ID unresolved = %v, %v; want an error", res, err)
	}
	if !strings.Contains(err.Error(), "cannot be told") || !strings.Contains(err.Error(), "Datacenter:datacenter-3") {
		t.Errorf("err = %v; want it to say the configured ID could not be resolved", err)
	}
	if b.DatacenterCalls() == 0 {
		t.Error("the vCenter was never asked for its datacenters")
	}
	// Once it answers, the same question is absence.
	b.FailDatacenters(nil)
	if res, err := d.Exists(t.Context(), keys); err != nil || res != nil {
		t.Fatalf("Exists once resolved = %v, %v; want nil, nil", res, err)
	}
}
