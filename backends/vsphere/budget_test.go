package vsphere_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vmware/govmomi/vim25/soap"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/backends"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/backends/vsphere"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config/credentials"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/test/poll"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/test/vcsim"
)

// budgetBackend is a backend of vc with the request budget given, its
// requests counted in n.
func budgetBackend(t *testing.T, vc *vcsim.VCenter, perSecond float64, burst int, inventory bool, n *atomic.Int64) *vsphere.Backend {
	t.Helper()
	cfg := config.VCenter{Name: vc.Name, Server: vc.Host, Port: vc.Port, InsecureFlag: true, RoundTripCount: 1,
		RequestsPerSecond: perSecond, RequestBurst: burst}.WithDefaults()
	o := vsphere.Options{Config: cfg, Credentials: credentials.Static{User: vc.User, Password: config.Password(vc.Password)},
		Inventory: inventory, Heartbeat: time.Second}
	if n != nil {
		o.WrapTransport = vcsim.CountRequests(n)
	}
	b := vsphere.New(o)
	b.Start()
	t.Cleanup(func() { _ = b.Close(context.Background()) })
	return b
}

// Direct calls beyond the burst wait for their turn; one whose turn
// comes after its deadline is refused at once, before any request, with
// ErrBudget naming the vCenter and the key; each is counted. A refusal is
// no answer about the VM, no failure of the connection (the vCenter
// stays up), and not a deadline reached.
func TestBudgetPacesDirectCalls(t *testing.T) {
	f := startFederation(t, 1)
	vc := f.VCenters[0]
	var requests atomic.Int64
	// A token every 2 seconds, two in the bucket: the third call's turn
	// is 2s away, far beyond a 50ms deadline (however slow the machine).
	b := budgetBackend(t, vc, 0.5, 2, false, &requests)
	ref := backends.VMRef{Datacenter: vc.VMs[0].Datacenter, ID: vc.VMs[0].Ref}
	for i := range 2 {
		if _, err := b.Get(t.Context(), ref); err != nil {
			t.Fatalf("call %d within the burst: %v", i, err)
		}
	}
	if st := *b.Status().Budget; st.Waits != 0 || st.Rejections != 0 || st.RequestsPerSecond != 0.5 || st.RequestBurst != 2 {
		t.Fatalf("after the burst: %+v, want 0.5/s burst 2, nothing waited or refused", st)
	}
	before := requests.Load()
	const refused = 5
	for i := range refused {
		ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
		_, err := b.Find(ctx, backends.Query{By: backends.ByUUID, Values: []string{vc.VMs[0].UUID}})
		cancel()
		if !errors.Is(err, backends.ErrBudget) {
			t.Fatalf("call %d beyond the burst, short deadline: %v, want ErrBudget", i, err)
		}
		if errors.Is(err, backends.ErrNotFound) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, backends.ErrUnreachable) {
			t.Fatalf("a refusal reads as another kind: %v", err)
		}
		for _, want := range []string{"vcenter." + vc.Name + ".requestsPerSecond", "requestBurst 2"} {
			if !strings.Contains(err.Error(), want) {
				t.Fatalf("error %q does not name %q", err, want)
			}
		}
	}
	if got := requests.Load() - before; got != 0 {
		t.Fatalf("refused calls sent %d requests; want none", got)
	}
	if st := *b.Status().Budget; st.Rejections != refused || st.Waits != 0 {
		t.Fatalf("after %d refusals: %+v", refused, st)
	}
	if r := b.Status().Reachability; r.State != backends.ConnUp {
		t.Fatalf("reachability %v after refusals; want up (nothing failed)", r.State)
	}
	// A probe refused is no news of the vCenter either.
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	if err := b.Probe(ctx); !errors.Is(err, backends.ErrBudget) {
		t.Fatalf("probe beyond the budget: %v, want ErrBudget", err)
	}
	cancel()
	if r := b.Status().Reachability; r.State != backends.ConnUp {
		t.Fatalf("reachability %v after a refused probe; want up", r.State)
	}
	// With time to wait, a call waits for its turn and is answered.
	if _, err := b.Get(t.Context(), ref); err != nil {
		t.Fatalf("call that can wait: %v", err)
	}
	if st := *b.Status().Budget; st.Waits != 1 || st.Rejections != refused+1 {
		t.Fatalf("after a call that waited: %+v, want 1 wait, %d refusals", st, refused+1)
	}
}

