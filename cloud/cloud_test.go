package cloud_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cloudprovider "k8s.io/cloud-provider"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/backends"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/backends/vsphere"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/cloud"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config/credentials"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/discovery"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/test/poll"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/test/vcsim"
)

// world is a federation of 3 simulated vCenters × 2 datacenters and a
// provider over it whose HTTP requests are counted per vCenter.
type world struct {
	fed      *vcsim.Federation
	proxies  map[string]*vcsim.Proxy // in front of each vCenter, by name
	cloud    *cloud.Cloud
	mu       sync.Mutex
	requests map[string]*atomic.Int64 // by vCenter name
	backends map[string]*vsphere.Backend
}

// waitInventory waits until vCenter vc's inventory shows the VM named name
// satisfying cond: a test that changes a VM and needs the change seen
// before its next step.
// vsphereBackends builds each vCenter's backend with govmomi, as cmd does.
func vsphereBackends(vc config.VCenter, creds credentials.Source) backends.Backend {
	return vsphere.New(vsphere.Options{Config: vc, Credentials: creds, Inventory: vc.Inventory})
}

func (w *world) waitInventory(t *testing.T, vc, name string, cond func(*backends.VM) bool) {
	t.Helper()
	w.mu.Lock()
	b := w.backends[vc]
	w.mu.Unlock()
	n := w.requests[vc]
	eventually(t, "the inventory of "+vc+" to show the change of "+name, func() bool {
		// Only an answer that cost no request came from the inventory:
		// one out of sync answers from vCenter.
		before := n.Load()
		vms, err := b.Find(t.Context(), backends.Query{By: backends.ByName, Values: []string{name}, AllowCached: true})
		return err == nil && n.Load() == before && len(vms) == 1 && cond(&vms[0])
	})
}

// configYAML writes the federation as an operator would: one vcenter
// section per simulator, credentials inline, zone/region categories.
func configYAML(fed *vcsim.Federation, proxies map[string]*vcsim.Proxy, extraGlobal string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "global:\n  insecureFlag: true\n  requestTimeout: 2s\n  nodeDeletion: {minAbsence: 0s}\n  breaker:\n    consecutiveFailures: 2\n    openTimeout: 1m\n%s", extraGlobal)
	b.WriteString("labels:\n  zone: k8s-zone\n  region: k8s-region\nvcenter:\n")
	for _, vc := range fed.VCenters {
		fmt.Fprintf(&b, "  %s:\n    server: %s\n    port: %d\n    user: %q\n    password: %q\n    datacenters: [DC0, DC1]\n",
			vc.Name, vc.Host, proxies[vc.Name].Port(), vc.User, vc.Password)
	}
	return b.String()
}

// startCloud starts c's workers; the test's cleanup stops them and waits.
func startCloud(t *testing.T, c *cloud.Cloud) {
	stop := make(chan struct{})
	c.Start(nil, stop)
	t.Cleanup(func() {
		close(stop)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		c.Stop(ctx)
	})
}

func newWorld(t *testing.T, mutate func(string) string) *world {
	t.Helper()
	return newWorldWith(t, mutate, true)
}

// newWorldWith is newWorld with the backends' inventories on or off: off
// for tests that count the requests of lookups alone (an inventory's watch
// reconnecting in the background sends requests of its own).
func newWorldWith(t *testing.T, mutate func(string) string, inventory bool) *world {
	t.Helper()
	fed, err := vcsim.Start(vcsim.Options{VCenters: 3, Datacenters: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fed.Close)
	proxies := map[string]*vcsim.Proxy{}
	for _, vc := range fed.VCenters {
		p, err := vc.NewProxy()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(p.Close)
		proxies[vc.Name] = p
	}
	yaml := configYAML(fed, proxies, "")
	if mutate != nil {
		yaml = mutate(yaml)
	}
	cfg, err := config.Parse([]byte(yaml))
	if err != nil {
		t.Fatalf("config: %v\n%s", err, yaml)
	}
	w := &world{fed: fed, proxies: proxies, requests: map[string]*atomic.Int64{}, backends: map[string]*vsphere.Backend{}}
	w.cloud = cloud.New(cfg, cloud.Options{NewBackend: func(vc config.VCenter, creds credentials.Source) backends.Backend {
		n := new(atomic.Int64)
		w.mu.Lock()
		w.requests[vc.Name] = n
		w.mu.Unlock()
		b := vsphere.New(vsphere.Options{Config: vc, Credentials: creds, WrapTransport: vcsim.CountRequests(n), Inventory: inventory, Heartbeat: time.Second})
		w.mu.Lock()
		w.backends[vc.Name] = b
		w.mu.Unlock()
		return b
	}})
	stop := make(chan struct{})
	w.cloud.Start(nil, stop)
	t.Cleanup(func() {
		close(stop)
		// Short: some tests leave a vCenter black-holed, and logout waits.
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		w.cloud.Stop(ctx)
	})
	// Connected before the test's first lookup: one made while a vCenter
	// is still connecting waits for it at most a second, and a loaded
	// machine may take longer to log in.
	w.mu.Lock()
	bs := make([]*vsphere.Backend, 0, len(w.backends))
	for _, b := range w.backends {
		bs = append(bs, b)
	}
	w.mu.Unlock()
	for _, b := range bs {
		eventually(t, "every vCenter to be connected", func() bool { return b.Probe(t.Context()) == nil })
	}
	return w
}

func (w *world) requestsTo(vc string) int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.requests[vc].Load()
}

