package cloud

import (
	"testing"
	"time"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config"
)

// Two config entries of one vCenter (CPI's tenants) with different
// datacenters are one vCenter serving both: recording the config retires
// nothing (it used to compare each entry with the first of its server
// only, retiring the other's datacenters at every apply: no Node was
// then ever deleted). Removing one entry retires what only it served.
func TestHistoryTenantsOfOneVCenter(t *testing.T) {
	entry := func(name string, dcs ...string) serving {
		return serving{VCenter: config.VCenter{Name: name, Server: "vc.example.com", Port: 443, Datacenters: dcs}, instance: "uuid-1"}
	}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	h := &configHistory{}
	both := []serving{entry("tenant-a", "dc0"), entry("tenant-b", "dc1")}
	h.update(both, now, time.Hour)
	for range 3 {
		now = now.Add(time.Minute)
		h.update(both, now, time.Hour)
		if len(h.Retired) != 0 {
			t.Fatalf("both tenants configured: retired %+v", h.Retired)
		}
	}
	// tenant-b leaves: dc1 is retired, dc0 is not.
	h.update(both[:1], now.Add(time.Minute), time.Hour)
	if len(h.Retired) != 1 || h.Retired[0].Datacenter != "dc1" {
		t.Fatalf("tenant-b removed: retired %+v; want dc1 alone", h.Retired)
	}
	// Back: nothing retired.
	h.update(both, now.Add(2*time.Minute), time.Hour)
	if len(h.Retired) != 0 {
		t.Fatalf("tenant-b back: retired %+v", h.Retired)
	}
	// A tenant of every datacenter beside one of dc0: every datacenter served.
	h.update([]serving{entry("tenant-a", "dc0"), entry("tenant-all")}, now.Add(3*time.Minute), time.Hour)
	if len(h.Retired) != 0 {
		t.Fatalf("a tenant of every datacenter: retired %+v", h.Retired)
	}
}

// A datacenter named by its inventory path, then by its name, is one
// datacenter to the history (issue 22: one canonical identity): the edit
// retires nothing.
func TestHistoryDatacenterByPathThenName(t *testing.T) {
	cfg := func(dcs ...string) *config.Config {
		return &config.Config{VCenters: []config.VCenter{{Name: "vc1", Server: "vc.example.com", Port: 443, Datacenters: dcs}}}
	}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	h := &configHistory{}
	h.update(servingOf(cfg("/emea/dc-east", "dc-west"), nil), now, time.Hour)
	h.update(servingOf(cfg("dc-east", "/dc-west"), nil), now.Add(time.Minute), time.Hour)
	if len(h.Retired) != 0 {
		t.Fatalf("path edited to name: retired %+v", h.Retired)
	}
	h.update(servingOf(cfg("dc-east"), nil), now.Add(2*time.Minute), time.Hour)
	if len(h.Retired) != 1 || h.Retired[0].Datacenter != "dc-west" {
		t.Fatalf("dc-west removed: retired %+v", h.Retired)
	}
}

// Without a cluster the record is kept in memory, and it follows the
// vCenters as the ConfigMap's does: the instance UUID learned after the
// config was applied is recorded, and another appliance answering at the
// address later retires it. It used to return what it was given: an
// appliance change was never recorded, and a VM the new appliance lacked
// was gone.
func TestMemoryHistoryRecordsInstances(t *testing.T) {
	vc := config.VCenter{Name: "vc1", Server: "vc.example.com", Port: 443}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var store historyStore = memoryHistory{}
	h := &configHistory{}
	h.update([]serving{{VCenter: vc}}, now, time.Hour) // applied before it answered
	h, _, err := store.record(t.Context(), h, false, []serving{{VCenter: vc, instance: "uuid-old"}}, time.Hour, now)
	if err != nil {
		t.Fatal(err)
	}
	if got := h.Instances()["vc.example.com:443"]; len(got) != 1 || got[0] != "uuid-old" {
		t.Fatalf("instance recorded after it answered = %q, want uuid-old", got)
	}
	h, _, err = store.record(t.Context(), h, false, []serving{{VCenter: vc, instance: "uuid-new"}}, time.Hour, now.Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if len(h.Retired) != 1 || h.Retired[0].InstanceUUID != "uuid-old" {
		t.Fatalf("after another appliance answered: retired %+v, want the old instance", h.Retired)
	}
}
