package cloud_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/backends"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/cloud"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config/credentials"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/test/backendtest"
)

// address is one server whose appliance can be replaced (a re-image), and
// the sessions of the config entries that name it, each of which can be
// down: no session, so its instance UUID is "" and its calls fail.
type address struct {
	mu      sync.Mutex
	current *backendtest.Backend
	down    map[string]bool // by entry name
}

func (a *address) reimage(b *backendtest.Backend) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.current = b
}

func (a *address) setDown(entry string, down bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.down[entry] = down
}

// entrySession is one entry's backend: it reaches whatever appliance
// answers at the address, through its own session.
type entrySession struct {
	backendtest.Inert
	a    *address
	name string
}

var _ backends.Backend = entrySession{}

var errNoSession = errors.New("connection refused (the entry's session is down)")

func (s entrySession) target() (*backendtest.Backend, error) {
	s.a.mu.Lock()
	defer s.a.mu.Unlock()
	if s.a.down[s.name] {
		return nil, errNoSession
	}
	return s.a.current, nil
}

func (s entrySession) Find(ctx context.Context, q backends.Query) ([]backends.VM, error) {
	b, err := s.target()
	if err != nil {
		return nil, err
	}
	return b.Find(ctx, q)
}

func (s entrySession) Get(ctx context.Context, ref backends.VMRef) (*backends.VM, error) {
	b, err := s.target()
	if err != nil {
		return nil, err
	}
	return b.Get(ctx, ref)
}

func (s entrySession) Tags(ctx context.Context, vm *backends.VM, categories []string) (map[string]string, error) {
	b, err := s.target()
	if err != nil {
		return nil, err
	}
	return b.Tags(ctx, vm, categories)
}

// State is the appliance's at the address, without an inventory; down,
// its instance UUID not known, without a session.
func (s entrySession) State() backends.State {
	b, err := s.target()
	if err != nil {
		return backends.State{Reachability: backends.Reachability{State: backends.ConnDown, Err: err}}
	}
	st := b.State()
	st.Inventoried = false
	return st
}

func (s entrySession) Status() backends.Status { return backends.Status{State: s.State()} }

func (s entrySession) Probe(ctx context.Context) error {
	b, err := s.target()
	if err != nil {
		return err
	}
	return b.Probe(ctx)
}

func (s entrySession) UUIDs(uint64) ([]string, uint64, bool) { return nil, 0, false }

func (s entrySession) Placement(string, []string) ([]backends.Placement, bool) { return nil, false }

func (s entrySession) MissingPrivileges(ctx context.Context) (backends.PrivilegeReport, error) {
	b, err := s.target()
	if err != nil {
		return backends.PrivilegeReport{}, err
	}
	return b.MissingPrivileges(ctx)
}

func (s entrySession) Datacenters(ctx context.Context) ([]config.Datacenter, error) {
	b, err := s.target()
	if err != nil {
		return nil, err
	}
	return b.Datacenters(ctx)
}

func (entrySession) Close(context.Context) error { return nil }

// Issue 32 §1: entries a and b of one server (CPI's tenants), whose
// recorded appliance X holds the VM. The address starts answering as
// appliance Y, which lacks it: a reconnects as Y while b's session is
// down (instance unknown). The record kept X for b (matched leniently
// against b's unknown instance) and retired nothing, and the record's
// instances folded both entries into one per server, by map order: when
// Y survived, b's return as Y changed nothing, and the Node was deleted
// while its VM runs on X. X must be retired once any entry of the server
// answers as another appliance, whatever the others answer, or do not.
func TestEntriesOfOneServerReimagedWhileOneIsDown(t *testing.T) {
	const x, y = "5f0a7c1e-0000-4000-8000-0000000000aa", "5f0a7c1e-0000-4000-8000-0000000000bb"
	const cfg = "global:\n  user: ccm\n  password: pw\n  requestTimeout: 2s\n  nodeDeletion: {minAbsence: 0s}\n" +
		"vcenter:\n  a:\n    server: vc.example.com\n  b:\n    server: vc.example.com\n"
	// Both ways the state arises: while the CCM runs, and at a start
	// (a restart, a leader change) with b not logged in yet.
	for _, restart := range []bool{false, true} {
		// Which entry's instance survived the fold was map order: enough
		// rounds that each order is met.
		for round := range 24 {
			t.Run(fmt.Sprintf("restart=%t/round=%d", restart, round), func(t *testing.T) {
				old, reimaged := backendtest.New(), backendtest.New()
				old.SetInstanceUUID(x)
				reimaged.SetInstanceUUID(y)
				old.Add(fakeVM("dc0", "vm-1", "node-1", uuidA), nil)
				// node-2's VM is never looked up before the re-image: no
				// location remembered in the process keeps it.
				old.Add(fakeVM("dc0", "vm-2", "node-2", uuidB), nil)
				addr := &address{current: old, down: map[string]bool{}}
				opts := cloud.Options{NewBackend: func(vc config.VCenter, _ credentials.Source) backends.Backend {
					return entrySession{a: addr, name: vc.Name}
				}}
				client := fake.NewClientset()
				path := filepath.Join(t.TempDir(), "vsphere.conf")
				writeAtomically(t, path, cfg)
				c, err := cloud.NewFromFile(path, opts)
				if err != nil {
					t.Fatal(err)
				}
				startWith(t, c, client)
				ctx := t.Context()
				node, unseen := providerNode("node-1", uuidA), providerNode("node-2", uuidB)
				eventually(t, "the Node's VM found on X", func() bool {
					ok, err := c.InstanceExists(ctx, node)
					return ok && err == nil
				})
				c.Reload(ctx)
				waitHistory(t, client, x)

				addr.reimage(reimaged)
				addr.setDown("b", true)
				if restart {
					stopCloud(t, c)
					c, err = cloud.NewFromFile(path, opts)
					if err != nil {
						t.Fatal(err)
					}
					startWith(t, c, client)
				}
				// a answers as Y: the reload OnIdentity asks for.
				if _, err := c.InstanceExists(ctx, node); err == nil {
					t.Fatal("a answering as Y, b down: InstanceExists answered without an error")
				}
				c.Reload(ctx)
				// b is back, as Y.
				addr.setDown("b", false)
				for i := range 3 {
					for _, n := range []*v1.Node{node, unseen} {
						ok, err := c.InstanceExists(ctx, n)
						if !ok && err == nil {
							t.Fatalf("lookup %d of %s after b came back as Y: InstanceExists = false, nil; its VM runs on X, which cannot be asked", i, n.Name)
						}
					}
					c.Reload(ctx)
				}
			})
		}
	}
}