// kubeletNode is a Node as a kubelet with --cloud-provider=external
// registers it: systemUUID in the kubelet's byte order, no providerID.
func kubeletNode(name, systemUUID string) *v1.Node {
	return &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Status:     v1.NodeStatus{NodeInfo: v1.NodeSystemInfo{SystemUUID: systemUUID}},
	}
}

// initialized is node as the cloud-node controller leaves it: with the
// providerID of its VM (the BIOS UUID, from the kubelet's system UUID).
func initialized(node *v1.Node) *v1.Node {
	n := node.DeepCopy()
	n.Spec.ProviderID = discovery.ProviderID(discovery.SwapByteOrder(strings.ToLower(n.Status.NodeInfo.SystemUUID)))
	return n
}

func TestInstanceMetadataInEveryVCenterAndDatacenter(t *testing.T) {
	w := newWorld(t, nil)
	ctx := t.Context()
	seen := map[string]bool{}
	for _, vm := range w.fed.AllVMs() {
		obj := w.fed.VCenter(vm.VCenter).Object(vm)
		wantType := fmt.Sprintf("vsphere-vm.cpu-%d.mem-%dgb.os-ubuntu", obj.Config.Hardware.NumCPU, obj.Config.Hardware.MemoryMB/1024)
		for _, node := range []*v1.Node{
			kubeletNode(vm.Name, vm.SystemUUID()),
			{ObjectMeta: metav1.ObjectMeta{Name: vm.Name}, Spec: v1.NodeSpec{ProviderID: "vsphere://" + vm.UUID}},
		} {
			md, err := w.cloud.InstanceMetadata(ctx, node)
			if err != nil {
				t.Fatalf("%s: InstanceMetadata: %v", vm.Name, err)
			}
			if md.ProviderID != "vsphere://"+vm.UUID || md.InstanceType != wantType || md.Zone != vm.Zone || md.Region != vm.Region {
				t.Fatalf("%s: metadata %+v, want providerID vsphere://%s type %s zone %s region %s", vm.Name, md, vm.UUID, wantType, vm.Zone, vm.Region)
			}
			want := []v1.NodeAddress{
				{Type: v1.NodeHostName, Address: vm.HostName},
				{Type: v1.NodeInternalIP, Address: vm.IP},
				{Type: v1.NodeExternalIP, Address: vm.IP},
			}
			if fmt.Sprint(md.NodeAddresses) != fmt.Sprint(want) {
				t.Fatalf("%s: addresses %v, want %v", vm.Name, md.NodeAddresses, want)
			}
		}
		seen[vm.VCenter+"/"+vm.Datacenter] = true
	}
	if len(seen) != 6 {
		t.Fatalf("covered %d vCenter/datacenter pairs, want 6: %v", len(seen), seen)
	}
}

