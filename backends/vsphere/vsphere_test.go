package vsphere_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/soap"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/backends"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/backends/vsphere"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config/credentials"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/test/vcsim"
)

func newBackend(t *testing.T, vc *vcsim.VCenter, creds credentials.Source, n *atomic.Int64) *vsphere.Backend {
	t.Helper()
	opts := vsphere.Options{
		Config: config.VCenter{
			Name: vc.Name, Server: vc.Host, Port: vc.Port, InsecureFlag: true, RoundTripCount: 1,
		}.WithDefaults(),
		Credentials: creds,
	}
	if n != nil {
		opts.WrapTransport = vcsim.CountRequests(n)
	}
	b := vsphere.New(opts)
	b.Start()
	t.Cleanup(func() { _ = b.Close(context.Background()) })
	return b
}

// byName restricts a query to the datacenters named.
func byName(names ...string) []config.DatacenterSpec {
	var out []config.DatacenterSpec
	for _, n := range names {
		out = append(out, config.DatacenterSpec{Raw: n, Kind: config.DatacenterByName, Value: n})
	}
	return out
}

func startFederation(t *testing.T, vcs int) *vcsim.Federation {
	t.Helper()
	f, err := vcsim.Start(vcsim.Options{VCenters: vcs})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	return f
}

func TestFindGetTags(t *testing.T) {
	f := startFederation(t, 1)
	vc := f.VCenters[0]
	b := newBackend(t, vc, credentials.Static{User: vc.User, Password: config.Password(vc.Password)}, nil)
	ctx := t.Context()

	for _, want := range vc.VMs {
		for _, q := range []backends.Query{
			{By: backends.ByUUID, Values: []string{want.UUID}},
			{By: backends.ByUUID, Values: []string{strings.ToUpper(want.UUID)}},
			{By: backends.ByName, Values: []string{want.Name}},
			{By: backends.ByIP, Values: []string{want.IP}},
			{By: backends.ByDNSName, Values: []string{want.HostName}},
			{By: backends.ByDNSName, Values: []string{strings.ToUpper(want.HostName)}},
			{By: backends.ByUUID, Values: []string{want.UUID}, Datacenters: byName(want.Datacenter)},
		} {
			vms, err := b.Find(ctx, q)
			if err != nil {
				t.Fatalf("Find(%+v): %v", q, err)
			}
			if len(vms) != 1 {
				t.Fatalf("Find(%+v) = %d VMs, want 1", q, len(vms))
			}
			got := vms[0]
			if got.Name != want.Name || got.UUID != want.UUID || got.Ref.ID != want.Ref || got.Ref.Datacenter != want.Datacenter {
				t.Fatalf("Find(%+v) = %+v, want %+v", q, got, want)
			}
			if got.PowerState != backends.PoweredOn || got.NumCPU < 1 || got.MemoryMB < 1 || got.GuestID != "ubuntu64Guest" ||
				got.GuestHostName != want.HostName || len(got.NICs) != 1 || got.NICs[0].IPs[0] != want.IP || got.Host == "" {
				t.Fatalf("Find(%+v) properties = %+v", q, got)
			}
		}
		tags, err := b.Tags(ctx, &backends.VM{Ref: backends.VMRef{Datacenter: want.Datacenter, ID: want.Ref}, Host: hostOf(t, b, want)}, []string{"k8s-zone", "k8s-region"})
		if err != nil {
			t.Fatal(err)
		}
		if tags["k8s-zone"] != want.Zone || tags["k8s-region"] != want.Region {
			t.Fatalf("Tags(%s) = %v, want zone %s region %s", want.Name, tags, want.Zone, want.Region)
		}
	}

	// Another datacenter: the VM is not there, and that is an answer.
	other := "DC1"
	if vc.VMs[0].Datacenter == other {
		other = "DC0"
	}
	vms, err := b.Find(ctx, backends.Query{By: backends.ByUUID, Values: []string{vc.VMs[0].UUID}, Datacenters: byName(other)})
	if err != nil || len(vms) != 0 {
		t.Fatalf("Find in the wrong datacenter = %v, %v; want none, nil", vms, err)
	}
	vms, err = b.Find(ctx, backends.Query{By: backends.ByUUID, Values: []string{"42ffffff-0000-4000-8000-000000000000"}})
	if err != nil || len(vms) != 0 {
		t.Fatalf("Find(unknown uuid) = %v, %v; want none, nil", vms, err)
	}
	// A guest host name matches whole: the VM name (its short form here)
	// and an empty name match nothing.
	for _, name := range []string{vc.VMs[0].Name, ""} {
		vms, err = b.Find(ctx, backends.Query{By: backends.ByDNSName, Values: []string{name}})
		if err != nil || len(vms) != 0 {
			t.Fatalf("Find(dns name %q) = %v, %v; want none, nil", name, vms, err)
		}
	}
}

