package vsphere_test

import (
	"context"
	"testing"
	"time"

	"github.com/vmware/govmomi/simulator"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/backends"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/backends/vsphere"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config/credentials"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/test/vcsim"
)

func setup(t *testing.T) (*vcsim.VCenter, *vsphere.Backend, backends.Query, context.Context) {
	f, err := vcsim.Start(vcsim.Options{VCenters: 1, Datacenters: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	vc := f.VCenters[0]
	b := vsphere.New(vsphere.Options{Config: config.VCenter{Name: vc.Name, Server: vc.Host, Port: vc.Port, InsecureFlag: true, RoundTripCount: 1}.WithDefaults(),
		Credentials: credentials.Static{User: vc.User, Password: config.Password(vc.Password)}})
	b.Start()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return vc, b, backends.Query{By: backends.ByUUID, Values: []string{vc.VMs[0].UUID}}, ctx
}

// A terminated session shows in property reads as NotAuthenticated in the
// missingSet, not as a fault of the call: it must be re-established too.
func TestGetAfterSessionTerminated(t *testing.T) {
	vc, b, q, ctx := setup(t)
	vms, err := b.Find(ctx, q)
	if err != nil || len(vms) != 1 {
		t.Fatal(vms, err)
	}
	if _, err := vc.TerminateOtherSessions(ctx); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if _, err := b.Get(ctx, vms[0].Ref); err != nil {
			t.Errorf("Get #%d after the session was terminated: %v", i+1, err)
		}
	}
}

// NotAuthenticated answered while the server still holds the session: the
// re-login must not be refused for logging in on a live session.
func TestReloginWhileSessionValid(t *testing.T) {
	vc, b, q, ctx := setup(t)
	if _, err := b.Find(ctx, q); err != nil {
		t.Fatal(err)
	}
	vc.Model.Service.AddFaultRule(&simulator.FaultInjectionRule{MethodName: "FindAllByUuid", ObjectType: "*", ObjectName: "*", Probability: 1, FaultType: simulator.FaultTypeNotAuthenticated, MaxCount: 1, Enabled: true})
	if _, err := b.Find(ctx, q); err != nil {
		t.Errorf("Find after one NotAuthenticated answer (then retried once): %v", err)
	}
}