func TestExistsAndShutdownFollowTheVM(t *testing.T) {
	w := newWorld(t, nil)
	ctx := t.Context()
	vm := w.fed.VCenters[1].VMs[2]
	vc := w.fed.VCenter(vm.VCenter)
	registered := kubeletNode(vm.Name, vm.SystemUUID())
	node := initialized(registered)
	assertExistsShutdown(t, w, node, true, false)
	if err := vc.PowerOff(ctx, vm); err != nil {
		t.Fatal(err)
	}
	assertExistsShutdown(t, w, node, true, true)
	if err := vc.PowerOn(ctx, vm); err != nil {
		t.Fatal(err)
	}
	assertExistsShutdown(t, w, node, true, false)
	// Suspended is shut down too, as CPI says (every state but poweredOn).
	if err := vc.Suspend(ctx, vm); err != nil {
		t.Fatal(err)
	}
	assertExistsShutdown(t, w, node, true, true)
	if err := vc.PowerOn(ctx, vm); err != nil {
		t.Fatal(err)
	}
	assertExistsShutdown(t, w, node, true, false)
	if err := vc.Destroy(ctx, vm); err != nil {
		t.Fatal(err)
	}
	assertExistsShutdown(t, w, node, false, false)
	if _, err := w.cloud.InstanceMetadata(ctx, node); !errors.Is(err, cloudprovider.InstanceNotFound) {
		t.Fatalf("InstanceMetadata(destroyed) err = %v, want InstanceNotFound", err)
	}
	// A Node never given its providerID is not known as a VM: kept.
	if ok, err := w.cloud.InstanceExists(ctx, registered); ok || !errors.Is(err, discovery.ErrNoProviderID) {
		t.Fatalf("InstanceExists(no providerID, VM destroyed) = %v, %v; want ErrNoProviderID", ok, err)
	}
}

// assertExistsShutdown waits until InstanceExists and InstanceShutdown
// give exists and shutdown: the inventory follows vCenter a moment behind.
// Absence is never allowed on the way to a VM that exists.
func assertExistsShutdown(t *testing.T, w *world, node *v1.Node, exists, shutdown bool) {
	t.Helper()
	ctx := t.Context()
	var got, down bool
	var err, serr error
	eventually(t, fmt.Sprintf("InstanceExists(%s) = %v and InstanceShutdown = %v", node.Name, exists, shutdown), func() bool {
		got, err = w.cloud.InstanceExists(ctx, node)
		if exists && !got && err == nil {
			t.Fatalf("InstanceExists(%s) = false, nil for an existing VM", node.Name)
		}
		down, serr = w.cloud.InstanceShutdown(ctx, node)
		return err == nil && got == exists && serr == nil && down == shutdown
	})
}

// eventuallyError waits until exists answers an error whose text has want
// (an inventory serves its last copy for up to heartbeat + requestTimeout
// after its vCenter goes silent); (false, nil) on the way fails at once.
func eventuallyError(t *testing.T, what, want string, exists func() (bool, error)) {
	t.Helper()
	var ok bool
	var err error
	if !(poll.Schedule{Every: 50 * time.Millisecond, Within: 10 * time.Second}).Holds(func() bool {
		ok, err = exists()
		if !ok && err == nil {
			t.Fatalf("%s = false, nil: absence concluded", what)
		}
		return err != nil && strings.Contains(err.Error(), want)
	}) {
		t.Fatalf("%s = %v, %v after 10s; want an error naming %s", what, ok, err, want)
	}
}

// Rule 1: a vCenter that cannot answer never makes a VM "gone".
func TestStoppedVCenterIsAnErrorNeverAbsence(t *testing.T) {
	w := newWorld(t, nil)
	ctx := t.Context()
	// Warm every vCenter's session and the location cache first.
	for _, vm := range w.fed.AllVMs() {
		if ok, err := w.cloud.InstanceExists(ctx, kubeletNode(vm.Name, vm.SystemUUID())); !ok || err != nil {
			t.Fatalf("%s: %v %v", vm.Name, ok, err)
		}
	}
	down := w.fed.VCenter("vc2")
	down.Stop()
	for _, vm := range down.VMs {
		for _, node := range []*v1.Node{kubeletNode(vm.Name, vm.SystemUUID()), {ObjectMeta: metav1.ObjectMeta{Name: vm.Name}, Spec: v1.NodeSpec{ProviderID: "vsphere://" + vm.UUID}}} {
			eventuallyError(t, vm.Name+" in a stopped vCenter: InstanceExists", "vcenter vc2", func() (bool, error) { return w.cloud.InstanceExists(ctx, node) })
			if _, err := w.cloud.InstanceShutdown(ctx, node); err == nil {
				t.Fatalf("%s in a stopped vCenter: InstanceShutdown gave no error", vm.Name)
			}
		}
	}
	// A VM that exists nowhere is not "gone" while vc2 cannot be asked.
	ghost := kubeletNode("ghost", "56ffffff-ffff-ffff-8fff-ffffffffffff")
	if ok, err := w.cloud.InstanceExists(ctx, ghost); err == nil {
		t.Fatalf("unknown VM with vc2 down: InstanceExists = %v, nil; want an error", ok)
	} else if !strings.Contains(err.Error(), "vcenter vc2") {
		t.Fatalf("error %q does not name vc2", err)
	}
	// The healthy vCenters keep answering, new Nodes included.
	for _, vm := range append(w.fed.VCenter("vc1").VMs, w.fed.VCenter("vc3").VMs...) {
		if _, err := w.cloud.InstanceMetadata(ctx, kubeletNode(vm.Name, vm.SystemUUID())); err != nil {
			t.Fatalf("%s with vc2 down: %v", vm.Name, err)
		}
	}
}

