package cloud_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/backends"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/cloud"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/cloud/nodes"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config/credentials"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/test/backendtest"
)

// fakeFleet is in-memory vCenters by name, for the decisions of the
// provider itself (what counts as absence), not the wire.
type fakeFleet map[string]*backendtest.Backend

func newFakeFleet(names ...string) fakeFleet {
	f := fakeFleet{}
	for _, n := range names {
		f[n] = backendtest.New()
	}
	return f
}

// yaml is a config naming the given vCenters of the fleet (inline
// credentials, short deadline) plus extra global keys.
func (f fakeFleet) yaml(extraGlobal string, names ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "global:\n  user: ccm\n  password: pw\n  requestTimeout: 2s\n%s  nodeDeletion: {minAbsence: 0s}\n", extraGlobal)
	b.WriteString("vcenter:\n")
	for _, n := range names {
		fmt.Fprintf(&b, "  %s:\n    server: %s.example.com\n", n, n)
	}
	return b.String()
}

func (f fakeFleet) options() cloud.Options {
	return cloud.Options{NewBackend: func(vc config.VCenter, _ credentials.Source) backends.Backend {
		return f[vc.Name]
	}}
}

// start starts a provider over f with cfg; client may be nil; tune
// adjusts its options.
func (f fakeFleet) start(t *testing.T, cfg string, client kubernetes.Interface, tune ...func(*cloud.Options)) *cloud.Cloud {
	t.Helper()
	parsed, err := config.Parse([]byte(cfg))
	if err != nil {
		t.Fatalf("config: %v\n%s", err, cfg)
	}
	opts := f.options()
	for _, fn := range tune {
		fn(&opts)
	}
	c := cloud.New(parsed, opts)
	stop := make(chan struct{})
	startLeader(c, client, stop)
	t.Cleanup(func() {
		close(stop)
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		c.Stop(ctx)
	})
	return c
}

func fakeVM(dc, id, name, uuid string) backends.VM {
	return backends.VM{
		Ref: backends.VMRef{Datacenter: dc, ID: id}, Name: name, UUID: uuid,
		PowerState: backends.PoweredOn, ConnectionState: "connected", GuestHostName: name,
		NICs: []backends.NIC{{Network: "VM Network", IPs: []string{"10.0.0.5"}, DeviceConfigID: 4000}},
	}
}

// namesake is a VM named name whose guest reports another host name: a VM
// reporting the Node's name as its host name would be the Node's by CPI's
// search, and keep it.
func namesake(dc, id, name, uuid string) backends.VM {
	vm := fakeVM(dc, id, name, uuid)
	vm.GuestHostName = id + ".elsewhere.example"
	return vm
}

// inaccessible is a VM whose configuration vCenter cannot read: no UUID,
// so a search by UUID misses it, though it exists.
func inaccessible(dc, id, name string) backends.VM {
	return backends.VM{Ref: backends.VMRef{Datacenter: dc, ID: id}, Name: name, ConnectionState: "inaccessible"}
}

// requireKept fails unless InstanceExists answers an error: the Node is
// kept and retried, never deleted.
func requireKept(t *testing.T, c *cloud.Cloud, node *v1.Node, why string) error {
	t.Helper()
	ok, err := c.InstanceExists(t.Context(), node)
	if err == nil {
		t.Fatalf("%s: InstanceExists(%s) = %v, nil; want an error (the Node kept)", why, node.Name, ok)
	}
	return err
}

// providerNode is a Node the cloud-node controller initialized with the
// VM of BIOS UUID uuid.
func providerNode(name, uuid string) *v1.Node {
	return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1.NodeSpec{ProviderID: "vsphere://" + uuid}}
}

const (
	uuidA = "42000001-0000-4000-8000-000000000001"
	uuidB = "42000002-0000-4000-8000-000000000002"
	uuidC = "42000003-0000-4000-8000-000000000003"
)

