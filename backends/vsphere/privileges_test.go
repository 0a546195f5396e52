package vsphere

import (
	"context"
	"errors"
	"reflect"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/backends"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config/credentials"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/test/vcsim"
)

// countedLogins counts the credentials a backend asks for: one per login.
type countedLogins struct {
	credentials.Source
	n *atomic.Int64
}

func (c countedLogins) Get(ctx context.Context) (credentials.Credentials, error) {
	c.n.Add(1)
	return c.Source.Get(ctx)
}

// MissingPrivileges reads the privileges with the backend's session only:
// before any login and after the session is lost it answers ErrNoSession
// with nothing sent and no login; with one, it names what the user lacks
// of RequiredPrivileges on the configured datacenter, and nothing on the
// others.
func TestMissingPrivileges(t *testing.T) {
	f, err := vcsim.Start(vcsim.Options{VCenters: 1, Datacenters: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	vc := f.VCenters[0]
	ctx := ctxFor(t)
	var logins, requests atomic.Int64
	o := optionsVia(vc, vc.Host, vc.Port, 5*time.Second)
	o.Credentials = countedLogins{Source: o.Credentials, n: &logins}
	o.Config.Datacenters = []string{vc.VMs[0].Datacenter}
	o.WrapTransport = vcsim.CountRequests(&requests)
	b := New(o)
	t.Cleanup(func() { _ = b.Close(ctxFor(t)) })

	if _, err := b.MissingPrivileges(ctx); !errors.Is(err, backends.ErrNoSession) {
		t.Fatalf("before any login: %v; want ErrNoSession", err)
	}
	if logins.Load() != 0 || requests.Load() != 0 {
		t.Fatalf("before any login: %d login(s), %d request(s); want none", logins.Load(), requests.Load())
	}

	if _, err := b.Find(ctx, backends.Query{By: backends.ByUUID, Values: []string{vc.VMs[0].UUID}}); err != nil {
		t.Fatal(err)
	}
	r, err := b.MissingPrivileges(ctx)
	if err != nil || r.User == "" || len(r.Missing) != 0 {
		t.Fatalf("as Admin: %+v, %v; want the user named, nothing missing", r, err)
	}

	vc.LimitPrivileges([]string{"System.Anonymous", "System.View"})
	r, err = b.MissingPrivileges(ctx)
	want := []backends.MissingOn{{Entity: "datacenter " + vc.VMs[0].Datacenter, Privileges: []string{"System.Read"}}}
	if err != nil || !reflect.DeepEqual(r.Missing, want) {
		t.Fatalf("lacking System.Read: %+v, %v; want %+v", r, err, want)
	}

	if err := vc.TerminateSessions(ctx); err != nil {
		t.Fatal(err)
	}
	before := logins.Load()
	if _, err := b.MissingPrivileges(ctx); !errors.Is(err, backends.ErrNoSession) {
		t.Fatalf("session lost: %v; want ErrNoSession", err)
	}
	if got := logins.Load(); got != before {
		t.Fatalf("session lost: %d login(s) attempted; want none", got-before)
	}
}
