package main

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/backends"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/cloud"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config/credentials"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/test/backendtest"
)

// diagnose's report, built over in-memory vCenters and a fake cluster:
// what it says comes from the code that decides, not from restating it.

const (
	diagUUID       = "42000000-0000-4000-8000-0000000000d1"
	zoneTagMissing = "no zone or region tag"
)

var diagConfig = "global:\n  user: ccm\n  password: pw\n  requestTimeout: 2s\n" +
	"vcenter:\n  vcA:\n    server: a.example.com\n  vcB:\n    server: b.example.com\n" +
	"labels:\n  zone: k8s-zone\n  region: k8s-region\n"

var diagTags = map[string]string{"k8s-zone": "zone-1", "k8s-region": "region-1"}

func diagVM(id, name, uuid string) backends.VM {
	return backends.VM{
		Ref: backends.VMRef{Datacenter: "dc0", ID: id}, Name: name, UUID: uuid,
		PowerState: backends.PoweredOn, ConnectionState: "connected", GuestHostName: name,
		NICs: []backends.NIC{{Network: "VM Network", IPs: []string{"10.0.0.7"}, DeviceConfigID: 4000}},
	}
}

// testDiagnoser is diagnose's provider over fleet and client,
// as newDiagnoser builds it but for the backends.
func testDiagnoser(t *testing.T, fleet map[string]*backendtest.Backend, client *fake.Clientset, tune ...func(*cloud.Options)) *diagnoser {
	t.Helper()
	return testDiagnoserOf(t, diagConfig, fleet, client, tune...)
}

// testDiagnoserOf is testDiagnoser with the config file text yaml.
func testDiagnoserOf(t *testing.T, yaml string, fleet map[string]*backendtest.Backend, client *fake.Clientset, tune ...func(*cloud.Options)) *diagnoser {
	t.Helper()
	cfg, err := config.Parse([]byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	opts := cloud.Options{NewBackend: func(vc config.VCenter, _ credentials.Source) backends.Backend {
		return fleet[vc.Name]
	}}
	for _, fn := range tune {
		fn(&opts)
	}
	logCalls(&opts)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	provider := cloud.New(cfg, opts)
	d := &diagnoser{provider: provider, client: client, settled: provider.Inspect(ctx, client)}
	t.Cleanup(d.close)
	return d
}

func newDiagFleet() map[string]*backendtest.Backend {
	return map[string]*backendtest.Backend{"vcA": backendtest.New(), "vcB": backendtest.New()}
}

// report runs `diagnose node` on node and returns its report and text.
func report(t *testing.T, d *diagnoser, node *v1.Node) (*nodeReport, string) {
	t.Helper()
	r := d.node(t.Context(), node)
	var out bytes.Buffer
	r.write(&out)
	t.Logf("diagnose node %s:\n%s", node.Name, out.String())
	return r, out.String()
}

func lineWith(text, prefix string) string {
	for l := range strings.Lines(text) {
		if strings.HasPrefix(strings.TrimSpace(l), prefix) {
			return l
		}
	}
	return ""
}

// A Node named by an IP, without providerID or system UUID, is searched
// by VM name, guest host name and guest IP (discovery's fallbacks); the
// report says so even when the first search finds the VM.
func TestDiagnoseShowsTheSearchOrderDiscoveryFollows(t *testing.T) {
	fleet := newDiagFleet()
	fleet["vcA"].Add(diagVM("vm-1", "10.0.0.7", diagUUID), diagTags)
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "10.0.0.7"}}
	d := testDiagnoser(t, fleet, fake.NewClientset(node))
	r, text := report(t, d, node)
	if r.VM == nil || r.VM.VCenter != "vcA" {
		t.Fatalf("VM = %+v; want found in vcA", r.VM)
	}
	line := lineWith(text, "looked up by:")
	for _, want := range []string{`vm name "10.0.0.7"`, `guest host name "10.0.0.7"`, `guest ip "10.0.0.7"`} {
		if !strings.Contains(line, want) {
			t.Errorf("%q lacks the search %s", line, want)
		}
	}
	if i, j := strings.Index(line, "vm name"), strings.Index(line, "guest ip"); i < 0 || j < i {
		t.Errorf("%q: want the VM name searched before the guest IP", line)
	}
}