// Answers from the inventory, and its watch, take nothing from the
// budget: after many cached lookups a direct call is still served at once.
func TestBudgetSparesTheInventory(t *testing.T) {
	f := startFederation(t, 1)
	vc := f.VCenters[0]
	var requests atomic.Int64
	b := budgetBackend(t, vc, 0.001, 1, true, &requests)
	waitInService(t, b)
	for range 50 {
		vms, err := b.Find(t.Context(), backends.Query{By: backends.ByUUID, Values: []string{vc.VMs[0].UUID}, AllowCached: true})
		if err != nil || len(vms) != 1 {
			t.Fatalf("cached Find = %v, %v", vms, err)
		}
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	if _, err := b.Find(ctx, backends.Query{By: backends.ByUUID, Values: []string{vc.VMs[0].UUID}}); err != nil {
		t.Fatalf("direct Find after cached ones: %v; the inventory took the budget", err)
	}
	if st := *b.Status().Budget; st.Waits != 0 || st.Rejections != 0 {
		t.Fatalf("budget %+v; want nothing waited or refused", st)
	}
}

func waitInService(t *testing.T, b *vsphere.Backend) {
	t.Helper()
	poll.Schedule{Every: 20 * time.Millisecond, Within: 30 * time.Second}.Until(t, "the inventory in service", func() bool {
		return inService(b)
	})
}

// A config edit of the budget applies to the running backend.
func TestSetBudget(t *testing.T) {
	f := startFederation(t, 1)
	vc := f.VCenters[0]
	b := budgetBackend(t, vc, 0.001, 1, false, nil)
	ref := backends.VMRef{Datacenter: vc.VMs[0].Datacenter, ID: vc.VMs[0].Ref}
	if _, err := b.Get(t.Context(), ref); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	_, err := b.Get(ctx, ref)
	cancel()
	if !errors.Is(err, backends.ErrBudget) {
		t.Fatalf("second call at 0.001/s: %v, want ErrBudget", err)
	}
	b.SetBudget(1000, 10)
	if st := *b.Status().Budget; st.RequestsPerSecond != 1000 || st.RequestBurst != 10 {
		t.Fatalf("after SetBudget: %+v", st)
	}
	ctx, cancel = context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	if _, err := b.Get(ctx, ref); err != nil {
		t.Fatalf("after SetBudget(1000, 10): %v", err)
	}
}

// Several thumbprints (a certificate's rollover): any one matching logs
// in; none matching is refused in the handshake, naming the server.
func TestThumbprintList(t *testing.T) {
	f, err := vcsim.Start(vcsim.Options{VCenters: 1, Addresses: []string{"127.0.0.1"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	vc := f.VCenters[0]
	cert := vc.Server.Certificate()
	wrong1, wrong2 := strings.Repeat("AB:", 31)+"AB", strings.Repeat("CD:", 19)+"CD"
	for _, tc := range []struct {
		name string
		tps  []string
		ok   bool
	}{
		{"old (wrong) and new (SHA-256)", []string{wrong1, soap.ThumbprintSHA256(cert)}, true},
		{"new (SHA-1) and old", []string{soap.ThumbprintSHA1(cert), wrong2}, true},
		{"only wrong ones", []string{wrong1, wrong2}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := config.VCenter{Name: vc.Name, Server: vc.Host, Port: vc.Port, Thumbprints: tc.tps}.WithDefaults()
			b := vsphere.New(vsphere.Options{Config: cfg, Credentials: credentials.Static{User: vc.User, Password: config.Password(vc.Password)}})
			t.Cleanup(func() { _ = b.Close(context.Background()) })
			before, _ := vc.SOAPCalls()
			_, err := b.Find(t.Context(), backends.Query{By: backends.ByUUID, Values: []string{vc.VMs[0].UUID}})
			if tc.ok {
				if err != nil {
					t.Fatalf("Find: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), "thumbprint does not match any of") || !strings.Contains(err.Error(), vc.Host) {
				t.Fatalf("Find with wrong thumbprints: %v; want a mismatch naming %s", err, vc.Host)
			}
			if after, _ := vc.SOAPCalls(); after["Login"] != before["Login"] {
				t.Fatal("a login reached a server matching no thumbprint")
			}
		})
	}
}

// The certificate a handshake accepted is shown, whatever verified it:
// insecureFlag, a pin, a CA file.
func TestCertificateReported(t *testing.T) {
	f, err := vcsim.Start(vcsim.Options{VCenters: 1, Addresses: []string{"127.0.0.1"}})
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
	for _, tc := range []struct {
		name string
		cfg  config.VCenter
	}{
		{"insecureFlag", config.VCenter{InsecureFlag: true}},
		{"thumbprint", config.VCenter{Thumbprints: []string{soap.ThumbprintSHA256(cert)}}},
		{"caFile", config.VCenter{CAFile: caFile}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := tc.cfg
			cfg.Name, cfg.Server, cfg.Port = vc.Name, vc.Host, vc.Port
			b := vsphere.New(vsphere.Options{Config: cfg.WithDefaults(), Credentials: credentials.Static{User: vc.User, Password: config.Password(vc.Password)}})
			t.Cleanup(func() { _ = b.Close(context.Background()) })
			if c := b.Status().Certificate; c != nil {
				t.Fatalf("a certificate before any handshake: %+v", c)
			}
			if err := b.Probe(t.Context()); err != nil {
				t.Fatal(err)
			}
			got := b.Status().Certificate
			if got == nil || !got.NotAfter.Equal(cert.NotAfter) || got.SHA256Thumbprint != soap.ThumbprintSHA256(cert) || got.Subject != cert.Subject.String() || got.ExpiresInSeconds <= 0 {
				t.Fatalf("Status().Certificate = %+v; want NotAfter %s, SHA-256 %s", got, cert.NotAfter, soap.ThumbprintSHA256(cert))
			}
		})
	}
}

// A call waits for its turn at most half the time left to its deadline:
// one that waited longer would leave its request too little time, and a
// request cut by the deadline reads as vCenter's failure (a breaker counts
// it), where the budget's refusal does not.
func TestBudgetLeavesTheRequestItsTime(t *testing.T) {
	f := startFederation(t, 1)
	vc := f.VCenters[0]
	b := budgetBackend(t, vc, 0.1, 1, false, nil)
	ref := backends.VMRef{Datacenter: vc.VMs[0].Datacenter, ID: vc.VMs[0].Ref}
	if _, err := b.Get(t.Context(), ref); err != nil {
		t.Fatal(err)
	}
	// The next turn is about 10s away: within a 15s deadline, but more
	// than half of it.
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Second)
	defer cancel()
	if _, err := b.Get(ctx, ref); !errors.Is(err, backends.ErrBudget) {
		t.Fatalf("a call whose turn takes most of its deadline: %v, want ErrBudget", err)
	}
}
