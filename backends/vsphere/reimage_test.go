package vsphere_test

import (
	"strings"
	"testing"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/backends"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config/credentials"
)

// An address that now leads to another appliance (a re-image, a DNS
// cut-over) ends the session, and the re-login meets the other appliance:
// the backend must then say so by its instance UUID, never keep the old
// one's — discovery tells vCenters apart by it, and an absence the new
// appliance answers must not pass for the old one's. The request that met
// it fails (it was asked of the old one); the next one connects anew.
func TestReloginToAnotherApplianceIsANewVCenter(t *testing.T) {
	f := startFederation(t, 1)
	vc := f.VCenters[0]
	b := newBackend(t, vc, credentials.Static{User: vc.User, Password: config.Password(vc.Password)}, nil)
	ctx := t.Context()
	q := backends.Query{By: backends.ByUUID, Values: []string{vc.VMs[0].UUID}}
	if _, err := b.Find(ctx, q); err != nil {
		t.Fatal(err)
	}
	old := b.Status().InstanceUUID
	if old == "" {
		t.Fatal("InstanceUUID after a login is empty")
	}
	const replaced = "5f0a7c1e-0000-4000-8000-00000000beef"
	vc.SetInstanceUUID(replaced)
	if err := vc.TerminateSessions(ctx); err != nil {
		t.Fatal(err)
	}
	_, err := b.Find(ctx, q)
	if err == nil {
		t.Fatalf("Find that met another appliance at the address succeeded; InstanceUUID = %q (was %q)", b.Status().InstanceUUID, old)
	}
	for _, want := range []string{old, replaced} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name instance %s", err, want)
		}
	}
	if id := b.Status().InstanceUUID; id == old {
		t.Fatalf("InstanceUUID after the re-login met another appliance = the old %q", id)
	}
	vms, err := b.Find(ctx, q)
	if err != nil || len(vms) != 1 {
		t.Fatalf("Find on the new appliance = %v, %v; want its VM", vms, err)
	}
	if id := b.Status().InstanceUUID; id != replaced {
		t.Fatalf("InstanceUUID on the new appliance = %q, want %q", id, replaced)
	}
}