func hostOf(t *testing.T, b *vsphere.Backend, vm *vcsim.VM) string {
	t.Helper()
	got, err := b.Get(context.Background(), backends.VMRef{Datacenter: vm.Datacenter, ID: vm.Ref})
	if err != nil {
		t.Fatal(err)
	}
	return got.Host
}

func TestGetAfterDestroyIsNotFound(t *testing.T) {
	f := startFederation(t, 1)
	vc := f.VCenters[0]
	b := newBackend(t, vc, credentials.Static{User: vc.User, Password: config.Password(vc.Password)}, nil)
	ctx := t.Context()
	vm := vc.VMs[1]
	ref := backends.VMRef{Datacenter: vm.Datacenter, ID: vm.Ref}
	if _, err := b.Get(ctx, ref); err != nil {
		t.Fatal(err)
	}
	if err := vc.Destroy(ctx, vm); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Get(ctx, ref); !errors.Is(err, backends.ErrNotFound) {
		t.Fatalf("Get(destroyed) err = %v, want ErrNotFound", err)
	}
	vms, err := b.Find(ctx, backends.Query{By: backends.ByUUID, Values: []string{vm.UUID}})
	if err != nil || len(vms) != 0 {
		t.Fatalf("Find(destroyed) = %v, %v; want none, nil", vms, err)
	}
	// A VM in another datacenter than remembered is not found there either.
	other := backends.VMRef{Datacenter: "elsewhere", ID: vc.VMs[0].Ref}
	if _, err := b.Get(ctx, other); !errors.Is(err, backends.ErrNotFound) {
		t.Fatalf("Get(wrong datacenter) err = %v, want ErrNotFound", err)
	}
}

// A session that vCenter terminates is re-established on NotAuthenticated,
// and the request that saw it succeeds.
func TestReloginAfterSessionTerminated(t *testing.T) {
	f := startFederation(t, 1)
	vc := f.VCenters[0]
	var logins atomic.Int64
	creds := countingSource{Source: credentials.Static{User: vc.User, Password: config.Password(vc.Password)}, n: &logins}
	b := newBackend(t, vc, creds, nil)
	ctx := t.Context()
	q := backends.Query{By: backends.ByUUID, Values: []string{vc.VMs[0].UUID}}
	if _, err := b.Find(ctx, q); err != nil {
		t.Fatal(err)
	}
	if err := vc.TerminateSessions(ctx); err != nil {
		t.Fatal(err)
	}
	vms, err := b.Find(ctx, q)
	if err != nil || len(vms) != 1 {
		t.Fatalf("Find after session loss = %v, %v", vms, err)
	}
	if got := logins.Load(); got != 2 {
		t.Fatalf("logins = %d, want 2 (first + one re-login)", got)
	}
}

type countingSource struct {
	credentials.Source
	n *atomic.Int64
}

func (c countingSource) Get(ctx context.Context) (credentials.Credentials, error) {
	c.n.Add(1)
	return c.Source.Get(ctx)
}