// Finding 1: the check for an unreadable VM of the Node's name must not
// accept a partial answer. The Node's VM is inaccessible in vcB, so the
// UUID lookup is empty; the name search finds a readable namesake in vcA
// while vcB fails it. Before the fix the found namesake passed the guard
// and InstanceExists said (false, nil): the Node was deleted.
func TestNamesakeCheckWithAFailedVCenterKeepsTheNode(t *testing.T) {
	timeout := errors.New("no answer within requestTimeout 2s: context deadline exceeded")
	for _, tc := range []struct {
		name  string
		setup func(f fakeFleet)
	}{
		{"namesake found in one vCenter, another failed", func(f fakeFleet) {
			f["vcA"].Add(namesake("dc0", "vm-1", "node-1", uuidA), nil)
		}},
		{"namesakes found in two vCenters, another failed", func(f fakeFleet) {
			f["vcA"].Add(namesake("dc0", "vm-1", "node-1", uuidA), nil)
			f["vcC"].Add(namesake("dc0", "vm-3", "node-1", uuidC), nil)
		}},
		{"no namesake elsewhere, the vCenter holding it failed", func(fakeFleet) {}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeFleet("vcA", "vcB", "vcC")
			tc.setup(f)
			f["vcB"].Add(inaccessible("dc0", "vm-7", "node-1"), nil)
			f["vcB"].FailQuery(backends.ByName, timeout)
			c := f.start(t, f.yaml("", "vcA", "vcB", "vcC"), nil)
			node := providerNode("node-1", uuidB)
			err := requireKept(t, c, node, "name search failed in vcB")
			if !strings.Contains(err.Error(), "vcB") {
				t.Fatalf("error %q does not name the vCenter that did not answer", err)
			}
			f["vcB"].FailQuery(backends.ByName, nil)
			err = requireKept(t, c, node, "inaccessible VM of the Node's name in vcB")
			if !strings.Contains(err.Error(), "inaccessible") {
				t.Fatalf("error %q does not say the namesake is inaccessible", err)
			}
			f["vcB"].Remove("vm-7")
			if ok, err := c.InstanceExists(t.Context(), node); ok || err != nil {
				t.Fatalf("every vCenter answered, no such VM: InstanceExists = %v, %v; want false, nil", ok, err)
			}
		})
	}
}

// Finding 3 (reworked when caFile stopped being checked at load, as CPI
// reads it only when connecting): a rejected config is checked again at
// every trigger, and a vCenter whose caFile is not mounted yet is
// configured at once. Before the first fix the identical file was never
// parsed again and the new vCenter stayed unconfigured.
func TestRejectedConfigIsRetriedAndMissingCAFileIsNoRejection(t *testing.T) {
	f := newFakeFleet("vcA", "vcB")
	vm := fakeVM("dc0", "vm-2", "node-b", uuidB)
	f["vcB"].Add(vm, nil)
	dir := t.TempDir()
	path := filepath.Join(dir, "vsphere.conf")
	writeAtomically(t, path, f.yaml("", "vcA"))
	opts := f.options()
	c, err := cloud.NewFromFile(path, opts)
	if err != nil {
		t.Fatal(err)
	}
	startCloud(t, c)
	ctx := t.Context()
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-b"}, Spec: v1.NodeSpec{ProviderID: "vsphere://" + uuidB}}
	bad := f.yaml("", "vcA") + "  vcB:\n    server: vcB.example.com\n    port: https\n"
	writeAtomically(t, path, bad)
	c.Reload(ctx)
	c.Reload(ctx) // the same rejected content is validated again, not skipped as applied
	if ok, err := c.InstanceExists(ctx, node); ok || err != nil {
		t.Fatalf("rejected edit: InstanceExists = %v, %v; want false, nil (vcB not configured)", ok, err)
	}
	ca := filepath.Join(dir, "ca.pem") // never written
	writeAtomically(t, path, f.yaml("", "vcA")+"  vcB:\n    server: vcB.example.com\n    caFile: "+ca+"\n")
	c.Reload(ctx)
	if ok, err := c.InstanceExists(ctx, node); !ok || err != nil {
		t.Fatalf("with its caFile not mounted yet: InstanceExists = %v, %v; want true (vcB configured)", ok, err)
	}
}

