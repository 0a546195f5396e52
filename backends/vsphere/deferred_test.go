package vsphere_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/backends"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config/credentials"
)

// backsNothing is a leader that has logged in with nothing yet.
type backsNothing struct{}

func (backsNothing) Backs(context.Context, credentials.Account, time.Time) error {
	return errors.New("the leader has not logged in")
}

func (backsNothing) Refusal(credentials.Account) (time.Time, int, bool) { return time.Time{}, 0, false }

// A standby's deferred login sends nothing, so it says nothing of
// vCenter: the vCenter is not known down for it, and once this replica
// leads, its first lookup logs in and answers. (It was marked down: the
// CCM's first lookups after the deferral failed fast as vcenter_down.)
func TestDeferredLoginLeavesTheVCenterNotDown(t *testing.T) {
	f := startFederation(t, 1)
	vc := f.VCenters[0]
	ledger := credentials.NewLedger()
	ledger.Follow(backsNothing{})
	cfg := &config.Config{}
	vcfg := config.VCenter{Name: vc.Name, Server: vc.Host, Port: vc.Port, InsecureFlag: true,
		User: vc.User, Password: config.Password(vc.Password), RoundTripCount: 1}.WithDefaults()
	b := newBackend(t, vc, credentials.ForVCenter(cfg, vcfg, nil, ledger), nil)
	q := backends.Query{By: backends.ByUUID, Values: []string{vc.VMs[0].UUID}}

	_, err := b.Find(t.Context(), q)
	if !errors.Is(err, credentials.ErrDeferred) {
		t.Fatalf("Find on a standby: %v, want ErrDeferred", err)
	}
	if r := b.Status().Reachability; r.State == backends.ConnDown {
		t.Fatalf("after a deferred login the vCenter is %v (%v): nothing was sent to it", r.State, r.Err)
	}

	ledger.Lead(nil)
	vms, err := b.Find(t.Context(), q)
	if err != nil || len(vms) != 1 {
		t.Fatalf("Find once leading: %v, %v; want the VM", vms, err)
	}
	if r := b.Status().Reachability; r.State != backends.ConnUp {
		t.Fatalf("after the leader's login the vCenter is %v (%v), want up", r.State, r.Err)
	}
}
