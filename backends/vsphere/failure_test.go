package vsphere

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/vmware/govmomi/simulator"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/backends"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config/credentials"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/test/vcsim"
)

// Every failure leaves the backend sorted, so callers tell them apart with
// errors.Is and never by text or by govmomi's types: no answer is
// ErrUnreachable, a refused login or session ErrAuth, and an answer about
// a VM is neither.
func TestFailuresAreSortedForErrorsIs(t *testing.T) {
	kinds := func(err error) (auth, unreachable, notFound bool) {
		return errors.Is(err, backends.ErrAuth), errors.Is(err, backends.ErrUnreachable), errors.Is(err, backends.ErrNotFound)
	}
	find := func(b *Backend, uuid string) error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, err := b.Find(ctx, backends.Query{By: backends.ByUUID, Values: []string{uuid}})
		return err
	}
	newB := func(t *testing.T, o Options) *Backend {
		b := New(o)
		b.Start()
		t.Cleanup(func() { _ = b.Close(context.Background()) })
		return b
	}

	t.Run("refused", func(t *testing.T) {
		vc, p := vcsim.StartProxied(t, vcsim.Options{Datacenters: 1})
		if err := p.SetMode(vcsim.Refuse); err != nil {
			t.Fatal(err)
		}
		err := find(newB(t, optionsVia(vc, p.Host(), p.Port(), 2*time.Second)), vc.VMs[0].UUID)
		if a, u, nf := kinds(err); a || !u || nf {
			t.Fatalf("refused: auth %v unreachable %v notFound %v, want unreachable only: %v", a, u, nf, err)
		}
	})
	t.Run("black-holed", func(t *testing.T) {
		vc, p := vcsim.StartProxied(t, vcsim.Options{Datacenters: 1})
		if err := p.SetMode(vcsim.Blackhole); err != nil {
			t.Fatal(err)
		}
		err := find(newB(t, optionsVia(vc, p.Host(), p.Port(), time.Second)), vc.VMs[0].UUID)
		if a, u, nf := kinds(err); a || !u || nf || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("black-holed: auth %v unreachable %v notFound %v deadline %v, want unreachable and deadline: %v",
				a, u, nf, errors.Is(err, context.DeadlineExceeded), err)
		}
	})
	t.Run("wrong password", func(t *testing.T) {
		vc, p := vcsim.StartProxied(t, vcsim.Options{Datacenters: 1})
		o := optionsVia(vc, p.Host(), p.Port(), 5*time.Second)
		o.Credentials = credentials.Static{User: vc.User, Password: config.Password("not-" + vc.Password)}
		err := find(newB(t, o), vc.VMs[0].UUID)
		if a, u, nf := kinds(err); !a || u || nf {
			t.Fatalf("wrong password: auth %v unreachable %v notFound %v, want auth only: %v", a, u, nf, err)
		}
	})
	t.Run("session refused after login", func(t *testing.T) {
		vc, p := vcsim.StartProxied(t, vcsim.Options{Datacenters: 1})
		b := newB(t, optionsVia(vc, p.Host(), p.Port(), 5*time.Second))
		if err := find(b, vc.VMs[0].UUID); err != nil {
			t.Fatal(err)
		}
		// Every lookup refused as not authenticated, logging in again too.
		rules := vc.InjectFault(simulator.FaultTypeNotAuthenticated, 1, "FindByUuid", "RetrievePropertiesEx")
		defer rules.Remove()
		err := find(b, vc.VMs[0].UUID)
		if a, u, nf := kinds(err); !a || u || nf {
			t.Fatalf("NotAuthenticated: auth %v unreachable %v notFound %v, want auth only: %v", a, u, nf, err)
		}
	})
	t.Run("VM gone", func(t *testing.T) {
		vc, p := vcsim.StartProxied(t, vcsim.Options{Datacenters: 1})
		b := newB(t, optionsVia(vc, p.Host(), p.Port(), 5*time.Second))
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, err := b.Get(ctx, backends.VMRef{Datacenter: "datacenter-2", ID: "vm-does-not-exist"})
		if a, u, nf := kinds(err); a || u || !nf {
			t.Fatalf("a VM gone: auth %v unreachable %v notFound %v, want notFound only: %v", a, u, nf, err)
		}
	})
}
