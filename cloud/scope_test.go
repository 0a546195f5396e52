package cloud_test

import (
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/backends"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/cloud"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config/credentials"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/test/backendtest"
)

// scopeSpy is a backend that records the datacenters it is scoped to.
type scopeSpy struct {
	*backendtest.Backend
	mu     sync.Mutex
	scopes [][]string
}

func (s *scopeSpy) SetDatacenters(specs []config.DatacenterSpec) {
	s.mu.Lock()
	defer s.mu.Unlock()
	raw := make([]string, len(specs))
	for i, spec := range specs {
		raw[i] = spec.Raw
	}
	s.scopes = append(s.scopes, raw)
}

func (s *scopeSpy) last() ([]string, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.scopes) == 0 {
		return nil, 0
	}
	return s.scopes[len(s.scopes)-1], len(s.scopes)
}

// A datacenter edit keeps the backend (datacenters are no part of its
// connection) and scopes it in place: its inventory follows the config
// without a reload of the datacenters kept.
func TestDatacenterEditScopesTheKeptBackend(t *testing.T) {
	path := filepath.Join(t.TempDir(), "vsphere.conf")
	conf := func(dcs string) string {
		return "global:\n  user: ccm\n  password: pw\nvcenter:\n  vc1:\n    server: a.example.com\n    datacenters: " + dcs + "\n"
	}
	writeAtomically(t, path, conf("dc1"))
	var mu sync.Mutex
	var made []*scopeSpy
	c, err := cloud.NewFromFile(path, cloud.Options{NewBackend: func(config.VCenter, credentials.Source) backends.Backend {
		mu.Lock()
		defer mu.Unlock()
		b := &scopeSpy{Backend: backendtest.New()}
		made = append(made, b)
		return b
	}})
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	defer close(stop)
	c.Start(nil, stop)
	writeAtomically(t, path, conf("dc1, Datacenter:datacenter-7"))
	c.Reload(t.Context())
	writeAtomically(t, path, conf("/f/dc3"))
	c.Reload(t.Context())
	mu.Lock()
	defer mu.Unlock()
	if len(made) != 1 {
		t.Fatalf("%d backends built; want 1, kept through datacenter edits", len(made))
	}
	got, n := made[0].last()
	if !slices.Equal(got, []string{"/f/dc3"}) || n < 2 {
		t.Fatalf("the kept backend was scoped %d times, last to %q; want every edit applied, last [/f/dc3]", n, got)
	}
	if !slices.ContainsFunc(made[0].scopes, func(s []string) bool { return slices.Equal(s, []string{"dc1", "Datacenter:datacenter-7"}) }) {
		t.Fatalf("scopes %q; want the edit to [dc1 Datacenter:datacenter-7] applied", made[0].scopes)
	}
}
