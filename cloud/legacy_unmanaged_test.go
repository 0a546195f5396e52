package cloud_test

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	k8stesting "k8s.io/client-go/testing"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/cloud"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/cloud/nodes"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/discovery"
)

// cutoffKey is the state ConfigMap's key of the legacy label's cutoff.
const cutoffKey = "legacyUnmanagedCutoff"

// legacyNode is a Node initialized with the VM of BIOS UUID uuid, created
// at created, carrying the legacy opt-out key alone: a Node an operator
// labelled for earlier versions (its VM in a vCenter this CCM is not
// configured for, or one another tool manages).
func legacyNode(name, uuid string, created time.Time) *v1.Node {
	n := providerNode(name, uuid)
	n.Labels = map[string]string{legacyKey: "true"}
	n.CreationTimestamp = metav1.NewTime(created)
	n.UID = types.UID("uid-" + name)
	n.Status.Addresses = []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "192.0.2.9"}}
	return n
}

// existsUntil asks InstanceExists(node) until done accepts the answer,
// and fails the test at once on (false, nil): the Node deleted.
func existsUntil(t *testing.T, c *cloud.Cloud, node *v1.Node, what string, done func(bool, error) bool) {
	t.Helper()
	eventually(t, what, func() bool {
		ok, err := c.InstanceExists(t.Context(), node)
		if !ok && err == nil {
			t.Fatalf("InstanceExists(%s) = false, nil: the Node is deleted (%s)", node.Name, what)
		}
		return done(ok, err)
	})
}

// The upgrade: a Node its operator opted out with the legacy key, before
// this version, whose VM no configured vCenter holds. Earlier versions
// left it alone; bfc2afd ignored the key, looked the VM up, found it
// absent everywhere and answered (false, nil): the upgrade deleted it.
// Created before this version first ran, it is still left alone, from
// the first ask on (before the cutoff is read too).
func TestLegacyLabelFromBeforeTheUpgradeKeepsItsNode(t *testing.T) {
	f := newFakeFleet("vcA") // holds no VM of uuidB
	node := legacyNode("elsewhere", uuidB, time.Now().Add(-24*time.Hour))
	client := stateClient(node)
	c := f.start(t, f.yaml("", "vcA"), client)
	existsUntil(t, c, node, "the legacy key honoured", func(ok bool, err error) bool { return ok && err == nil })
	c.Reload(t.Context()) // the state read again: still honoured
	if ok, err := c.InstanceExists(t.Context(), node); !ok || err != nil {
		t.Fatalf("InstanceExists(%s) = %v, %v; want true, nil (left alone)", node.Name, ok, err)
	}
}

// cutoffIn is the cutoff the state ConfigMap holds ("" when none).
func cutoffIn(t *testing.T, client kubernetes.Interface) string {
	t.Helper()
	cm, err := client.CoreV1().ConfigMaps("kube-system").Get(t.Context(), cloud.DefaultHistoryObject, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return ""
	}
	if err != nil {
		t.Fatal(err)
	}
	return cm.Data[cutoffKey]
}

// waitCutoff waits for the state ConfigMap to hold a cutoff, and returns
// it.
func waitCutoff(t *testing.T, client kubernetes.Interface) time.Time {
	t.Helper()
	var v string
	eventually(t, "the cutoff written", func() bool { v = cutoffIn(t, client); return v != "" })
	at, err := time.Parse(time.RFC3339, v)
	if err != nil {
		t.Fatalf("cutoff %q: %v", v, err)
	}
	return at
}

