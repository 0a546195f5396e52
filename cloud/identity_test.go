package cloud_test

// Issue 20: paths to a wrongful deletion that are about identity, not the
// network — which vCenter a name means, which machine a Node is, which
// UUID a providerID names, what the history remembers.

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/backends"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/cloud"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/cloud/nodes"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config/credentials"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/discovery"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/test/backendtest"
)

// servers are fake vCenters by server address: what a config name points
// to is the config's business.
type servers map[string]*backendtest.Backend

func (s servers) options() cloud.Options {
	return cloud.Options{NewBackend: func(vc config.VCenter, _ credentials.Source) backends.Backend {
		return session{s[vc.Server]}
	}}
}

// session is one process's view of a fake vCenter: closing it (a replaced
// backend, a process stopping) leaves the vCenter to the next process.
type session struct{ *backendtest.Backend }

func (session) Close(context.Context) error { return nil }

// config names each vCenter by name → server.
func (servers) config(extraGlobal string, names ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "global:\n  user: ccm\n  password: pw\n  requestTimeout: 2s\n%s  nodeDeletion: {minAbsence: 0s}\nvcenter:\n", extraGlobal)
	for _, n := range names {
		name, server, _ := strings.Cut(n, "=")
		fmt.Fprintf(&b, "  %s:\n    server: %s\n", name, server)
	}
	return b.String()
}

// Path 1: `vcenter.east.server` changed from the old appliance to a new
// one. The old server still holds the VMs and is never asked again, so
// none of them is gone. Before the fix the history, the location cache and
// the labels identified a vCenter by its name: nothing was retired, and
// every Node of the old server was deleted — in the running process and
// after a restart.
func TestRepointedVCenterNameKeepsTheOldServersNodes(t *testing.T) {
	s := servers{"old.example.com": backendtest.New(), "new.example.com": backendtest.New(), "west.example.com": backendtest.New()}
	seen := fakeVM("dc0", "vm-1", "node-seen", uuidA)
	unseen := fakeVM("dc0", "vm-2", "node-unseen", uuidB)
	s["old.example.com"].Add(seen, nil)
	s["old.example.com"].Add(unseen, nil)
	// The new appliance reuses the reference vm-1 for another VM.
	s["new.example.com"].Add(fakeVM("dc0", "vm-1", "someone-else", uuidC), nil)
	client := fake.NewClientset()
	path := filepath.Join(t.TempDir(), "vsphere.conf")
	writeAtomically(t, path, s.config("", "east=old.example.com", "west=west.example.com"))
	c, err := cloud.NewFromFile(path, s.options())
	if err != nil {
		t.Fatal(err)
	}
	startWith(t, c, client)
	ctx := t.Context()
	waitHistory(t, client, `"old.example.com"`)
	seenNode, unseenNode := providerNode("node-seen", uuidA), providerNode("node-unseen", uuidB)
	md, err := c.InstanceMetadata(ctx, seenNode)
	if err != nil {
		t.Fatal(err)
	}
	if got := md.AdditionalLabels[nodes.LabelServer]; got != "old.example.com" {
		t.Fatalf("label %s = %q; want the server", nodes.LabelServer, got)
	}
	labelled := providerNode("node-labelled", uuidA)
	labelled.Labels = md.AdditionalLabels

	writeAtomically(t, path, s.config("", "east=new.example.com", "west=west.example.com"))
	c.Reload(ctx)
	for _, n := range []*v1.Node{seenNode, unseenNode, labelled} {
		if err := requireKept(t, c, n, "east repointed to new.example.com"); !strings.Contains(err.Error(), "old.example.com") {
			t.Fatalf("%s: error %q does not name the old server", n.Name, err)
		}
	}
	waitHistory(t, client, `"server": "new.example.com"`)

	// After a restart, the record alone keeps them.
	stopCloud(t, c)
	again, err := cloud.NewFromFile(path, s.options())
	if err != nil {
		t.Fatal(err)
	}
	startWith(t, again, client)
	for _, n := range []*v1.Node{seenNode, unseenNode} {
		eventually(t, n.Name+" kept by the record after a restart", func() bool {
			_, err := again.InstanceExists(ctx, n)
			return err != nil && strings.Contains(err.Error(), "old.example.com")
		})
	}

	// The server label outlasts any record: with none (a record lost, or
	// its retirement expired), the labelled Node is still kept, while an
	// unlabelled one is judged on the servers configured.
	stopCloud(t, again)
	forgotten, err := cloud.NewFromFile(path, s.options())
	if err != nil {
		t.Fatal(err)
	}
	startWith(t, forgotten, fake.NewClientset())
	eventually(t, "the empty record read", func() bool {
		ok, err := forgotten.InstanceExists(ctx, unseenNode)
		return !ok && err == nil
	})
	if err := requireKept(t, forgotten, labelled, "labelled with the old server"); !strings.Contains(err.Error(), "server old.example.com") {
		t.Fatalf("error %q does not name the labelled server", err)
	}
}

// startWith starts c with client; stopped at cleanup.
func startWith(t *testing.T, c *cloud.Cloud, client *fake.Clientset) {
	t.Helper()
	stop := make(chan struct{})
	startLeader(c, client, stop)
	t.Cleanup(func() { close(stop); stopCloud(t, c) })
}

