package cloud

// The registry of backends: one per configured vCenter, kept while its
// connection settings are unchanged, replaced (and the old one closed)
// when they change. ("Retired" is a vCenter that left the config: see
// history.go.)

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/backends"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config/credentials"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/discovery"
)

// builtBackend is a backend and the settings it was built with.
type builtBackend struct {
	backends.Backend
	key connectionKey
}

// connectionKey is what a backend is built from (its sessions, and whether
// it keeps an inventory); a change builds a new one.
type connectionKey struct {
	server, caFile, thumbprint, credentials string
	port                                    int
	insecure, inventory                     bool
	roundTrips                              uint
	// hostGroups: the backend reads the clusters' host groups (zones
	// from host groups), which its inventory's filter asks for: turning
	// them on or off builds a new one (a login and a load, once).
	hostGroups bool
}

// applyLocked makes cfg current: a backend per vCenter (kept when its
// connection settings are unchanged), and discovery's members of them,
// with the history, handed over at once; backends of removed or changed
// vCenters are closed once lookups in flight are done.
func (f *fleet) applyLocked(ctx context.Context, cfg *config.Config) {
	old := f.served.Load()
	next := &servedConfig{cfg: cfg, backends: make(map[string]*builtBackend, len(cfg.VCenters))}
	vcs := make([]discovery.Target, 0, len(cfg.VCenters))
	for _, vc := range cfg.VCenters {
		// What vCenter refused is kept in the fleet's ledger, so a backend
		// rebuilt by an edit does not send it again at once.
		creds := credentials.ForVCenter(cfg, vc, f.secrets, f.ledger)
		key := connectionKey{
			server: vc.Server, port: vc.Port, insecure: vc.InsecureFlag, caFile: vc.CAFile,
			thumbprint: strings.Join(vc.Thumbprints, ","), roundTrips: vc.RoundTripCount,
			credentials: credentialsKey(creds), inventory: vc.Inventory, hostGroups: vc.ZoneHostGroups != nil,
		}
		b, ok := old.backends[vc.Name]
		if !ok || b.key != key {
			// Backends are built by Start's first apply and later ones,
			// so each starts at once.
			b = &builtBackend{Backend: f.opts.NewBackend(vc, creds), key: key}
			b.Start()
		} else {
			// Kept: an edited budget and edited datacenters apply to it
			// in place (a new one has them from vc).
			b.SetBudget(vc.RequestsPerSecond, vc.RequestBurst)
			b.SetDatacenters(vc.DatacenterSpecs())
		}
		next.backends[vc.Name] = b
		vcs = append(vcs, discovery.Target{
			Name: vc.Name, Server: discovery.ServerKey(vc.Server, vc.Port), Host: vc.Server, Backend: b.Backend, Datacenters: vc.DatacenterSpecs(), RequestTimeout: vc.RequestTimeout,
			ConsecutiveFailures: vc.Breaker.ConsecutiveFailures, OpenTimeout: vc.Breaker.OpenTimeout,
			// Not in the connectionKey: an edit of it keeps the backend.
			NodeDeletion: vc.NodeDeletion,
		})
	}
	// What leaves the config is retired in the members that stop asking it.
	changed := f.history.update(servingOf(cfg, next.backends), time.Now(), cfg.RetiredRetention)
	f.historyUnsaved = f.historyUnsaved || changed
	f.served.Store(next)
	members, dropped := f.discovery.Members().Next(vcs)
	f.publishHistoryLocked(members)
	if f.ctx.Err() != nil { // closed: so are its members
		members.Close()
	}
	for _, m := range dropped {
		m.Close()
	}
	f.reportNoticesLocked(cfg)
	// Lookups in flight run under the deadlines of the config they began
	// with: the old one's count too.
	var grace time.Duration
	for _, vc := range append(slices.Clone(cfg.VCenters), old.cfg.VCenters...) {
		grace = max(grace, vc.RequestTimeout)
	}
	for name, b := range old.backends {
		if next.backends[name] != b {
			f.closeLaterLocked(ctx, name, b, 2*grace+time.Second, grace)
		}
	}
	if f.watcher != nil {
		f.watcher.setSecretsDirectory(cfg.SecretsDirectory)
	}
	if f.secrets != nil {
		var refs []credentials.SecretRef
		for _, vc := range cfg.VCenters {
			r := credentials.SecretRef{Namespace: vc.SecretNamespace, Name: vc.SecretName}
			if vc.CredentialsFrom == config.FromSecret && !slices.Contains(refs, r) {
				refs = append(refs, r)
			}
		}
		f.secrets.Watch(refs)
	}
}

