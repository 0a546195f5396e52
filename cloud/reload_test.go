package cloud_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/component-base/metrics"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/backends"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/cloud"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/cloud/nodes"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config/credentials"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/discovery"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/test/backendtest"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/test/poll"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/test/vcsim"
)

// fileConfig writes a config naming only the given vCenters (and
// datacenters, when set) of fed.
func fileConfig(fed *vcsim.Federation, names []string, datacenters map[string]string) string {
	var b strings.Builder
	b.WriteString("global:\n  insecureFlag: true\n  requestTimeout: 2s\nlabels:\n  zone: k8s-zone\n  region: k8s-region\nvcenter:\n")
	for _, n := range names {
		vc := fed.VCenter(n)
		fmt.Fprintf(&b, "  %s:\n    server: %s\n    port: %d\n    user: %q\n    password: %q\n", vc.Name, vc.Host, vc.Port, vc.User, vc.Password)
		if dcs, ok := datacenters[n]; ok {
			fmt.Fprintf(&b, "    datacenters: %s\n", dcs)
		}
	}
	return b.String()
}

// writeAtomically replaces path as editors do: write aside, rename over.
func writeAtomically(t *testing.T, path, content string) {
	t.Helper()
	tmp := path + ".swp"
	if err := os.WriteFile(tmp, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

func startFromFile(t *testing.T, path string) *cloud.Cloud {
	t.Helper()
	c, _ := startFromFileRegistered(t, path)
	return c
}

// startFromFileRegistered also returns the registry holding the metrics.
func startFromFileRegistered(t *testing.T, path string) (*cloud.Cloud, metrics.KubeRegistry) {
	t.Helper()
	m := cloud.NewMetrics(cloud.BuildInfo{Version: "v9.9.9-test", Commit: "abc123", GoVersion: "go-test"})
	// component-base metrics only count once registered.
	reg := metrics.NewKubeRegistry()
	reg.MustRegister(m.Collectors()...)
	reg.CustomMustRegister(m.CustomCollectors()...)
	c, err := cloud.NewFromFile(path, cloud.Options{NewBackend: vsphereBackends, Metrics: m})
	if err != nil {
		t.Fatal(err)
	}
	startCloud(t, c)
	// Connected before the first lookup (the inventories' watches log in;
	// without an inventory, a lookup does).
	ghost := kubeletNode("warm-up", "56ffffff-ffff-ffff-8fff-ffffffffffff")
	eventually(t, "every vCenter to be connected", func() bool {
		_, _ = c.InstanceExists(t.Context(), ghost)
		for _, st := range c.VCenterStatuses() {
			if st.Reachability != backends.ConnUp.String() {
				return false
			}
		}
		return true
	})
	return c, reg
}

// eventually polls cond every 50ms for up to 10s.
var eventually = poll.Schedule{Every: 50 * time.Millisecond, Within: 10 * time.Second}.Until

func TestConfigEditsApplyInPlace(t *testing.T) {
	fed, err := vcsim.Start(vcsim.Options{VCenters: 3, Datacenters: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fed.Close)
	path := filepath.Join(t.TempDir(), "vsphere.conf")
	writeAtomically(t, path, fileConfig(fed, []string{"vc1", "vc2"}, nil))
	c, reg := startFromFileRegistered(t, path)
	ctx := t.Context()
	inVC3 := fed.VCenter("vc3").VMs[0]
	inVC2 := fed.VCenter("vc2").VMs[1]
	nodeVC3 := kubeletNode(inVC3.Name, inVC3.SystemUUID())
	nodeVC2 := kubeletNode(inVC2.Name, inVC2.SystemUUID())
	if ok, err := c.InstanceExists(ctx, nodeVC2); !ok || err != nil {
		t.Fatalf("vc2 VM before edits: %v, %v", ok, err)
	}

	// Add a vCenter: its VMs become discoverable.
	writeAtomically(t, path, fileConfig(fed, []string{"vc1", "vc2", "vc3"}, nil))
	eventually(t, "vc3 to be searched", func() bool {
		md, err := c.InstanceMetadata(ctx, nodeVC3)
		return err == nil && md.Zone == inVC3.Zone
	})

	// An invalid edit is rejected and the last good config keeps serving.
	writeAtomically(t, path, "vcenter:\n  broken:\n    port: seventy\n")
	eventually(t, "the invalid edit to be rejected", func() bool {
		v, _ := seriesValue(t, reg, "cloudprovider_vsphere_config_reload_total", "result", "error", true)
		return v == 1
	})
	if _, err := c.InstanceMetadata(ctx, nodeVC3); err != nil {
		t.Fatalf("after an invalid edit: %v", err)
	}

	// Remove a vCenter: its VMs are not "gone", they cannot be asked.
	writeAtomically(t, path, fileConfig(fed, []string{"vc1", "vc3"}, nil))
	eventually(t, "vc2 to leave the config", func() bool {
		ok, err := c.InstanceExists(ctx, nodeVC2)
		if err == nil && !ok {
			t.Fatal("a VM of a removed vCenter was reported deleted")
		}
		return err != nil
	})
	var re *discovery.RetiredError
	if _, err := c.InstanceExists(ctx, nodeVC2); !errors.As(err, &re) || re.LastSeen == nil || re.LastSeen.VCenter != "vc2" {
		t.Fatalf("err = %v, want RetiredError naming vc2", err)
	}
	// Known only from its labels (as after a restart): still not deleted.
	labelled := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "was-in-vc2", Labels: map[string]string{nodes.LabelVCenter: "vc2"}},
		Status: v1.NodeStatus{NodeInfo: v1.NodeSystemInfo{SystemUUID: "56ffffff-ffff-ffff-8fff-ffffffffffff"}}}
	if ok, err := c.InstanceExists(ctx, labelled); err == nil {
		t.Fatalf("labelled Node of a removed vCenter: InstanceExists = %v, nil; want an error", ok)
	}
	if v, _ := seriesValue(t, reg, "cloudprovider_vsphere_config_reload_total", "result", "success", true); v != 2 {
		t.Fatalf("config_reload_total{result=success} = %v, want 2", v)
	}
}

func TestDatacenterAddedByEdit(t *testing.T) {
	fed, err := vcsim.Start(vcsim.Options{VCenters: 1, Datacenters: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fed.Close)
	path := filepath.Join(t.TempDir(), "vsphere.conf")
	writeAtomically(t, path, fileConfig(fed, []string{"vc1"}, map[string]string{"vc1": "[DC0]"}))
	c := startFromFile(t, path)
	ctx := t.Context()
	var inDC1 *vcsim.VM
	for _, vm := range fed.VCenters[0].VMs {
		if vm.Datacenter == "DC1" {
			inDC1 = vm
		}
	}
	node := kubeletNode(inDC1.Name, inDC1.SystemUUID())
	if ok, err := c.InstanceExists(ctx, node); ok || err == nil {
		t.Fatalf("VM of an unconfigured datacenter: %v, %v; want an error (it exists, just not here)", ok, err)
	}
	writeAtomically(t, path, fileConfig(fed, []string{"vc1"}, map[string]string{"vc1": "[DC0, DC1]"}))
	eventually(t, "DC1 to be searched", func() bool {
		ok, err := c.InstanceExists(ctx, node)
		return ok && err == nil
	})
	// And removed again: a VM seen there is not deleted.
	writeAtomically(t, path, fileConfig(fed, []string{"vc1"}, map[string]string{"vc1": "[DC0]"}))
	eventually(t, "DC1 to leave the config", func() bool {
		ok, err := c.InstanceExists(ctx, node)
		if err == nil && !ok {
			t.Fatal("a VM of a removed datacenter was reported deleted")
		}
		return err != nil
	})
}

// A mounted ConfigMap is updated by swapping the "..data" symlink.
func TestConfigMapSymlinkSwap(t *testing.T) {
	fed, err := vcsim.Start(vcsim.Options{VCenters: 2, Datacenters: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fed.Close)
	dir := t.TempDir()
	version := func(name, content string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Join(dir, name), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name, "vsphere.conf"), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		tmp := filepath.Join(dir, "..data_tmp")
		if err := os.Symlink(name, tmp); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(dir, "..data")); err != nil {
			t.Fatal(err)
		}
	}
	version("..v1", fileConfig(fed, []string{"vc1"}, nil))
	if err := os.Symlink("..data/vsphere.conf", filepath.Join(dir, "vsphere.conf")); err != nil {
		t.Fatal(err)
	}
	c := startFromFile(t, filepath.Join(dir, "vsphere.conf"))
	vm := fed.VCenter("vc2").VMs[0]
	node := kubeletNode(vm.Name, vm.SystemUUID())
	version("..v2", fileConfig(fed, []string{"vc1", "vc2"}, nil))
	eventually(t, "the swapped ConfigMap to apply", func() bool {
		ok, err := c.InstanceExists(t.Context(), node)
		return ok && err == nil
	})
}

// The inventory metrics show each configured vCenter's inventory in sync
// with its VMs counted, and follow a vCenter added by a config edit.
func TestInventoryMetrics(t *testing.T) {
	fed, err := vcsim.Start(vcsim.Options{VCenters: 2, Datacenters: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fed.Close)
	path := filepath.Join(t.TempDir(), "vsphere.conf")
	writeAtomically(t, path, fileConfig(fed, []string{"vc1"}, nil))
	_, reg := startFromFileRegistered(t, path)
	gauge := func(name, vcenter string) (float64, bool) { return vcenterMetric(t, reg, name, vcenter, false) }
	counter := func(name, vcenter string) (float64, bool) { return vcenterMetric(t, reg, name, vcenter, true) }
	want := float64(len(fed.VCenter("vc1").VMs))
	eventually(t, "vc1's inventory in sync with its VMs counted", func() bool {
		s, _ := gauge("cloudprovider_vsphere_inventory_synced", "vc1")
		n, _ := gauge("cloudprovider_vsphere_inventory_vms", "vc1")
		return s == 1 && n == want
	})
	// A change in vc1 moves its updates counter.
	before, _ := counter("cloudprovider_vsphere_inventory_updates_total", "vc1")
	if before < want {
		t.Fatalf("updates_total{vc1} = %v after loading %v VMs", before, want)
	}
	if err := fed.VCenter("vc1").PowerOff(t.Context(), fed.VCenter("vc1").VMs[0]); err != nil {
		t.Fatal(err)
	}
	eventually(t, "vc1's updates counter to move", func() bool {
		n, _ := counter("cloudprovider_vsphere_inventory_updates_total", "vc1")
		return n > before
	})
	if _, ok := gauge("cloudprovider_vsphere_inventory_synced", "vc2"); ok {
		t.Fatal("vc2 is not configured yet, but has an inventory metric")
	}
	writeAtomically(t, path, fileConfig(fed, []string{"vc1", "vc2"}, nil))
	eventually(t, "vc2's inventory in sync after the config edit", func() bool {
		s, _ := gauge("cloudprovider_vsphere_inventory_synced", "vc2")
		return s == 1
	})
}

// vcenterMetric is the value of the series of metric name labelled
// vcenter, and whether there is one.
func vcenterMetric(t *testing.T, reg metrics.KubeRegistry, name, vcenter string, counter bool) (float64, bool) {
	t.Helper()
	return seriesValue(t, reg, name, "vcenter", vcenter, counter)
}

// seriesValue is the value of the series of metric name whose label is
// value, as reg serves it, and whether there is one.
func seriesValue(t *testing.T, reg metrics.KubeRegistry, name, label, value string, counter bool) (float64, bool) {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, mm := range mf.GetMetric() {
			for _, l := range mm.GetLabel() {
				if l.GetName() == label && l.GetValue() == value {
					if counter {
						return mm.GetCounter().GetValue(), true
					}
					return mm.GetGauge().GetValue(), true
				}
			}
		}
	}
	return 0, false
}

// inventory: false in a vCenter's section sends its lookups to vCenter
// directly; removing it by an edit starts the inventory, without restart.
func TestInventoryTurnedOffAndOnByEdit(t *testing.T) {
	fed, err := vcsim.Start(vcsim.Options{VCenters: 2, Datacenters: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fed.Close)
	path := filepath.Join(t.TempDir(), "vsphere.conf")
	on := fileConfig(fed, []string{"vc1", "vc2"}, nil)
	off := strings.Replace(on, "  vc1:\n", "  vc1:\n    inventory: false\n", 1)
	if off == on {
		t.Fatal("the vc1 section was not found in the config")
	}
	writeAtomically(t, path, off)
	c, reg := startFromFileRegistered(t, path)
	ctx := t.Context()
	synced := func(vcenter string) (float64, bool) {
		return vcenterMetric(t, reg, "cloudprovider_vsphere_inventory_synced", vcenter, false)
	}
	eventually(t, "vc2's inventory in sync", func() bool { s, _ := synced("vc2"); return s == 1 })
	vm := fed.VCenter("vc1").VMs[0]
	node := kubeletNode(vm.Name, vm.SystemUUID())
	if md, err := c.InstanceMetadata(ctx, node); err != nil || md.Zone != vm.Zone {
		t.Fatalf("vc1 VM without an inventory: %+v, %v", md, err)
	}
	if _, ok := synced("vc1"); ok {
		t.Fatal("vc1 has inventory: false, but reports an inventory")
	}

	writeAtomically(t, path, on)
	eventually(t, "vc1's inventory in sync after the edit", func() bool { s, _ := synced("vc1"); return s == 1 })
	if md, err := c.InstanceMetadata(ctx, node); err != nil || md.Zone != vm.Zone {
		t.Fatalf("vc1 VM with its inventory: %+v, %v", md, err)
	}
}

// A key neither CPI nor this CCM reads is a ConfigUnknownKey Event naming
// it (once per applied config), never a rejection; a key CPI reads for a
// component we do not run is only logged.
func TestUnknownConfigKeysAreEventsNotRejections(t *testing.T) {
	f := newFakeFleet("vcA")
	dir := t.TempDir()
	path := filepath.Join(dir, "vsphere.conf")
	writeAtomically(t, path, f.yaml("  tlsThumbprint: AA:BB\n  serviceAccount: ccm\n", "vcA")+"route:\n  routerPath: /t1\n")
	c, err := cloud.NewFromFile(path, f.options())
	if err != nil {
		t.Fatalf("a config with unknown keys was rejected: %v", err)
	}
	client := stateClient()
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })
	startLeader(c, client, stop)
	unknownEvents := func() []string {
		evs, err := client.CoreV1().Events("").List(t.Context(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, e := range evs.Items {
			// The recorder folds a repeated Event into one with a count.
			for i := int32(0); e.Reason == cloud.ReasonConfigUnknownKey && i < max(e.Count, 1); i++ {
				out = append(out, e.Message)
			}
		}
		return out
	}
	eventually(t, "a ConfigUnknownKey Event naming global.tlsThumbprint", func() bool {
		evs := unknownEvents()
		return len(evs) == 1 && strings.Contains(evs[0], "global.tlsThumbprint") && strings.Contains(evs[0], "(line 5)")
	})
	writeAtomically(t, path, f.yaml("  tlsThumbprint: AA:BB\n", "vcA")+"labels:\n  zoen: k8s-zone\n")
	c.Reload(t.Context())
	c.Reload(t.Context()) // the same content again: not reported again
	eventually(t, "a second ConfigUnknownKey Event, for labels.zoen", func() bool {
		evs := strings.Join(unknownEvents(), "\n")
		return strings.Count(evs, "labels.zoen") == 1 && strings.Count(evs, "global.tlsThumbprint") == 2
	})
	for _, e := range unknownEvents() {
		if strings.Contains(e, "serviceAccount") || strings.Contains(e, "route") {
			t.Errorf("a key CPI reads was reported as unknown: %s", e)
		}
	}
}

// The build-info gauge names the running binary.
func TestBuildInfoMetric(t *testing.T) {
	build := cloud.BuildInfo{Version: "v1.2.3", Commit: "0123abcd", GoVersion: "go1.26.8"}
	m := cloud.NewMetrics(build)
	reg := metrics.NewKubeRegistry()
	reg.MustRegister(m.Collectors()...)
	reg.CustomMustRegister(m.CustomCollectors()...)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "cloudprovider_vsphere_build_info" {
			continue
		}
		got := map[string]string{}
		for _, l := range mf.GetMetric()[0].GetLabel() {
			got[l.GetName()] = l.GetValue()
		}
		if v := mf.GetMetric()[0].GetGauge().GetValue(); v != 1 || got["version"] != build.Version || got["commit"] != build.Commit || got["go_version"] != build.GoVersion {
			t.Fatalf("build_info = %v %v, want 1 with %+v", v, got, build)
		}
		return
	}
	t.Fatal("no cloudprovider_vsphere_build_info series")
}

// A backend replaced by an edit is closed once lookups begun with it have
// had their deadline, or at once when the provider stops: Stop returns
// with no session behind it and no goroutine of its own left running.
func TestStopClosesReplacedBackendsAtOnce(t *testing.T) {
	path := filepath.Join(t.TempDir(), "vsphere.conf")
	conf := func(server string) string {
		return "global:\n  user: ccm\n  password: pw\n  requestTimeout: 20s\nvcenter:\n  vc1:\n    server: " + server + "\n"
	}
	writeAtomically(t, path, conf("a.example.com"))
	var mu sync.Mutex
	var made []*backendtest.Backend
	c, err := cloud.NewFromFile(path, cloud.Options{NewBackend: func(config.VCenter, credentials.Source) backends.Backend {
		mu.Lock()
		defer mu.Unlock()
		b := backendtest.New()
		made = append(made, b)
		return b
	}})
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	defer close(stop)
	c.Start(nil, stop)
	writeAtomically(t, path, conf("b.example.com"))
	c.Reload(t.Context())
	mu.Lock()
	first := made[0]
	n := len(made)
	mu.Unlock()
	if n != 2 {
		t.Fatalf("%d backends built, want 2 (the edit changes the server)", n)
	}
	isClosed := func(b *backendtest.Backend) bool {
		_, err := b.Find(t.Context(), backends.Query{By: backends.ByName, Values: []string{"x"}})
		return errors.Is(err, backends.ErrClosed)
	}
	if isClosed(first) {
		t.Fatal("the replaced backend was closed at once: lookups begun with it get no grace")
	}
	// Its grace is 2×20s+1s; Stop must not wait for it.
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	c.Stop(ctx)
	if ctx.Err() != nil {
		t.Fatal("Stop waited out the replaced backend's grace")
	}
	if !isClosed(first) || !isClosed(made[1]) {
		t.Fatalf("after Stop: replaced closed %v, current closed %v; want both", isClosed(first), isClosed(made[1]))
	}
}

// Stop ends every goroutine the provider started, with Start's stop
// channel never closed (as cloud-provider runs it): the reload loop, the
// Node watch, the Secret informers, the Event broadcaster, the file watch.
func TestStopLeavesNoGoroutine(t *testing.T) {
	before := runtime.NumGoroutine()
	path := filepath.Join(t.TempDir(), "vsphere.conf")
	writeAtomically(t, path, "global:\n  secretName: creds\n  secretNamespace: kube-system\nvcenter:\n  vc1:\n    server: a.example.com\n")
	c, err := cloud.NewFromFile(path, cloud.Options{NewBackend: func(config.VCenter, credentials.Source) backends.Backend { return backendtest.New() }})
	if err != nil {
		t.Fatal(err)
	}
	client := fake.NewClientset()
	watches := countSecretWatches(client)
	// As the controller manager runs it, the Node owner on a shared
	// factory included; the factory is the caller's to stop.
	c.Start(client, wait.NeverStop)
	factory := informers.NewSharedInformerFactory(client, 0)
	c.SetInformers(factory)
	factoryStop := make(chan struct{})
	factory.Start(factoryStop)
	c.Reload(t.Context())
	eventually(t, "the informer of the config's Secret", func() bool { return watches.open("kube-system/creds") == 1 })
	running := runtime.NumGoroutine()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	c.Stop(ctx)
	close(factoryStop)
	factory.Shutdown()
	// Stop waited for its own; the HTTP-free fake client's watchers end
	// with their informers, a moment later at most.
	var after int
	for range 50 {
		if after = runtime.NumGoroutine(); after <= before {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if after > before {
		buf := make([]byte, 1<<20)
		t.Fatalf("%d goroutines before Start, %d running, %d after Stop:\n%s", before, running, after, buf[:runtime.Stack(buf, true)])
	}
	t.Logf("goroutines: %d before Start, %d running, %d after Stop", before, running, after)
}