// warm waits until every vCenter's inventory is loaded and the node's
// lookup succeeds: a test of a short deadline must not spend it on the
// first load, whose length depends on the machine.
func (w *world) warm(t *testing.T, node *v1.Node) {
	t.Helper()
	eventually(t, "every inventory to be loaded", func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		for _, b := range w.backends {
			if st := b.Status().Inventory; st == nil || !st.InService {
				return false
			}
		}
		return true
	})
	eventually(t, "the warm-up lookup of "+node.Name+" to succeed", func() bool {
		ok, err := w.cloud.InstanceExists(t.Context(), node)
		return ok && err == nil
	})
}

// A vCenter slower than requestTimeout is an error for its VMs and costs
// the others nothing.
func TestSlowVCenterHitsTheDeadline(t *testing.T) {
	w := newWorld(t, func(s string) string { return strings.Replace(s, "requestTimeout: 2s", "requestTimeout: 300ms", 1) })
	ctx := t.Context()
	slow := w.fed.VCenter("vc3")
	// Log in first, so the delay hits the lookup itself.
	w.warm(t, kubeletNode("x", slow.VMs[0].SystemUUID()))
	w.proxies[slow.Name].SetDelay(3 * time.Second)
	ghost := kubeletNode("ghost", "56ffffff-ffff-ffff-8fff-ffffffffffff")
	_, err := w.cloud.InstanceExists(ctx, ghost)
	// The deadline itself, or — when the inventory's poll met it first —
	// vc3 known down from that failed poll: an error naming vc3 either way.
	if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, discovery.ErrVCenterDown) || !strings.Contains(err.Error(), "vcenter vc3") {
		t.Fatalf("InstanceExists with vc3 slow: err = %v; want a deadline error naming vc3", err)
	}
	vm := w.fed.VCenter("vc1").VMs[0]
	if ok, err := w.cloud.InstanceExists(ctx, kubeletNode(vm.Name, vm.SystemUUID())); !ok || err != nil {
		t.Fatalf("healthy vCenter with vc3 slow: %v, %v", ok, err)
	}
}

// A vCenter that accepts connections and never answers is a deadline error.
func TestBlackholedVCenterIsAnErrorNeverAbsence(t *testing.T) {
	w := newWorld(t, func(s string) string { return strings.Replace(s, "requestTimeout: 2s", "requestTimeout: 300ms", 1) })
	ctx := t.Context()
	vm := w.fed.VCenter("vc2").VMs[3]
	node := kubeletNode(vm.Name, vm.SystemUUID())
	w.warm(t, node)
	if err := w.proxies["vc2"].SetMode(vcsim.Blackhole); err != nil {
		t.Fatal(err)
	}
	for _, n := range []*v1.Node{node, kubeletNode("ghost", "56ffffff-ffff-ffff-8fff-ffffffffffff")} {
		eventuallyError(t, n.Name+" with vc2 black-holed: InstanceExists", "vcenter vc2", func() (bool, error) { return w.cloud.InstanceExists(ctx, n) })
	}
}