// stateClient is a fake API server holding the Nodes given.
func stateClient(nodes ...*v1.Node) *fake.Clientset {
	objs := make([]runtime.Object, 0, len(nodes))
	for _, n := range nodes {
		objs = append(objs, n)
	}
	return fake.NewClientset(objs...)
}

// Finding 2: a vCenter removed from the config keeps its Nodes across a
// restart, whatever their labels say: Nodes initialized by CPI have none
// of ours, and a kubelet can write them.
func TestRemovedVCenterKeepsItsNodesAcrossARestart(t *testing.T) {
	f := newFakeFleet("vcA", "vcB")
	inA := fakeVM("dc0", "vm-1", "node-a", uuidA)
	inB := fakeVM("dc0", "vm-2", "node-b", uuidB)
	f["vcA"].Add(inA, nil)
	f["vcB"].Add(inB, nil)
	cpiNode := func(name, uuid string, labels map[string]string) *v1.Node {
		return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}, Spec: v1.NodeSpec{ProviderID: "vsphere://" + uuid}}
	}
	plain := cpiNode("node-b", uuidB, nil)
	relabelled := cpiNode("node-b2", uuidB, map[string]string{nodes.LabelVCenter: "vcA"})
	client := stateClient(plain, relabelled)

	first := f.start(t, f.yaml("", "vcA", "vcB"), client)
	ctx := t.Context()
	waitHistory(t, client, `"vcB"`)
	if ok, err := first.InstanceExists(ctx, plain); !ok || err != nil {
		t.Fatalf("both vCenters configured: %v, %v", ok, err)
	}
	stopCloud(t, first)

	// The CCM restarts with vcB removed from its config (new backends:
	// the old process logged out).
	f2 := newFakeFleet("vcA", "vcB") // vcB is never asked again
	f2["vcA"].Add(inA, nil)
	second := f2.start(t, f2.yaml("  retiredVCenterRetention: 3s\n", "vcA"), client)
	// Until the record is read absence is an error too; then the error
	// names what could hold the VM.
	waitHistory(t, client, `"retired"`)
	for _, n := range []*v1.Node{plain, relabelled} {
		eventually(t, "the error to name the removed vCenter", func() bool {
			return strings.Contains(requireKept(t, second, n, "vcB removed from the config before a restart").Error(), "vcenter vcB at vcb.example.com:443 (left the config")
		})
	}
	if f2["vcB"].Calls() != 0 {
		t.Fatal("a removed vCenter was asked")
	}
	// A VM this process saw in a vCenter still configured, destroyed
	// there: while vcB is remembered it could hold it (moved there, or a
	// twin), so its Node is kept; once vcB is forgotten, it goes.
	nodeA := cpiNode("node-a", uuidA, nil)
	if ok, err := second.InstanceExists(ctx, nodeA); !ok || err != nil {
		t.Fatalf("VM in vcA: %v, %v", ok, err)
	}
	f2["vcA"].Remove("vm-1")
	if err := requireKept(t, second, nodeA, "seen in vcA, destroyed there, vcB remembered"); !strings.Contains(err.Error(), "vcenter vcB") {
		t.Fatalf("error %q does not name the remembered vCenter", err)
	}
	eventually(t, "vcB's retirement to expire", func() bool {
		ok, err := second.InstanceExists(ctx, nodeA)
		return !ok && err == nil
	})
}

// waitHistory waits until the provider's record of the vCenters it served
// holds want.
func waitHistory(t *testing.T, client kubernetes.Interface, want string) {
	t.Helper()
	eventually(t, "the config history to hold "+want, func() bool {
		cm, err := client.CoreV1().ConfigMaps("kube-system").Get(t.Context(), cloud.DefaultHistoryObject, metav1.GetOptions{})
		return err == nil && strings.Contains(cm.Data["vcenters.json"], want)
	})
}

// stopCloud stops c as a process exit would (its Start's stop channel
// stays open until the test ends; Stop logs out).
func stopCloud(t *testing.T, c *cloud.Cloud) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	c.Stop(ctx)
}

