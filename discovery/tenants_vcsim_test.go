package discovery_test

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/backends"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/backends/vsphere"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config/credentials"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/discovery"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/test/vcsim"
)

// CPI's tenants against a real (simulated) vCenter: a config of three
// entries of one simulator — tenant-a for DC0, tenant-b for DC1, tenant-c
// for both — each with its own session. Every VM is one VM, attributed to
// the first entry in config order serving its datacenter; no twin is
// reported; and while tenant-b's own login is refused, a destroyed VM is
// an error, not absence, until every entry answers again.
func TestTenantsOfOneSimulatedVCenter(t *testing.T) {
	fed, err := vcsim.Start(vcsim.Options{VCenters: 1, Datacenters: 2, MachinesPerPool: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fed.Close)
	vc := fed.VCenters[0]
	entry := func(name, dcs, password string) string {
		return fmt.Sprintf("  %s: {server: %s, port: %d, insecureFlag: true, user: %q, password: %q, datacenters: [%s]}\n",
			name, vc.Host, vc.Port, vc.User, password, dcs)
	}
	cfg, err := config.Parse([]byte("vcenter:\n" + entry("tenant-a", "DC0", vc.Password) + entry("tenant-b", "DC1", vc.Password) + entry("tenant-c", "DC0, DC1", vc.Password)))
	if err != nil {
		t.Fatal(err)
	}
	targets := func(cfg *config.Config) []discovery.Target {
		var out []discovery.Target
		for _, v := range cfg.VCenters {
			be := vsphere.New(vsphere.Options{Config: v, Credentials: credentials.Static{User: v.User, Password: v.Password}, Inventory: true})
			be.Start()
			t.Cleanup(func() { closeWithin(be, time.Second) })
			out = append(out, discovery.Target{Name: v.Name, Server: discovery.ServerKey(v.Server, v.Port), Backend: be,
				Datacenters: v.DatacenterSpecs(), RequestTimeout: 5 * time.Second, ConsecutiveFailures: 1000, OpenTimeout: time.Minute})
		}
		return out
	}
	var mu sync.Mutex
	var twins []string
	d := discovery.New(targets(cfg), discovery.Options{OnDuplicate: func(uuid string, vcs []string) {
		mu.Lock()
		defer mu.Unlock()
		twins = append(twins, uuid+" in "+strings.Join(vcs, ","))
	}})
	scanEvery(t, d, 10*time.Millisecond)
	t.Cleanup(d.Close)
	ctx := t.Context()
	// Attribution is to the first entry that answered with the VM: wait
	// until every entry is up (a lookup does not wait for one still
	// connecting once another entry found the VM).
	eventually(t, "every entry up", func() bool {
		for _, h := range d.Health() {
			if h.Reachability.State != backends.ConnUp {
				d.Locate(ctx, byName("no-such-vm")) //nolint:errcheck // only to connect every entry
				return false
			}
		}
		return true
	})
	want := map[string]string{"DC0": "tenant-a", "DC1": "tenant-b"}
	for _, vm := range vc.VMs {
		node := discovery.NodeKeys{Name: vm.Name, ProviderID: discovery.ProviderID(vm.UUID), SystemUUID: vm.SystemUUID()}
		for range 2 { // the second time from the remembered location
			res, err := d.Exists(ctx, node)
			if err != nil || res == nil || res.VCenter != want[vm.Datacenter] || res.VM.UUID != vm.UUID {
				t.Fatalf("Exists(%s in %s) = %v, %v; want it through %s", vm.Name, vm.Datacenter, res, err, want[vm.Datacenter])
			}
		}
	}
	time.Sleep(100 * time.Millisecond) // several duplicate scans over three inventories
	mu.Lock()
	if len(twins) > 0 {
		t.Errorf("twins reported: %v; three entries of one vCenter hold one set of VMs", twins)
	}
	mu.Unlock()

	// tenant-b's own login is refused (a wrong password for that tenant).
	bad := *cfg
	bad.VCenters = append([]config.VCenter(nil), cfg.VCenters...)
	bad.VCenters[1].Password = "wrong"
	d.SetVCenters(targets(&bad))
	var gone *vcsim.VM
	for _, vm := range vc.VMs {
		if vm.Datacenter == "DC0" {
			gone = vm
			break
		}
	}
	if err := vc.Destroy(ctx, gone); err != nil {
		t.Fatal(err)
	}
	node := discovery.NodeKeys{Name: gone.Name, ProviderID: discovery.ProviderID(gone.UUID)}
	// The inventories see the destruction after a moment.
	var res *discovery.Result
	eventually(t, "the destroyed VM no longer found", func() bool {
		res, err = d.Exists(ctx, node)
		return res == nil
	})
	var le *discovery.LookupError
	if !errors.As(err, &le) || !strings.Contains(err.Error(), "tenant-b") {
		t.Fatalf("Exists of a destroyed VM while tenant-b cannot log in = %v, %v; want a LookupError naming tenant-b, never absence", res, err)
	}
	// Every entry answers again: now it is gone.
	d.SetVCenters(targets(cfg))
	eventually(t, "the destroyed VM to be absent once every entry answers", func() bool {
		res, err := d.Exists(ctx, node)
		return err == nil && res == nil
	})
}