// The verdict explains a missing zone tag from the error InstanceMetadata
// returns, not from its text: a VM whose name holds the same words does
// not make a duplicate-UUID failure a zone-tag one.
func TestDiagnoseExplainsByTheErrorNotItsText(t *testing.T) {
	t.Run("zone tag missing", func(t *testing.T) {
		fleet := newDiagFleet()
		fleet["vcA"].Add(diagVM("vm-1", "node-1", diagUUID), map[string]string{"k8s-region": "region-1"})
		node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1"}, Spec: v1.NodeSpec{ProviderID: "vsphere://" + diagUUID}}
		r, _ := report(t, testDiagnoser(t, fleet, fake.NewClientset(node)), node)
		if r.WouldInitialize || !slices.ContainsFunc(r.Why, func(s string) bool { return strings.Contains(s, zoneTagMissing) }) {
			t.Errorf("why = %q; want it not to initialize for a missing zone tag", r.Why)
		}
	})
	t.Run("a VM named like the message", func(t *testing.T) {
		fleet := newDiagFleet()
		fleet["vcA"].Add(diagVM("vm-1", "node-1", diagUUID), diagTags)
		fleet["vcB"].Add(diagVM("vm-9", "no tag for anyone", diagUUID), diagTags)
		node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1"}, Spec: v1.NodeSpec{ProviderID: "vsphere://" + diagUUID}}
		r, _ := report(t, testDiagnoser(t, fleet, fake.NewClientset(node)), node)
		if !strings.Contains(r.MetadataError, "no tag for anyone") {
			t.Fatalf("metadata error %q; want the duplicate named", r.MetadataError)
		}
		if slices.ContainsFunc(r.Why, func(s string) bool { return strings.Contains(s, zoneTagMissing) }) {
			t.Errorf("why = %q; a duplicate UUID explained as a missing zone tag", r.Why)
		}
		if !slices.ContainsFunc(r.Why, func(s string) bool { return strings.Contains(s, "same BIOS UUID") }) {
			t.Errorf("why = %q; want the duplicate UUID explained", r.Why)
		}
	})
}

// A record of the vCenters served that cannot be read is named as
// configured (Options.HistoryObject), not by the default name.
func TestDiagnoseNamesTheConfiguredHistoryConfigMap(t *testing.T) {
	fleet := newDiagFleet()
	fleet["vcA"].Add(diagVM("vm-1", "node-1", diagUUID), diagTags)
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1"}, Spec: v1.NodeSpec{ProviderID: "vsphere://" + diagUUID}}
	client := fake.NewClientset(node)
	client.PrependReactor("get", "configmaps", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("configmaps is forbidden")
	})
	d := testDiagnoser(t, fleet, client, func(o *cloud.Options) {
		o.HistoryObject = types.NamespacedName{Namespace: "ccm-system", Name: "ccm-record"}
	})
	r, _ := report(t, d, node)
	i := slices.IndexFunc(r.Why, func(s string) bool { return strings.Contains(s, "could not be read") })
	if i < 0 {
		t.Fatalf("why = %q; want the unread record explained", r.Why)
	}
	if !strings.Contains(r.Why[i], "ccm-system/ccm-record") || strings.Contains(r.Why[i], cloud.DefaultHistoryObject) {
		t.Errorf("%q; want the configured ConfigMap ccm-system/ccm-record named", r.Why[i])
	}
}

// A Node whose VM every vCenter answered absent, kept by the deletion
// policy: the report says which (the grace or the freeze, with its key)
// and the vCenters' table shows each one's policy.
func TestDiagnoseSaysWhatHoldsADeletionBack(t *testing.T) {
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-gone"}, Spec: v1.NodeSpec{ProviderID: "vsphere://" + diagUUID}}
	t.Run("the grace", func(t *testing.T) {
		r, text := report(t, testDiagnoser(t, newDiagFleet(), fake.NewClientset(node)), node)
		if !strings.Contains(r.DeletionHeld, "held back by the grace") || !strings.Contains(r.DeletionHeld, "absent for 30s (nodeDeletion.minAbsence of vcA, vcB)") {
			t.Errorf("deletionHeld = %q; want the grace of 30s named", r.DeletionHeld)
		}
		if !slices.ContainsFunc(r.Why, func(s string) bool { return strings.HasPrefix(s, "not deleted: held back by the grace") }) {
			t.Errorf("why = %q; want the grace named as why the Node is not deleted", r.Why)
		}
		_, table, _ := strings.Cut(text, "vCenters now:")
		if line := lineWith(table, "vcA"); !strings.Contains(line, "after 30s of absence") {
			t.Errorf("vCenters table row %q; want vcA's minAbsence", line)
		}
	})
	t.Run("the freeze", func(t *testing.T) {
		frozen := strings.Replace(diagConfig, "    server: b.example.com\n", "    server: b.example.com\n    nodeDeletion: frozen\n", 1)
		r, text := report(t, testDiagnoserOf(t, frozen, newDiagFleet(), fake.NewClientset(node)), node)
		if want := "held back by the freeze of vcB (vcenter.vcB.nodeDeletion: frozen)"; !strings.Contains(r.DeletionHeld, want) {
			t.Errorf("deletionHeld = %q; want %q", r.DeletionHeld, want)
		}
		if !strings.Contains(r.Exists.Reason, "held back by the freeze") {
			t.Errorf("instanceExists reason = %q; want the freeze", r.Exists.Reason)
		}
		_, table, _ := strings.Cut(text, "vCenters now:")
		if line := lineWith(table, "vcB"); !strings.Contains(line, "frozen (vcenter.vcB.nodeDeletion), 1 held") {
			t.Errorf("vCenters table row %q; want vcB frozen, holding this Node", line)
		}
	})
}