// A Node that failed its lookup while its vCenter was down is retried as
// soon as the vCenter is back, not at the controller's next backoff step:
// every Node still uninitialized is touched (an annotation), which
// re-queues it in the cloud-node controller.
func TestUninitializedNodesAreRequeuedWhenAVCenterComesBack(t *testing.T) {
	f := newFakeFleet("vcA", "vcB")
	f["vcB"].SetReachability(backends.ConnDown, errors.New("dial tcp: connection refused"))
	f["vcB"].Fail(errors.New("dial tcp: connection refused"))
	tainted := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "waiting"}, Spec: v1.NodeSpec{Taints: []v1.Taint{
		{Key: "node.cloudprovider.kubernetes.io/uninitialized", Value: "true", Effect: v1.TaintEffectNoSchedule},
	}}}
	ready := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "initialized"}, Spec: v1.NodeSpec{ProviderID: "vsphere://" + uuidA}}
	client := stateClient(tainted, ready)
	f.start(t, f.yaml("", "vcA", "vcB"), client, func(o *cloud.Options) { o.RecoveryPoll = 20 * time.Millisecond })
	annotation := func(name string) string {
		n, err := client.CoreV1().Nodes().Get(t.Context(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return n.Annotations[nodes.AnnotationLookupRetry]
	}
	time.Sleep(200 * time.Millisecond) // ten polls with vcB down
	if a := annotation("waiting"); a != "" {
		t.Fatalf("re-queued while vcB is still down (%s)", a)
	}
	f["vcB"].Fail(nil)
	f["vcB"].SetReachability(backends.ConnUp, nil)
	eventually(t, "the uninitialized Node to be re-queued", func() bool { return annotation("waiting") != "" })
	if a := annotation("initialized"); a != "" {
		t.Fatalf("an initialized Node was touched: %s", a)
	}
}

// Location labels name every vCenter, also one whose name is no valid
// label value (an INI section named by an IPv6 server, a long name), and
// are added to initialized Nodes that lack them (initialized by CPI).
func TestLocationLabelsAreEncodedAndBackfilled(t *testing.T) {
	const v6 = "fd00::10"
	long := strings.Repeat("vcenter-", 9) // 72 characters
	f := fakeFleet{v6: backendtest.New(), long: backendtest.New()}
	f[v6].Add(fakeVM("DC 1", "vm-1", "node-6", uuidA), nil)
	f[long].Add(fakeVM("dc0", "vm-2", "node-l", uuidB), nil)
	cpiInitialized := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-6"}, Spec: v1.NodeSpec{ProviderID: "vsphere://" + uuidA}}
	client := stateClient(cpiInitialized)
	c := f.start(t, "global:\n  user: u\n  password: p\nvcenter:\n  \""+v6+"\":\n    server: \""+v6+"\"\n  "+long+":\n    server: long.example.com\n", client)
	ctx := t.Context()
	md, err := c.InstanceMetadata(ctx, cpiInitialized)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range md.AdditionalLabels {
		if errs := validation.IsValidLabelValue(v); len(errs) > 0 {
			t.Fatalf("label %s=%q is not a valid label value: %v", k, v, errs)
		}
	}
	if md.AdditionalLabels[nodes.LabelVCenter] == "" || md.AdditionalLabels[nodes.LabelDatacenter] == "" {
		t.Fatalf("labels %v: want both location labels", md.AdditionalLabels)
	}
	// Backfilled by the nodes owner, after the lookup.
	var got *v1.Node
	eventually(t, "the location labels backfilled on node-6", func() bool {
		got, err = client.CoreV1().Nodes().Get(ctx, "node-6", metav1.GetOptions{})
		if err != nil {
			return false
		}
		for k, v := range md.AdditionalLabels {
			if got.Labels[k] != v {
				return false
			}
		}
		return true
	})
	md, err = c.InstanceMetadata(ctx, kubeletNode("node-l", uuidB))
	if err != nil || md.AdditionalLabels[nodes.LabelVCenter] == "" || len(validation.IsValidLabelValue(md.AdditionalLabels[nodes.LabelVCenter])) > 0 {
		t.Fatalf("long vCenter name: labels %v, %v", md, err)
	}
	// The encoded label still protects: with the vCenter gone from the
	// config, the Node it names is kept.
	gone := newFakeFleet("vcA")
	c2 := gone.start(t, gone.yaml("", "vcA"), nil)
	if err := requireKept(t, c2, got, "its label names a vCenter no longer configured"); !strings.Contains(err.Error(), "no longer configured") {
		t.Fatalf("error %q does not say its vCenter left the config", err)
	}
}

// A BIOS UUID that appears in a second vCenter is reported on its Node at
// once (an Event), without waiting for a lookup to stumble on it.
func TestTwinVMIsReportedOnItsNode(t *testing.T) {
	f := newFakeFleet("vcA", "vcB")
	f["vcA"].Add(fakeVM("dc0", "vm-1", "node-a", uuidA), nil)
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a"}, Spec: v1.NodeSpec{ProviderID: "vsphere://" + uuidA}}
	client := stateClient(node)
	f.start(t, f.yaml("", "vcA", "vcB"), client, func(o *cloud.Options) {
		o.RecoveryPoll = 20 * time.Millisecond
		o.DuplicateScan = 20 * time.Millisecond
	})
	time.Sleep(100 * time.Millisecond)
	f["vcB"].Add(fakeVM("dc1", "vm-9", "clone-of-a", uuidA), nil)
	eventually(t, "a DuplicateVMUUID Event on node-a", func() bool {
		evs, err := client.CoreV1().Events("").List(t.Context(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range evs.Items {
			if e.Reason == nodes.ReasonDuplicateUUID && e.InvolvedObject.Name == "node-a" && strings.Contains(e.Message, "vcB") {
				return true
			}
		}
		return false
	})
}

// CPI's SKIP_NODE_DELETION: a VM confirmed absent keeps its Node.
func TestSkipNodeDeletionKeepsNodesOfDestroyedVMs(t *testing.T) {
	f := newFakeFleet("vcA")
	node := providerNode("gone", uuidA)
	plain := f.start(t, f.yaml("", "vcA"), nil)
	if ok, err := plain.InstanceExists(t.Context(), node); ok || err != nil {
		t.Fatalf("without the switch: InstanceExists = %v, %v; want false, nil", ok, err)
	}
	c := f.start(t, f.yaml("", "vcA"), nil, func(o *cloud.Options) { o.SkipNodeDeletion = true })
	if err := requireKept(t, c, node, "SKIP_NODE_DELETION set"); !strings.Contains(err.Error(), "SKIP_NODE_DELETION") {
		t.Fatalf("error %q does not name the switch", err)
	}
}

// Finding 9: a Secret renamed or dropped by a config edit stops being
// watched, and a secretsDirectory changed by an edit is watched (before,
// the directory named at start was watched for ever, and a later one never).
func TestConfigEditsMoveWatches(t *testing.T) {
	f := newFakeFleet("vcA", "vcB")
	secretFor := func(name string) *v1.Secret {
		return &v1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: name}, Data: map[string][]byte{
			"vcA.example.com.username": []byte("ccm"), "vcA.example.com.password": []byte("pw"),
			"vcB.example.com.username": []byte("ccm"), "vcB.example.com.password": []byte("pw"),
		}}
	}
	client := fake.NewClientset(secretFor("old-creds"), secretFor("new-creds"))
	watches := countSecretWatches(client)
	dir := t.TempDir()
	path := filepath.Join(dir, "vsphere.conf")
	withSecret := func(name string) string {
		return "global:\n  secretName: " + name + "\n  secretNamespace: kube-system\nvcenter:\n  vcA:\n    server: vcA.example.com\n"
	}
	writeAtomically(t, path, withSecret("old-creds"))
	c, err := cloud.NewFromFile(path, f.options())
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop); stopCloud(t, c) })
	startLeader(c, client, stop)
	ctx := t.Context()
	// A lookup reads the credentials through the Secret's informer.
	f["vcA"].Add(fakeVM("dc0", "vm-1", "node-a", uuidA), nil)
	c.Reload(ctx)
	eventually(t, "the informer of old-creds", func() bool { return watches.open("kube-system/old-creds") > 0 })
	writeAtomically(t, path, withSecret("new-creds"))
	c.Reload(ctx)
	eventually(t, "the informer of new-creds", func() bool { return watches.open("kube-system/new-creds") > 0 })
	eventually(t, "the old Secret's informer to stop", func() bool { return watches.open("kube-system/old-creds") == 0 })

	// The secrets directory: an edit that names one is watched, so a
	// rotated file is picked up without a restart.
	secrets := filepath.Join(dir, "secrets")
	if err := os.Mkdir(secrets, 0o700); err != nil {
		t.Fatal(err)
	}
	writeAtomically(t, path, "global:\n  secretsDirectory: "+secrets+"\nvcenter:\n  vcA:\n    server: vcA.example.com\n")
	c.Reload(ctx)
	before := reloadsSeen(t, client)
	if err := os.WriteFile(filepath.Join(secrets, "vcA.example.com.password"), []byte("rotated"), 0o600); err != nil {
		t.Fatal(err)
	}
	eventually(t, "a change in the new secrets directory to trigger a reload", func() bool { return reloadsSeen(t, client) > before })
}