func TestWrongPasswordNeverInError(t *testing.T) {
	f := startFederation(t, 1)
	vc := f.VCenters[0]
	const pw = "wrong-Pa55word-xyz"
	b := newBackend(t, vc, credentials.Static{User: vc.User, Password: pw}, nil)
	_, err := b.Find(t.Context(), backends.Query{By: backends.ByUUID, Values: []string{vc.VMs[0].UUID}})
	if err == nil {
		t.Fatal("login with a wrong password succeeded")
	}
	if strings.Contains(err.Error(), pw) || strings.Contains(err.Error(), vc.Password) {
		t.Fatalf("error leaks a password: %v", err)
	}
	if !strings.Contains(err.Error(), "login as") {
		t.Fatalf("error does not say the login failed: %v", err)
	}
}

func writeCreds(t *testing.T, dir, server, user, password string) {
	t.Helper()
	for name, v := range map[string]string{credentials.UsernameKey(server): user, credentials.PasswordKey(server): password} {
		// Write and rename, as a Secret volume or vault agent would.
		tmp := filepath.Join(dir, "."+name+".tmp")
		if err := os.WriteFile(tmp, []byte(v+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
}

func otherSessions(t *testing.T, vc *vcsim.VCenter) int {
	t.Helper()
	c, err := vc.Client(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Logout(context.Background()) }()
	var sm mo.SessionManager
	if err := c.RetrieveOne(t.Context(), *c.ServiceContent.SessionManager, []string{"sessionList"}, &sm); err != nil {
		t.Fatal(err)
	}
	return len(sm.SessionList) - 1 // not the one asking
}

// Rotation: new credentials log in beside the old session, are swapped in,
// and the old session is logged out; lookups never fail in between.
// Credentials that fail, or vanish, leave the working session serving.
func TestRefreshCredentials(t *testing.T) {
	f := startFederation(t, 1)
	vc := f.VCenters[0]
	dir := t.TempDir()
	writeCreds(t, dir, vc.Host, vc.User, vc.Password)
	b := newBackend(t, vc, credentials.Directory{Dir: dir, Server: vc.Host}, nil)
	ctx := t.Context()
	q := backends.Query{By: backends.ByUUID, Values: []string{vc.VMs[0].UUID}}
	find := func(when string) {
		t.Helper()
		if vms, err := b.Find(ctx, q); err != nil || len(vms) != 1 {
			t.Fatalf("%s: Find = %v, %v", when, vms, err)
		}
	}
	find("before rotation")
	if rotated, err := b.RefreshCredentials(ctx, time.Millisecond); rotated || err != nil {
		t.Fatalf("unchanged credentials: rotated=%v err=%v", rotated, err)
	}

	const next = "n3w-Passw0rd"
	writeCreds(t, dir, vc.Host, vc.User, next)
	vc.SetPassword(next)
	rotated, err := b.RefreshCredentials(ctx, 100*time.Millisecond)
	if !rotated || err != nil {
		t.Fatalf("rotation: rotated=%v err=%v", rotated, err)
	}
	find("right after rotation")
	time.Sleep(300 * time.Millisecond) // past the grace period
	if n := otherSessions(t, vc); n != 1 {
		t.Fatalf("%d client sessions after rotation, want 1 (the old one logged out)", n)
	}
	// The vCenter drops every session: re-login uses the new password.
	if err := vc.TerminateSessions(ctx); err != nil {
		t.Fatal(err)
	}
	find("after sessions were terminated")

	const wrong = "not-the-Passw0rd"
	writeCreds(t, dir, vc.Host, vc.User, wrong)
	rotated, err = b.RefreshCredentials(ctx, time.Millisecond)
	if rotated || err == nil || !strings.Contains(err.Error(), "keeping the current session") {
		t.Fatalf("wrong new credentials: rotated=%v err=%v", rotated, err)
	}
	for _, pw := range []string{wrong, next, vc.Password} {
		if strings.Contains(err.Error(), pw) {
			t.Fatalf("error leaks a password: %v", err)
		}
	}
	find("after rejected credentials")

	for _, name := range []string{credentials.UsernameKey(vc.Host), credentials.PasswordKey(vc.Host)} {
		if err := os.Remove(filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := b.RefreshCredentials(ctx, time.Millisecond); err == nil {
		t.Fatal("vanished credentials: want an error")
	}
	find("after credentials vanished")
}

// TLS is verified unless insecureFlag is set: by the system roots, a CA
// file, or a pinned thumbprint; a wrong thumbprint is refused.
func TestTLSVerification(t *testing.T) {
	f, err := vcsim.Start(vcsim.Options{VCenters: 1, Addresses: []string{"127.0.0.1"}}) // the simulator's certificate names 127.0.0.1
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	vc := f.VCenters[0]
	cert := vc.Server.Certificate()
	caFile, err := vc.Server.CertificateFile()
	if err != nil {
		t.Fatal(err)
	}
	creds := credentials.Static{User: vc.User, Password: config.Password(vc.Password)}
	q := backends.Query{By: backends.ByUUID, Values: []string{vc.VMs[0].UUID}}
	for _, tc := range []struct {
		name string
		cfg  config.VCenter
		ok   bool
	}{
		{"no CA, not insecure", config.VCenter{}, false},
		{"insecureFlag", config.VCenter{InsecureFlag: true}, true},
		{"CA file", config.VCenter{CAFile: caFile}, true},
		{"SHA-1 thumbprint", config.VCenter{Thumbprints: []string{soap.ThumbprintSHA1(cert)}}, true},
		{"SHA-256 thumbprint", config.VCenter{Thumbprints: []string{soap.ThumbprintSHA256(cert)}}, true},
		{"wrong thumbprint", config.VCenter{Thumbprints: []string{"AA:BB:CC:DD:EE:FF:00:11:22:33:44:55:66:77:88:99:AA:BB:CC:DD"}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := tc.cfg.WithDefaults()
			cfg.Name, cfg.Server, cfg.Port = vc.Name, vc.Host, vc.Port
			b := vsphere.New(vsphere.Options{Config: cfg, Credentials: creds})
			b.Start()
			defer func() { _ = b.Close(context.Background()) }()
			_, err := b.Find(t.Context(), q)
			if tc.ok != (err == nil) {
				t.Fatalf("Find err = %v, want ok=%v", err, tc.ok)
			}
		})
	}
}

// InstanceUUID is "" until a login has read the vCenter's service content,
// then the vCenter's instance UUID: two vCenters give two, and an address
// that now leads to another appliance gives that one's to a new
// connection.
func TestInstanceUUID(t *testing.T) {
	f, err := vcsim.Start(vcsim.Options{VCenters: 2, Datacenters: 1, MachinesPerPool: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	connect := func(vc *vcsim.VCenter) string {
		t.Helper()
		b := vsphere.New(vsphere.Options{
			Config:      config.VCenter{Name: vc.Name, Server: vc.Host, Port: vc.Port, InsecureFlag: true}.WithDefaults(),
			Credentials: credentials.Static{User: vc.User, Password: config.Password(vc.Password)},
		})
		b.Start()
		defer func() { _ = b.Close(context.Background()) }()
		if id := b.Status().InstanceUUID; id != "" {
			t.Fatalf("%s: InstanceUUID before any login = %q, want \"\"", vc.Name, id)
		}
		if err := b.Probe(t.Context()); err != nil {
			t.Fatal(err)
		}
		return b.Status().InstanceUUID
	}
	got := map[string]string{}
	for _, vc := range f.VCenters {
		id := connect(vc)
		if want := strings.ToLower(vc.InstanceUUID()); id != want || id == "" {
			t.Fatalf("%s: InstanceUUID = %q, want the simulator's %q", vc.Name, id, want)
		}
		if other, ok := got[id]; ok {
			t.Fatalf("%s and %s both have instance UUID %s", other, vc.Name, id)
		}
		got[id] = vc.Name
	}
	vc := f.VCenters[0]
	const replaced = "5F0A7C1E-0000-4000-8000-00000000A1B2"
	vc.SetInstanceUUID(replaced)
	if id := connect(vc); id != strings.ToLower(replaced) {
		t.Fatalf("after the simulator's instance UUID changed: InstanceUUID = %q, want %q", id, strings.ToLower(replaced))
	}
}
