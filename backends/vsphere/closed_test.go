package vsphere_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/backends"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/backends/vsphere"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config/credentials"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/test/vcsim"
)

// A closed backend never connects again: every call fails with ErrClosed
// and no request reaches vCenter. A login after Close would never be
// logged out, and its keep-alive would hold it on vCenter for ever.
func TestClosedBackendNeverConnects(t *testing.T) {
	for _, inventory := range []bool{false, true} {
		t.Run(fmt.Sprintf("inventory=%v", inventory), func(t *testing.T) {
			f := startFederation(t, 1)
			vc := f.VCenters[0]
			var requests atomic.Int64
			const heartbeat = 500 * time.Millisecond
			b := vsphere.New(vsphere.Options{
				Config: config.VCenter{
					Name: vc.Name, Server: vc.Host, Port: vc.Port, InsecureFlag: true, RoundTripCount: 1, RequestTimeout: 5 * time.Second,
				}.WithDefaults(),
				Credentials:   credentials.Static{User: vc.User, Password: config.Password(vc.Password)},
				WrapTransport: vcsim.CountRequests(&requests),
				Inventory:     inventory,
				Heartbeat:     heartbeat,
				TagRefresh:    time.Hour,
			})
			b.Start()
			t.Cleanup(func() { _ = b.Close(context.Background()) })
			ctx := t.Context()
			want := vc.VMs[0]
			vms, err := b.Find(ctx, backends.Query{By: backends.ByUUID, Values: []string{want.UUID}, AllowCached: true})
			if err != nil || len(vms) != 1 {
				t.Fatalf("Find before Close = %v, %v", vms, err)
			}
			vm := vms[0]
			if err := b.Close(ctx); err != nil {
				t.Fatalf("Close: %v", err)
			}
			if s, err := vc.Sessions(ctx); err != nil || len(s) != 0 {
				t.Fatalf("after Close: %d sessions on vCenter (err %v), want 0", len(s), err)
			}
			requests.Store(0)
			_, callsBefore := vc.SOAPCalls()

			for name, call := range map[string]func() error{
				"Find": func() error {
					_, err := b.Find(ctx, backends.Query{By: backends.ByUUID, Values: []string{want.UUID}})
					return err
				},
				"Find cached": func() error {
					_, err := b.Find(ctx, backends.Query{By: backends.ByUUID, Values: []string{want.UUID}, AllowCached: true})
					return err
				},
				"Get":   func() error { _, err := b.Get(ctx, vm.Ref); return err },
				"Tags":  func() error { _, err := b.Tags(ctx, &vm, []string{"k8s-zone"}); return err },
				"Probe": func() error { return b.Probe(ctx) },
				"RefreshCredentials": func() error {
					_, err := b.RefreshCredentials(ctx, time.Millisecond)
					return err
				},
			} {
				if err := call(); !errors.Is(err, backends.ErrClosed) {
					t.Errorf("%s after Close: err = %v, want ErrClosed", name, err)
				}
			}
			if inventory {
				// Long enough for the watch to have reconnected (its first
				// retry comes after about a second) had it survived Close.
				time.Sleep(2 * time.Second)
			}
			if n := requests.Load(); n != 0 {
				t.Errorf("%d requests after Close, want none", n)
			}
			if _, total := vc.SOAPCalls(); total != callsBefore {
				t.Errorf("%d SOAP calls reached vCenter after Close, want none", total-callsBefore)
			}
			if s, err := vc.Sessions(ctx); err != nil || len(s) != 0 {
				t.Errorf("%d sessions on vCenter after calls on a closed backend (err %v), want 0", len(s), err)
			}
		})
	}
}