// secretWatches counts the watches of each Secret ("namespace/name") open
// through a fake client: an informer holds one while it runs.
type secretWatches struct {
	mu      sync.Mutex
	counted map[string]int
}

func (s *secretWatches) open(secret string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.counted[secret]
}

// countSecretWatches serves client's watches of Secrets as its own
// tracker does, counting those open by the Secret their field selector
// names.
func countSecretWatches(client *fake.Clientset) *secretWatches {
	s := &secretWatches{counted: map[string]int{}}
	client.PrependWatchReactor("secrets", func(a k8stesting.Action) (bool, watch.Interface, error) {
		var opts metav1.ListOptions
		if wa, ok := a.(k8stesting.WatchActionImpl); ok {
			opts = wa.ListOptions
		}
		w, err := client.Tracker().Watch(a.GetResource(), a.GetNamespace(), opts)
		if err != nil {
			return false, nil, err
		}
		name, _ := a.(k8stesting.WatchAction).GetWatchRestrictions().Fields.RequiresExactMatch("metadata.name")
		key := a.GetNamespace() + "/" + name
		s.mu.Lock()
		s.counted[key]++
		s.mu.Unlock()
		var once sync.Once
		return true, &stoppedWatch{Interface: w, stopped: func() {
			once.Do(func() {
				s.mu.Lock()
				defer s.mu.Unlock()
				s.counted[key]--
			})
		}}, nil
	})
	return s
}

