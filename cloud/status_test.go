package cloud_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/backends"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/cloud"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/cloud/nodes"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config"
)

// A provider readied by Inspect (diagnose's) answers as the CCM does and
// writes nothing: no Node patch (the location labels a CCM would
// backfill), no Event (a lookup that fails), no state ConfigMap; it reads
// the record the running CCM wrote.
func TestInspectedProviderWritesNothing(t *testing.T) {
	f := newFakeFleet("vcA", "vcB")
	f["vcA"].Add(fakeVM("dc0", "vm-1", "node-a", uuidA), nil)
	initialized := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a"}, Spec: v1.NodeSpec{ProviderID: "vsphere://" + uuidA}}
	missing := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-x"}, Spec: v1.NodeSpec{ProviderID: "vsphere://" + uuidC}}
	client := stateClient(initialized, missing)
	cfg, err := config.Parse([]byte(f.yaml("", "vcA", "vcB")))
	if err != nil {
		t.Fatal(err)
	}
	opts := f.options()
	opts.DuplicateScan = 10 * time.Millisecond
	c := cloud.New(cfg, opts)
	t.Cleanup(func() { stopCloud(t, c) })
	ctx := t.Context()
	if !c.Inspect(ctx, client) {
		t.Fatal("Inspect: the (absent) record could not be read")
	}
	// vcB goes down once the duplicate index holds its UUIDs: a VM found
	// in vcA is served meanwhile.
	eventually(t, "every vCenter indexed", func() bool {
		return !slices.ContainsFunc(c.VCenterStatuses(), func(st cloud.VCenterStatus) bool { return !st.TwinsIndexed })
	})
	f["vcB"].SetReachability(backends.ConnDown, errors.New("dial tcp: connection refused"))
	f["vcB"].Fail(errors.New("dial tcp: connection refused"))

	// (What diagnose shows of each vCenter's answer meanwhile:
	// cmd/vsphere-federated-ccm TestDiagnoseShowsAVCenterNotAsked.)
	res, err := c.Locate(ctx, initialized)
	if err != nil || res == nil || res.VCenter != "vcA" {
		t.Fatalf("Locate = %v, %v; want vcA", res, err)
	}
	md, err := c.InstanceMetadata(ctx, initialized)
	if err != nil || md.AdditionalLabels[nodes.LabelVCenter] != "vcA" {
		t.Fatalf("InstanceMetadata = %+v, %v", md, err)
	}
	if _, err := c.InstanceExists(ctx, missing); err == nil {
		t.Fatal("InstanceExists with vcB down: no error")
	}
	for _, a := range client.Actions() {
		if a.GetVerb() != "get" && a.GetVerb() != "list" && a.GetVerb() != "watch" {
			t.Errorf("an inspected provider wrote: %s %s", a.GetVerb(), a.GetResource().Resource)
		}
	}

	st := c.VCenterStatuses()
	if len(st) != 2 || st[0].Name != "vcA" || st[0].Reachability != "up" || st[1].Reachability != "down" ||
		st[1].LastError != "dial tcp: connection refused" || st[1].Breaker == "" || !st[0].TwinsIndexed {
		t.Errorf("VCenterStatuses = %+v; want vcA up, vcB down with its error and a breaker state", st)
	}
}
