package vsphere

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/backends"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config/credentials"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/test/vcsim"
)

// The operator tools' primitives answer data as vCenter holds it: the
// session's user, the VMs of the datacenters, the tag categories and
// their use; a login's failure says whether TLS or the login failed.
func TestOperatorPrimitives(t *testing.T) {
	f, err := vcsim.Start(vcsim.Options{VCenters: 1, Datacenters: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	vc := f.VCenters[0]
	ctx := ctxFor(t)
	b := New(optionsVia(vc, vc.Host, vc.Port, 5*time.Second))
	t.Cleanup(func() { _ = b.Close(ctxFor(t)) })

	if err := b.Login(ctx); err != nil || TLSFailure(err) {
		t.Fatalf("Login: %v", err)
	}
	if user, cert, err := b.SessionUser(ctx); err != nil || user != vc.User || cert {
		t.Fatalf("SessionUser = %q, %v, %v; want %q, no certificate", user, cert, err, vc.User)
	}
	dcs, err := b.Datacenters(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := b.CountVMs(ctx, dcs); err != nil || n != len(vc.VMs) {
		t.Fatalf("CountVMs = %d, %v; want %d", n, err, len(vc.VMs))
	}
	if n, err := b.CountVMs(ctx, dcs[:1]); err != nil || n == 0 || n >= len(vc.VMs) {
		t.Fatalf("CountVMs of one datacenter = %d, %v; want some of the %d", n, err, len(vc.VMs))
	}
	names, use, err := b.TagCategories(ctx, []string{"k8s-zone", "k8s-zones"})
	if err != nil || !slices.Contains(names, "k8s-zone") || !slices.Contains(names, "k8s-region") {
		t.Fatalf("TagCategories = %v, %v; want the zone and region categories", names, err)
	}
	if u, ok := use["k8s-zone"]; !ok || u.Tags == 0 || u.Objects == 0 || len(use) != 1 {
		t.Fatalf("TagCategories' use = %+v; want the zone category's tags on objects, nothing for one that does not exist", use)
	}

	wrong := optionsVia(vc, vc.Host, vc.Port, 5*time.Second)
	wrong.Credentials = credentials.Static{User: vc.User, Password: config.Password("Wr0ng-operator-pw")}
	bw := New(wrong)
	t.Cleanup(func() { _ = bw.Close(ctxFor(t)) })
	if err := bw.Login(ctx); err == nil || TLSFailure(err) || !errors.Is(err, backends.ErrAuth) || strings.Contains(err.Error(), "Wr0ng") {
		t.Fatalf("Login with a wrong password: %v; want ErrAuth, not TLS, no password", err)
	}
	pinned := optionsVia(vc, vc.Host, vc.Port, 5*time.Second)
	pinned.Config.InsecureFlag, pinned.Config.Thumbprints = false, []string{strings.Repeat("AB:", 19) + "AB"}
	bp := New(pinned)
	t.Cleanup(func() { _ = bp.Close(ctxFor(t)) })
	if err := bp.Login(ctx); !TLSFailure(err) {
		t.Fatalf("Login with a wrong thumbprint: %v; want a TLS failure", err)
	}
	if TLSFailure(nil) {
		t.Fatal("TLSFailure(nil) = true")
	}
}
