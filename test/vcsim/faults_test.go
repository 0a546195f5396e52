package vcsim

import (
	"context"
	"testing"
	"time"

	"github.com/vmware/govmomi/fault"
	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25/types"
)

// TestFaultRulesCountTheirOwnInjections checks that each rule set counts
// the faults of its own rules, by method, beside another set on the same
// simulator, and that a removed set injects nothing more.
func TestFaultRulesCountTheirOwnInjections(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	f, err := Start(Options{VCenters: 1, Datacenters: 1, MachinesPerPool: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	vc := f.VCenters[0]
	c, err := vc.Client(ctx)
	if err != nil {
		t.Fatal(err)
	}
	si := object.NewSearchIndex(c.Client)
	find := func() error {
		_, err := si.FindAllByUuid(ctx, nil, vc.VMs[0].UUID, true, types.NewBool(false))
		return err
	}

	never := vc.InjectFault(simulator.FaultTypeNotAuthenticated, 0, "FindAllByUuid")
	always := vc.InjectFault(simulator.FaultTypeNotAuthenticated, 1, "FindAllByUuid", "RetrieveProperties")
	for range 3 {
		if err := find(); !fault.Is(err, &types.NotAuthenticated{}) {
			t.Fatalf("FindAllByUuid with a rule at probability 1: %v, want NotAuthenticated", err)
		}
	}
	if got := always.Injected(); got["FindAllByUuid"] != 3 || got["RetrieveProperties"] != 0 {
		t.Errorf("the injecting set counted %v, want FindAllByUuid 3 and RetrieveProperties 0", got)
	}
	if got := never.Injected(); got["FindAllByUuid"] != 0 {
		t.Errorf("the set at probability 0 counted %v, want nothing", got)
	}

	always.Remove()
	if err := find(); err != nil {
		t.Fatalf("FindAllByUuid after Remove: %v", err)
	}
	if got := always.Injected(); len(got) != 0 {
		t.Errorf("a removed set counted %v, want nothing", got)
	}
	never.Remove()
}
