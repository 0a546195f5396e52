package vsphere_test

import (
	"testing"
	"time"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/backends"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/backends/vsphere"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config/credentials"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/test/poll"
)

// The cloud-init metadata CPI prefers static addresses from is read by
// keyed property path, by direct lookups and by the inventory alike, and
// the inventory follows a change of it.
func TestGuestInfoMetadataIsRead(t *testing.T) {
	f := startFederation(t, 1)
	vc := f.VCenters[0]
	ctx := t.Context()
	vm := vc.VMs[0]
	if err := vc.SetExtraConfig(ctx, vm, "guestinfo.metadata", "aW5zdGFuY2UtaWQ6IHgK"); err != nil {
		t.Fatal(err)
	}
	if err := vc.SetExtraConfig(ctx, vm, "guestinfo.metadata.encoding", "base64"); err != nil {
		t.Fatal(err)
	}
	creds := credentials.Static{User: vc.User, Password: config.Password(vc.Password)}
	direct := newBackend(t, vc, creds, nil)
	inventoried := vsphere.New(vsphere.Options{
		Config:      config.VCenter{Name: vc.Name, Server: vc.Host, Port: vc.Port, InsecureFlag: true, RoundTripCount: 1, RequestTimeout: 5 * time.Second}.WithDefaults(),
		Credentials: creds, Inventory: true,
	})
	inventoried.Start()
	t.Cleanup(func() { _ = inventoried.Close(ctx) })
	q := backends.Query{By: backends.ByName, Values: []string{vm.Name}}
	got, err := direct.Find(ctx, q)
	if err != nil || len(got) != 1 || got[0].GuestInfoMetadata != "aW5zdGFuY2UtaWQ6IHgK" || got[0].GuestInfoMetadataEncoding != "base64" {
		t.Fatalf("direct Find = %+v, %v; want the guestinfo.metadata and its encoding", got, err)
	}
	other, err := direct.Find(ctx, backends.Query{By: backends.ByName, Values: []string{vc.VMs[1].Name}})
	if err != nil || len(other) != 1 || other[0].GuestInfoMetadata != "" {
		t.Fatalf("a VM without the keys: %+v, %v", other, err)
	}
	q.AllowCached = true
	waitFor(t, "the inventory to hold the metadata", func() bool {
		got, err := inventoried.Find(ctx, q)
		return err == nil && len(got) == 1 && got[0].GuestInfoMetadata == "aW5zdGFuY2UtaWQ6IHgK" && inService(inventoried)
	})
	if err := vc.SetExtraConfig(ctx, vm, "guestinfo.metadata", "bmV3Cg=="); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the inventory to follow the change", func() bool {
		got, err := inventoried.Find(ctx, q)
		return err == nil && len(got) == 1 && got[0].GuestInfoMetadata == "bmV3Cg=="
	})
}

// waitFor polls cond every 50ms for up to 15s.
var waitFor = poll.Schedule{Every: 50 * time.Millisecond, Within: 15 * time.Second}.Until

// inService reports whether b's inventory answers lookups now.
func inService(b *vsphere.Backend) bool {
	st := b.Status().Inventory
	return st != nil && st.InService
}