// servingOf is cfg's vCenters as the history compares them, with their
// backends' instance UUIDs and their datacenters by name (the one
// identity VMs and labels carry too): a datacenter named by its path and
// then by its name is one. A managed object ID stays as written (only its
// vCenter knows the name): an edit between it and the name of the same
// datacenter retires the other form for a while, which delays deletions
// there and never hastens one.
func servingOf(cfg *config.Config, built map[string]*builtBackend) []serving {
	out := make([]serving, 0, len(cfg.VCenters))
	for _, vc := range cfg.VCenters {
		if len(vc.Datacenters) > 0 {
			names := make([]string, 0, len(vc.Datacenters))
			for _, spec := range vc.DatacenterSpecs() {
				name, ok := spec.Name()
				if !ok {
					name = spec.Raw
				}
				if !slices.Contains(names, name) {
					names = append(names, name)
				}
			}
			vc.Datacenters = names
		}
		s := serving{VCenter: vc}
		if b, ok := built[vc.Name]; ok {
			s.instance = b.State().InstanceUUID
		}
		out = append(out, s)
	}
	return out
}

// publishHistoryLocked hands discovery members with the history: as
// unknown until a record has been read, and while what this process
// learned is not written. Its memory dies with it: a vCenter added and
// removed while every write failed would be forgotten by a restart, and
// the Nodes of its VMs taken for gone, had any been deleted meanwhile.
func (f *fleet) publishHistoryLocked(members *discovery.Members) {
	unknown := f.historyUnread
	if unknown == "" && f.historyUnsaved && f.store.writes() {
		unknown = "what this process learned of the vCenters served is not written to configmap " +
			f.opts.HistoryObject.String() + " yet"
	}
	f.discovery.Use(members.WithHistory(f.history.History, unknown))
}

// closeLaterLocked logs a replaced backend out once lookups that started
// with it have had their deadline, or at once when the fleet closes;
// close waits for it. It outlives ctx (the reload that replaced b),
// keeping its values. The caller holds f.mu, so that close, which cancels
// f.ctx before taking it, never waits while a goroutine is added.
func (f *fleet) closeLaterLocked(ctx context.Context, name string, b backends.Backend, after, deadline time.Duration) {
	closeIt := func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), deadline)
		defer cancel()
		if err := b.Close(ctx); err != nil {
			klog.FromContext(ctx).Info("Closing a replaced vCenter session failed", "vcenter", name, "err", err)
		}
	}
	if f.ctx.Err() != nil { // close may be waiting already: no new goroutine
		closeIt()
		return
	}
	f.goroutines.Go(func() {
		t := time.NewTimer(after)
		defer t.Stop()
		select {
		case <-t.C:
		case <-f.ctx.Done():
		}
		closeIt()
	})
}

// credentialsKey identifies a credential source. Secret and directory
// sources are re-read at every login; inline credentials are fixed values,
// so a change of them is a new source (compared by digest, never kept).
func credentialsKey(src credentials.Source) string {
	switch s := src.(type) {
	case credentials.Static:
		sum := credentials.Credentials(s).Fingerprint()
		return fmt.Sprintf("%s %x", s, sum[:8])
	case *credentials.Chain:
		keys := make([]string, 0, len(s.Links()))
		for _, l := range s.Links() {
			keys = append(keys, credentialsKey(l))
		}
		return strings.Join(keys, ", then ")
	}
	return src.String()
}

// credentialsObject is the object Events about a vCenter's credentials go
// to: its Secret when it has one, else the config's event object.
func (f *fleet) credentialsObject(vc config.VCenter) *v1.ObjectReference {
	if vc.CredentialsFrom == config.FromSecret {
		return &v1.ObjectReference{Kind: "Secret", APIVersion: "v1", Namespace: vc.SecretNamespace, Name: vc.SecretName}
	}
	return f.opts.EventObject
}