// A vCenter refusing connections is known down from its first failed
// connect: lookups then answer at once, an error naming it, and make no
// request of their own (a background probe, at most one per second,
// tells when it is back). The breaker, which needs consecutiveFailures
// lookups, is for failures that are not connection-level.
func TestDownVCenterAnswersWithoutRequests(t *testing.T) {
	w := newWorldWith(t, nil, false)
	ctx := t.Context()
	if err := w.proxies["vc1"].SetMode(vcsim.Refuse); err != nil {
		t.Fatal(err)
	}
	ghost := kubeletNode("ghost", "56ffffff-ffff-ffff-8fff-ffffffffffff")
	if _, err := w.cloud.InstanceExists(ctx, ghost); err == nil {
		t.Fatal("want an error while vc1 refuses")
	}
	before := w.requestsTo("vc1")
	for range 20 {
		_, err := w.cloud.InstanceExists(ctx, ghost)
		if !errors.Is(err, discovery.ErrVCenterDown) || !strings.Contains(err.Error(), "vcenter vc1") {
			t.Fatalf("err = %v, want ErrVCenterDown naming vc1", err)
		}
	}
	if sent := w.requestsTo("vc1") - before; sent > 1 {
		t.Fatalf("20 lookups with vc1 known down sent %d requests to it; want at most one probe", sent)
	}
	// Back: the probe notices, and lookups reach it again.
	if err := w.proxies["vc1"].SetMode(vcsim.Pass); err != nil {
		t.Fatal(err)
	}
	vm := w.fed.VCenter("vc1").VMs[0]
	eventually(t, "vc1 to be asked again once it is back", func() bool {
		ok, err := w.cloud.InstanceExists(ctx, kubeletNode(vm.Name, vm.SystemUUID()))
		return ok && err == nil
	})
}

func TestDuplicateUUIDAcrossVCentersIsAnError(t *testing.T) {
	w := newWorld(t, nil)
	ctx := t.Context()
	a := w.fed.VCenter("vc1").VMs[0]
	b := w.fed.VCenter("vc3").VMs[5]
	w.fed.VCenter("vc3").SetUUID(b, a.UUID)
	// The inventory follows vCenter a moment behind: a twin made a moment
	// ago may be missed for that moment (README), not longer.
	w.waitInventory(t, "vc3", b.Name, func(vm *backends.VM) bool { return vm.UUID == strings.ToLower(a.UUID) })
	node := kubeletNode(a.Name, a.SystemUUID())
	for name, call := range map[string]func() error{
		"InstanceExists":   func() error { _, err := w.cloud.InstanceExists(ctx, node); return err },
		"InstanceShutdown": func() error { _, err := w.cloud.InstanceShutdown(ctx, node); return err },
		"InstanceMetadata": func() error { _, err := w.cloud.InstanceMetadata(ctx, node); return err },
	} {
		err := call()
		var de *discovery.DuplicateError
		if !errors.As(err, &de) {
			t.Fatalf("%s: err = %v, want DuplicateError", name, err)
		}
		for _, want := range []string{"vcenter vc1", a.Name, "vcenter vc3", b.Name} {
			if !strings.Contains(err.Error(), want) {
				t.Fatalf("%s: %q does not name %q", name, err, want)
			}
		}
	}
}

func TestZoneLabels(t *testing.T) {
	ctx := t.Context()
	t.Run("no labels configured: no zone", func(t *testing.T) {
		w := newWorld(t, func(s string) string {
			return strings.Replace(s, "labels:\n  zone: k8s-zone\n  region: k8s-region\n", "", 1)
		})
		vm := w.fed.VCenters[0].VMs[0]
		md, err := w.cloud.InstanceMetadata(ctx, kubeletNode(vm.Name, vm.SystemUUID()))
		if err != nil || md.Zone != "" || md.Region != "" {
			t.Fatalf("metadata = %+v, %v; want no zone and region", md, err)
		}
	})
	t.Run("category without tags: error, Node stays tainted", func(t *testing.T) {
		w := newWorld(t, func(s string) string { return strings.Replace(s, "zone: k8s-zone", "zone: no-such-category", 1) })
		vm := w.fed.VCenters[2].VMs[1]
		_, err := w.cloud.InstanceMetadata(ctx, kubeletNode(vm.Name, vm.SystemUUID()))
		if err == nil || !strings.Contains(err.Error(), `zone (category "no-such-category")`) {
			t.Fatalf("err = %v; want a missing zone tag error", err)
		}
	})
}

// A Node known only by name (no providerID, no systemUUID) is never judged
// absent: Node and VM names may differ.
func TestNameOnlyNodeIsNeverDeleted(t *testing.T) {
	w := newWorld(t, nil)
	ctx := t.Context()
	ok, err := w.cloud.InstanceExists(ctx, &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "no-such-vm"}})
	if err == nil {
		t.Fatalf("InstanceExists(name only, no VM) = %v, nil; want an error", ok)
	}
	vm := w.fed.VCenters[1].VMs[0]
	md, err := w.cloud.InstanceMetadata(ctx, &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: vm.Name}})
	if err != nil || md.ProviderID != "vsphere://"+vm.UUID {
		t.Fatalf("InstanceMetadata(by name) = %+v, %v", md, err)
	}
}