// Path 2: a Node without providerID whose system UUID no vCenter holds —
// a bare-metal or other-cloud machine beside the VMs (CPI#1528) — is
// never judged absent; nor is a Node with another provider's ID. Before
// the fix the bare-metal Node was deleted the moment it went NotReady.
func TestNodeThatIsNoVMIsNeverDeleted(t *testing.T) {
	f := newFakeFleet("vcA", "vcB")
	f["vcA"].Add(fakeVM("dc0", "vm-1", "node-a", uuidA), nil)
	c := f.start(t, f.yaml("", "vcA", "vcB"), nil)
	for _, n := range []*v1.Node{
		kubeletNode("bare-metal-1", "4c4c4544-0042-3510-8052-b4c04f4e4e32"),
		{ObjectMeta: metav1.ObjectMeta{Name: "aws-1"}, Spec: v1.NodeSpec{ProviderID: "aws:///us-east-1a/i-0123456789abcdef0"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "no-keys"}},
	} {
		_ = requireKept(t, c, n, "a Node that is no VM of ours")
	}
	if err := requireKept(t, c, kubeletNode("bare-metal-2", "4c4c4544-0042-3510-8052-b4c04f4e4e33"), "bare metal"); !errors.Is(err, discovery.ErrNoProviderID) {
		t.Fatalf("error %v; want ErrNoProviderID", err)
	}
	// It is still found, and initialized, when a VM has its UUID.
	if md, err := c.InstanceMetadata(t.Context(), kubeletNode("node-a", discovery.SwapByteOrder(uuidA))); err != nil || md.ProviderID != "vsphere://"+uuidA {
		t.Fatalf("InstanceMetadata(system UUID of a VM) = %+v, %v", md, err)
	}
}

// Path 3: a providerID in the kubelet's byte order (set from product_uuid
// by some kubelets) names the VM whose BIOS UUID is its swap. Before the
// fix such a Node never initialized, and was deleted once NotReady.
func TestProviderIDInTheKubeletsByteOrderKeepsTheNode(t *testing.T) {
	f := newFakeFleet("vcA")
	f["vcA"].Add(fakeVM("dc0", "vm-1", "node-a", uuidA), nil)
	c := f.start(t, f.yaml("", "vcA"), nil)
	node := providerNode("node-a", discovery.SwapByteOrder(uuidA))
	if ok, err := c.InstanceExists(t.Context(), node); !ok || err != nil {
		t.Fatalf("InstanceExists(providerID in the kubelet's order) = %v, %v; want true", ok, err)
	}
	if md, err := c.InstanceMetadata(t.Context(), node); err != nil || md.ProviderID != "vsphere://"+uuidA {
		t.Fatalf("InstanceMetadata = %+v, %v; want the VM's own providerID", md, err)
	}
	f["vcA"].Remove("vm-1")
	if ok, err := c.InstanceExists(t.Context(), node); ok || err != nil {
		t.Fatalf("VM destroyed: InstanceExists = %v, %v; want false, nil", ok, err)
	}
}

// Path 4: an edit that removes a vCenter retires it in memory; the same
// reload read back a record that never listed the vCenter as served (an
// earlier write failed, with an error other than a conflict) and replaced
// the history in memory with it. The retirement was gone within the reload
// that made it, and an unlabelled Node of that vCenter became deletable.
func TestFailedHistoryWriteKeepsTheRetirement(t *testing.T) {
	f := newFakeFleet("vcA", "vcB")
	f["vcB"].Add(fakeVM("dc0", "vm-2", "node-b", uuidB), nil)
	f["vcB"].Add(fakeVM("dc0", "vm-3", "node-c", uuidC), nil)
	client := fake.NewClientset()
	var failing atomic.Bool
	failing.Store(true)
	client.PrependReactor("*", "configmaps", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if failing.Load() && (a.GetVerb() == "create" || a.GetVerb() == "update") {
			return true, nil, apierrors.NewServiceUnavailable("etcd is compacting")
		}
		return false, nil, nil
	})
	path := filepath.Join(t.TempDir(), "vsphere.conf")
	writeAtomically(t, path, f.yaml("", "vcA"))
	c, err := cloud.NewFromFile(path, f.options())
	if err != nil {
		t.Fatal(err)
	}
	startWith(t, c, client)
	ctx := t.Context()
	writeAtomically(t, path, f.yaml("", "vcA", "vcB")) // added; not recorded
	c.Reload(ctx)
	node := providerNode("node-b", uuidB)
	if ok, err := c.InstanceExists(ctx, node); !ok || err != nil {
		t.Fatalf("vcB configured: %v, %v", ok, err)
	}
	writeAtomically(t, path, f.yaml("", "vcA")) // removed; not recorded
	c.Reload(ctx)
	c.Reload(ctx) // and the record read again, still failing to write
	// A Node whose VM no lookup has found (or not within the location
	// TTL): only the history keeps it.
	other := providerNode("node-c", uuidC)
	_ = requireKept(t, c, other, "vcB removed while the record could not be written")
	// Once a write succeeds, what it writes still holds the retirement
	// (before the fix the record read back replaced it, and was written).
	failing.Store(false)
	c.Reload(ctx)
	waitHistory(t, client, `"vcenter": "vcB"`)
	if err := requireKept(t, c, other, "vcB's retirement recorded"); !strings.Contains(err.Error(), "vcenter vcB") {
		t.Fatalf("error %q does not name the removed vCenter", err)
	}
}
