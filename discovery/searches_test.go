package discovery_test

import (
	"slices"
	"testing"
	"time"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/discovery"
)

// Searches is the order Locate searches in: a lookup that finds nothing
// anywhere makes exactly those searches, in that order, as its Trace
// shows them.
func TestSearchesAreWhatLocateSearches(t *testing.T) {
	f := newFleet()
	d := f.discoverer(t, time.Second, 5, time.Minute)
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
		var tr discovery.Trace
		if res, err := d.Locate(discovery.WithTrace(t.Context(), &tr), tc.keys); res != nil || err != nil {
			t.Fatalf("Locate(%+v) = %v, %v; want nothing found", tc.keys, res, err)
		}
		var traced []string
		for _, a := range tr.Answers() {
			if !slices.Contains(traced, a.Lookup) {
				traced = append(traced, a.Lookup)
			}
		}
		if !slices.Equal(traced, got) {
			t.Errorf("Locate(%+v) searched %q; Searches says %q", tc.keys, traced, got)
		}
	}
	if _, err := (discovery.NodeKeys{Name: "n", ProviderID: "aws:///i-1"}).Searches(); err == nil {
		t.Error("Searches of a providerID that is not vsphere's: no error")
	}
}