// seedCutoff makes the state ConfigMap hold the cutoff at, as a leader of
// this version wrote it before.
func seedCutoff(t *testing.T, client kubernetes.Interface, at time.Time) {
	t.Helper()
	cm := &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: cloud.DefaultHistoryObject},
		Data: map[string]string{cutoffKey: at.UTC().Format(time.RFC3339)}}
	if _, err := client.CoreV1().ConfigMaps("kube-system").Create(t.Context(), cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// Honoured, the legacy key leaves its Node alone as earlier versions did:
// no lookup, its own providerID and addresses, NodeUnmanaged naming the
// key and the cutoff, and a Warning with the command that sets the key
// kubelets cannot set. The cutoff is the first leader's start.
func TestLegacyLabelFromBeforeTheCutoffIsLeftAlone(t *testing.T) {
	f := newFakeFleet("vcA")
	f["vcA"].Add(fakeVM("dc0", "vm-1", "metal-old", uuidA), nil) // whose identity it must not get
	node := legacyNode("metal-old", uuidA, time.Now().Add(-time.Hour))
	node.Spec.ProviderID = "metal://rack1/metal-old"
	node.Status.NodeInfo.SystemUUID = uuidA
	client := stateClient(node)
	started := time.Now()
	c := f.start(t, f.yaml("", "vcA"), client)
	at := waitCutoff(t, client)
	if at.Before(started.Truncate(time.Second)) || at.After(time.Now().Add(time.Second)) {
		t.Fatalf("cutoff %s; want the start, %s", at, started)
	}
	existsUntil(t, c, node, "the legacy key honoured", func(ok bool, err error) bool { return ok && err == nil })
	calls := f["vcA"].Calls() + f["vcA"].CachedCalls()
	md, err := c.InstanceMetadata(t.Context(), node)
	if err != nil || md == nil || md.ProviderID != node.Spec.ProviderID || !slices.Equal(md.NodeAddresses, node.Status.Addresses) || len(md.AdditionalLabels) > 0 {
		t.Fatalf("InstanceMetadata = %+v, %v; want its own providerID and addresses (unmanaged)", md, err)
	}
	if got := f["vcA"].Calls() + f["vcA"].CachedCalls() - calls; got != 0 {
		t.Fatalf("%d vCenter calls for an unmanaged Node; want 0", got)
	}
	if why := c.Unmanaged(node); !strings.Contains(why, legacyKey) || !strings.Contains(why, at.UTC().Format(time.RFC3339)) {
		t.Fatalf("Unmanaged = %q; want the legacy key and the cutoff", why)
	}
	eventWith(t, client, node.Name, nodes.ReasonNodeUnmanaged, legacyKey)
	eventWith(t, client, node.Name, nodes.ReasonUnmanagedLabelLegacy, "kubectl label node metal-old "+unmanagedKey+"=true")
	noEvent(t, client, node.Name, nodes.ReasonUnmanagedLabelIgnored)
}

// Created at or after the cutoff, the legacy key alone is a kubelet's to
// set: the Node is managed, its VM confirmed absent reports it absent as
// any managed Node's, and it gets UnmanagedLabelIgnored. Just before, it
// is honoured. A Node without a creationTimestamp cannot be placed: never
// reported absent.
func TestLegacyLabelFromTheCutoffOnIsIgnored(t *testing.T) {
	f := newFakeFleet("vcA")
	cutoff := time.Now().Add(-time.Hour).UTC().Truncate(time.Second)
	before := legacyNode("before", uuidA, cutoff.Add(-time.Second))
	at := legacyNode("at", uuidB, cutoff)
	after := legacyNode("after", uuidC, time.Now())
	undated := legacyNode("undated", uuidC, time.Time{})
	client := stateClient(before, at, after, undated)
	seedCutoff(t, client, cutoff)
	c := f.start(t, f.yaml("", "vcA"), client)
	for _, n := range []*v1.Node{at, after} {
		eventually(t, "InstanceExists("+n.Name+") = false, nil", func() bool {
			ok, err := c.InstanceExists(t.Context(), n)
			return !ok && err == nil
		})
		if why := c.Unmanaged(n); why != "" {
			t.Fatalf("Unmanaged(%s) = %q; want \"\"", n.Name, why)
		}
		eventWith(t, client, n.Name, nodes.ReasonUnmanagedLabelIgnored, legacyKey, "kubectl label node "+n.Name+" "+unmanagedKey+"=true")
	}
	if ok, err := c.InstanceExists(t.Context(), before); !ok || err != nil {
		t.Fatalf("InstanceExists(before) = %v, %v; want true, nil: created before the cutoff", ok, err)
	}
	for range 3 {
		_, err := c.InstanceExists(t.Context(), undated)
		if err == nil || !strings.Contains(err.Error(), "no creationTimestamp") {
			t.Fatalf("InstanceExists(undated) = _, %v; want an error naming the missing creationTimestamp", err)
		}
	}
	if cutoffIn(t, client) != cutoff.Format(time.RFC3339) {
		t.Fatalf("cutoff %q; want the one recorded, %s", cutoffIn(t, client), cutoff)
	}
}

// The cutoff not written (the update forbidden: RBAC without it) leaves
// it unknown, the record of the vCenters being read and current all the
// same. Meanwhile a Node with the legacy key alone is looked up for its
// metadata — its VM's providerID and addresses, not its kubelet's — and
// never reported absent: InstanceExists answers an error naming the key
// and why, while a Node without the key whose VM is gone is reported
// absent (the record is known). Once the write is allowed, the retry
// records it and the rule applies.
func TestLegacyLabelWhileTheCutoffIsUnknown(t *testing.T) {
	f := newFakeFleet("vcA")
	f["vcA"].Add(fakeVM("dc0", "vm-1", "present", uuidA), nil)
	old := time.Now().Add(-time.Hour)
	present := legacyNode("present", uuidA, old)
	present.Spec.ProviderID = ""
	present.Spec.Taints = uninitializedTaint()
	present.Status.NodeInfo.SystemUUID = uuidA
	gone := legacyNode("gone", uuidB, old)
	plain := providerNode("plain", uuidC)
	client := stateClient(present, gone, plain)
	// The record as an earlier version left it: written, no cutoff.
	first := f.start(t, f.yaml("", "vcA"), client)
	waitCutoff(t, client)
	stopCloud(t, first)
	cm, err := client.CoreV1().ConfigMaps("kube-system").Get(t.Context(), cloud.DefaultHistoryObject, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	delete(cm.Data, cutoffKey)
	if _, err := client.CoreV1().ConfigMaps("kube-system").Update(t.Context(), cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	var forbidden atomic.Bool
	forbidden.Store(true)
	client.PrependReactor("update", "configmaps", func(k8stesting.Action) (bool, runtime.Object, error) {
		if forbidden.Load() {
			return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "configmaps"}, cloud.DefaultHistoryObject, nil)
		}
		return false, nil, nil
	})
	// Restarted: vCenters of its own (the first one's logged out).
	f = newFakeFleet("vcA")
	f["vcA"].Add(fakeVM("dc0", "vm-1", "present", uuidA), nil)
	c := f.start(t, f.yaml("", "vcA"), client)
	ctx := t.Context()
	eventually(t, "InstanceExists(plain) = false, nil (the record known)", func() bool {
		ok, err := c.InstanceExists(ctx, plain)
		return !ok && err == nil
	})
	for range 5 {
		_, err := c.InstanceExists(ctx, gone)
		if err == nil || !strings.Contains(err.Error(), legacyKey) || !strings.Contains(err.Error(), "forbidden") {
			t.Fatalf("InstanceExists(gone) = _, %v; want an error naming %s and why the cutoff is not known", err, legacyKey)
		}
		time.Sleep(20 * time.Millisecond)
	}
	md, err := c.InstanceMetadata(ctx, present)
	if err != nil || md == nil || md.ProviderID != discovery.ProviderID(uuidA) || slices.Equal(md.NodeAddresses, present.Status.Addresses) {
		t.Fatalf("InstanceMetadata(present) = %+v, %v; want its VM's providerID and addresses, not its kubelet's", md, err)
	}
	eventWith(t, client, "gone", nodes.ReasonUnmanagedLabelUndecided, legacyKey, "never reported deleted", "forbidden", "kubectl label node gone "+unmanagedKey+"=true")
	if v := cutoffIn(t, client); v != "" {
		t.Fatalf("cutoff %q written through a forbidden update", v)
	}
	forbidden.Store(false) // the RBAC fixed: the retry writes it
	waitCutoff(t, client)
	existsUntil(t, c, gone, "the legacy key honoured once the cutoff is written", func(ok bool, err error) bool { return ok && err == nil })
}

// The cutoff is written once: a later save of the record (an edit adds a
// vCenter) keeps it, and a restart neither moves it nor forgets it — a
// Node created at the first cutoff is still judged by it.
func TestLegacyCutoffIsWrittenOnceAndKept(t *testing.T) {
	f := newFakeFleet("vcA", "vcB") // for the config only
	client := stateClient()
	path := filepath.Join(t.TempDir(), "vsphere.conf")
	writeAtomically(t, path, f.yaml("", "vcA"))
	startFile := func() *cloud.Cloud {
		// vCenters of its own: a stopped one logs its backends out.
		c, err := cloud.NewFromFile(path, newFakeFleet("vcA", "vcB").options())
		if err != nil {
			t.Fatal(err)
		}
		startWith(t, c, client)
		return c
	}
	first := startFile()
	cutoff := waitCutoff(t, client)
	writeAtomically(t, path, f.yaml("", "vcA", "vcB"))
	first.Reload(t.Context())
	waitHistory(t, client, `"vcB"`)
	if got := waitCutoff(t, client); !got.Equal(cutoff) {
		t.Fatalf("the record saved again: cutoff %s; want %s kept", got, cutoff)
	}
	stopCloud(t, first)
	time.Sleep(time.Until(cutoff.Add(1100 * time.Millisecond))) // a later start would stamp a later second
	second := startFile()
	node := legacyNode("at", uuidC, cutoff) // no VM anywhere
	// Created at the first cutoff: ignored (a VM gone is its Node gone);
	// a cutoff moved to the restart would honour it.
	eventually(t, "the restarted CCM to judge by the first cutoff", func() bool {
		ok, err := second.InstanceExists(t.Context(), node)
		if ok {
			t.Fatalf("InstanceExists(at) = true, %v: the restart moved the cutoff past %s", err, cutoff)
		}
		return err == nil
	})
	if got := waitCutoff(t, client); !got.Equal(cutoff) {
		t.Fatalf("after a restart: cutoff %s; want %s", got, cutoff)
	}
}

// A standby reads the cutoff and never writes it: until it leads, a Node
// with the legacy key alone is never reported absent; leading, it writes
// the cutoff, and the rule applies.
func TestStandbyDoesNotWriteTheCutoff(t *testing.T) {
	f := newFakeFleet("vcA")
	node := legacyNode("old", uuidB, time.Now().Add(-time.Hour))
	client := stateClient(node)
	parsed, err := config.Parse([]byte(f.yaml("", "vcA")))
	if err != nil {
		t.Fatal(err)
	}
	c := cloud.New(parsed, f.options())
	stop := make(chan struct{})
	t.Cleanup(func() {
		close(stop)
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		c.Stop(ctx)
	})
	c.Prepare(client, stop)
	eventually(t, "the state read", func() bool { return reads(client, "get", "configmaps") > 0 })
	for range 5 {
		if ok, err := c.InstanceExists(t.Context(), node); err == nil {
			t.Fatalf("a standby: InstanceExists(old) = %v, nil; want an error (the cutoff unknown)", ok)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if w := writes(client); len(w) > 0 || cutoffIn(t, client) != "" {
		t.Fatalf("a standby wrote %v", w)
	}
	startLeader(c, client, stop)
	waitCutoff(t, client)
	existsUntil(t, c, node, "the legacy key honoured once leading", func(ok bool, err error) bool { return ok && err == nil })
}