// CPI's searches: a Node without providerID and system UUID, named
// neither like its VM, is found by its VM's guest host name, or by its
// guest IP when the Node is named by one, and gets that VM's providerID;
// the same with a system UUID that names no VM. From the inventory and
// from vCenter directly.
func TestInstanceMetadataByGuestHostNameOrIP(t *testing.T) {
	for _, inventory := range []bool{true, false} {
		t.Run(fmt.Sprintf("inventory=%v", inventory), func(t *testing.T) {
			w := newWorldWith(t, nil, inventory)
			ctx := t.Context()
			byHost, byIP := w.fed.VCenters[1].VMs[3], w.fed.VCenters[2].VMs[0]
			for _, c := range []struct {
				vm   *vcsim.VM
				node *v1.Node
			}{
				{byHost, &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: byHost.HostName}}},
				{byHost, kubeletNode(byHost.HostName, "42ffffff-ffff-4fff-8fff-ffffffffffff")},
				{byIP, &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: byIP.IP}}},
				{byIP, kubeletNode(byIP.IP, "42ffffff-ffff-4fff-8fff-ffffffffffff")},
			} {
				if c.node.Name == c.vm.Name {
					t.Fatal("fixture: the Node must not be named like its VM")
				}
				md, err := w.cloud.InstanceMetadata(ctx, c.node)
				if err != nil || md.ProviderID != "vsphere://"+c.vm.UUID || md.Zone != c.vm.Zone {
					t.Fatalf("InstanceMetadata(%s) = %+v, %v; want providerID vsphere://%s zone %s", c.node.Name, md, err, c.vm.UUID, c.vm.Zone)
				}
				if ok, err := w.cloud.InstanceExists(ctx, c.node); !ok || err != nil {
					t.Fatalf("InstanceExists(%s) = %v, %v; want true", c.node.Name, ok, err)
				}
			}
		})
	}
}

func TestProviderInterface(t *testing.T) {
	w := newWorld(t, nil)
	var p cloudprovider.Interface = w.cloud
	if p.ProviderName() != "vsphere" {
		t.Fatalf("ProviderName = %q", p.ProviderName())
	}
	if _, ok := p.InstancesV2(); !ok {
		t.Fatal("InstancesV2 not supported")
	}
	for name, ok := range map[string]bool{
		"Instances": second(p.Instances()), "Zones": second(p.Zones()), "LoadBalancer": second(p.LoadBalancer()),
		"Routes": second(p.Routes()), "Clusters": second(p.Clusters()),
	} {
		if ok {
			t.Errorf("%s should not be supported", name)
		}
	}
}

func second[T any](_ T, ok bool) bool { return ok }

// An inaccessible VM has no readable UUID: a search by UUID misses it, but
// it is not gone, whether its location was remembered or not.
func TestInaccessibleVMIsNeverDeleted(t *testing.T) {
	w := newWorld(t, nil)
	ctx := t.Context()
	vc := w.fed.VCenter("vc2")
	remembered, unseen := vc.VMs[0], vc.VMs[3]
	rememberedNode := initialized(kubeletNode(remembered.Name, remembered.SystemUUID()))
	if ok, err := w.cloud.InstanceExists(ctx, rememberedNode); !ok || err != nil {
		t.Fatal(ok, err)
	}
	vc.MakeInaccessible(remembered)
	vc.MakeInaccessible(unseen)
	// Unseen means unseen: had a lookup found it a moment before the
	// inventory caught up, its location would be remembered.
	w.waitInventory(t, "vc2", unseen.Name, func(vm *backends.VM) bool { return vm.UUID == "" })
	if ok, err := w.cloud.InstanceExists(ctx, rememberedNode); !ok || err != nil {
		t.Fatalf("remembered inaccessible VM: InstanceExists = %v, %v; want true", ok, err)
	}
	eventuallyError(t, "unseen inaccessible VM: InstanceExists", "inaccessible", func() (bool, error) {
		return w.cloud.InstanceExists(ctx, initialized(kubeletNode(unseen.Name, unseen.SystemUUID())))
	})
}