// stoppedWatch calls stopped when its watcher stops it.
type stoppedWatch struct {
	watch.Interface
	stopped func()
}

func (w *stoppedWatch) Stop() {
	w.stopped()
	w.Interface.Stop()
}

// reloadsSeen counts the provider's reloads by their reads of its history
// ConfigMap (every reload records the history).
func reloadsSeen(t *testing.T, client *fake.Clientset) int {
	t.Helper()
	n := 0
	for _, a := range client.Actions() {
		if a.GetVerb() == "get" && a.GetResource().Resource == "configmaps" {
			n++
		}
	}
	return n
}

// A vCenter removed by an edit is retired the moment the edit applies,
// before any record is written (none is, without an API server): a Node of
// it that was never looked up and has no labels is kept.
func TestRemovedVCenterIsRetiredAtOnce(t *testing.T) {
	f := newFakeFleet("vcA", "vcB")
	f["vcB"].Add(fakeVM("dc0", "vm-2", "node-b", uuidB), nil)
	path := filepath.Join(t.TempDir(), "vsphere.conf")
	writeAtomically(t, path, f.yaml("", "vcA", "vcB"))
	c, err := cloud.NewFromFile(path, f.options())
	if err != nil {
		t.Fatal(err)
	}
	startCloud(t, c)
	writeAtomically(t, path, f.yaml("", "vcA"))
	c.Reload(t.Context())
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-b"}, Spec: v1.NodeSpec{ProviderID: "vsphere://" + uuidB}}
	if err := requireKept(t, c, node, "vcB removed by an edit"); !strings.Contains(err.Error(), "vcenter vcB at vcb.example.com:443 (left the config") {
		t.Fatalf("error %q does not name the removed vCenter", err)
	}
}
