package discovery_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/backends"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/discovery"
)

// searchLog names, in order, the searches its backends are asked.
type searchLog struct {
	mu       sync.Mutex
	searches []string
}

type loggedBackend struct {
	backends.Backend
	log *searchLog
}

func (b loggedBackend) Find(ctx context.Context, q backends.Query) ([]backends.VM, error) {
	b.log.mu.Lock()
	if name := discovery.SearchName(q); !slices.Contains(b.log.searches, name) {
		b.log.searches = append(b.log.searches, name)
	}
	b.log.mu.Unlock()
	return b.Backend.Find(ctx, q)
}

// Searches is the order Locate searches in: a lookup that finds nothing
// anywhere makes exactly those searches, in that order, as its backends
// are asked them.
func TestSearchesAreWhatLocateSearches(t *testing.T) {
	f := newFleet()
	log := &searchLog{}
	var vcs []discovery.Target
	for _, n := range f.names {
		vcs = append(vcs, discovery.Target{Name: n, Server: n + ":443", Backend: loggedBackend{f.backends[n], log},
			RequestTimeout: time.Second, ConsecutiveFailures: 5, OpenTimeout: time.Minute})
	}
	d := discovery.New(vcs, discovery.Options{})
	defer d.Close()
	for _, tc := range []struct {
		keys discovery.NodeKeys
		want []string
	}{
		{discovery.NodeKeys{Name: "10.9.8.7"}, []string{`vm name "10.9.8.7"`, `guest host name "10.9.8.7"`, `guest ip "10.9.8.7"`}},
		{discovery.NodeKeys{Name: "Node-7", SystemUUID: noSuchUUID}, []string{`uuid "` + noSuchUUID + `"`, `guest host name "node-7"`}},
		{discovery.NodeKeys{Name: "10.9.8.7", ProviderID: "vsphere://" + noSuchUUID}, []string{`uuid "` + noSuchUUID + `"`}},
	} {
		got, err := tc.keys.Searches()
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("Searches(%+v) = %q, %v; want %q", tc.keys, got, err, tc.want)
		}
		log.searches = nil
		if res, err := d.Locate(t.Context(), tc.keys); res != nil || err != nil {
			t.Fatalf("Locate(%+v) = %v, %v; want nothing found", tc.keys, res, err)
		}
		if !slices.Equal(log.searches, got) {
			t.Errorf("Locate(%+v) searched %q; Searches says %q", tc.keys, log.searches, got)
		}
	}
	if _, err := (discovery.NodeKeys{Name: "n", ProviderID: "aws:///i-1"}).Searches(); err == nil {
		t.Error("Searches of a providerID that is not vsphere's: no error")
	}
}
