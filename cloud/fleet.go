package cloud

// The fleet: the config, the vCenters' backends and the Discoverer that
// asks them (and the loop that keeps its twin index current), the Secrets
// and the file watch that feed reloads, and the history of the vCenters
// served — everything that changes when the config does (registry.go,
// reload.go, history.go, filewatch.go).

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/cloud/events"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/cloud/nodes"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config/credentials"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/discovery"
)

// servedConfig is a config applied and its vCenters' backends, by name.
// It is immutable: applyLocked builds one per config applied.
type servedConfig struct {
	cfg      *config.Config
	backends map[string]*builtBackend
}

type fleet struct {
	opts   Options // as New completed them
	events *events.Log

	// discovery is built once and handed the members of each config
	// applied, and of each record of the history learnt (Use, under mu);
	// served is that config and its backends. Both are read without mu:
	// a lookup uses the config current when it began.
	discovery *discovery.Discoverer
	served    atomic.Pointer[servedConfig]

	reloads chan struct{} // coalesced reload requests (RequestReload)

	// ctx ends at close; goroutines are the fleet's own: the file watch
	// and the closing of replaced backends (closeLaterLocked), which
	// close at once when ctx ends. close waits for them.
	ctx        context.Context
	cancel     context.CancelFunc
	goroutines sync.WaitGroup

	// mu is held while a config is applied, and guards what applying
	// one changes: every field below. Storing served happens under it
	// too, so that a reader holding mu sees the config that goes with them.
	mu sync.Mutex

	// secrets are the Secret informers credentials are read through,
	// watcher the file watch (both nil when there is nothing to watch: no
	// cluster, no start, the file of a provider readied by Inspect).
	secrets *credentials.Secrets
	// ledger keeps every vCenter's refused logins per account for all
	// the backends ever built: a rebuilt one inherits them.
	ledger  *credentials.Ledger
	watcher *fileWatcher

	// applied is the file content applied last: an unchanged file is not
	// applied again. rejected is the last rejection's content and error,
	// so a file still rejected the same way is not reported again; a
	// rejected file is validated again at every reload (validation reads
	// outside state: a caFile may appear). noticed is the config whose
	// Notices were reported last.
	applied  [32]byte
	rejected struct {
		sum [32]byte
		err string
	}
	noticed *config.Config

	// store keeps the record of the vCenters served; history is what
	// this process knows of it: the last record read, with what it
	// learned since merged in (see configHistory). historyUnsaved says
	// it holds what the store may lack, so it is merged into the next
	// read. historyUnread says why no record has been read yet; empty
	// once one has.
	store          historyStore
	history        *configHistory
	historyUnsaved bool
	historyUnread  string

	// onCutoff is given the legacy unmanaged label's cutoff each time the
	// record is read or written (nodes.Owner.SetCutoff).
	onCutoff func(nodes.LegacyCutoff)
}

// newFleet serves cfg with opts (completed by New); it talks to no vCenter
// and keeps its history in memory until useCluster.
func newFleet(cfg *config.Config, opts Options, events *events.Log, onCutoff func(nodes.LegacyCutoff)) *fleet {
	f := &fleet{opts: opts, events: events, ledger: credentials.NewLedger(), reloads: make(chan struct{}, 1),
		store: memoryHistory{}, history: &configHistory{}, onCutoff: onCutoff}
	f.ctx, f.cancel = context.WithCancel(context.Background())
	if opts.Discovery.OnIdentity == nil {
		// A vCenter answering as another instance than recorded: record
		// it, which retires the one that served before.
		opts.Discovery.OnIdentity = f.RequestReload
	}
	f.discovery = discovery.New(nil, opts.Discovery)
	f.served.Store(&servedConfig{cfg: cfg})
	opts.Metrics.scraped.fleet.Store(f)
	return f
}

// config is the config served now.
func (f *fleet) config() *config.Config { return f.served.Load().cfg }

// useCluster reads credentials from the cluster's Secrets (a change is a
// reload) and keeps the history in the ConfigMap opts.HistoryObject,
// written unless write is false. Until that record is read, a VM not
// found is not gone: one may have left the config meanwhile. The caller
// closes the Secrets returned.
func (f *fleet) useCluster(client kubernetes.Interface, write bool) *credentials.Secrets {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.secrets = credentials.NewSecrets(client, func(_, _ string) { f.RequestReload() })
	f.store = configMapHistory{client: client, object: f.opts.HistoryObject, write: write}
	f.historyUnread = "reading configmap " + f.opts.HistoryObject.String()
	return f.secrets
}

// lead makes a prepared fleet (useCluster without writes) the leader's:
// the history is written through client from now on, and what a standby
// records no Event of is reported again now that Events are recorded —
// the current config's notices, and a file still rejected.
func (f *fleet) lead(client kubernetes.Interface) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.store = configMapHistory{client: client, object: f.opts.HistoryObject, write: true}
	f.publishHistoryLocked(f.discovery.Members())
	f.rejected.sum = [32]byte{}
	f.noticed = nil
	f.reportNoticesLocked(f.config())
}

// apply makes the current config serve: its backends built, handed to
// discovery.
func (f *fleet) apply(ctx context.Context) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.applyLocked(ctx, f.config())
}

// watchFile requests a reload whenever the config file or the secrets
// directory changes, until close; it comes before the first apply, which
// names the secrets directory.
func (f *fleet) watchFile() {
	w, err := newFileWatcher(f.opts.ConfigPath)
	if err != nil {
		klog.Background().Error(err, "Watching the config file failed; edits will not be picked up")
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.goroutines.Go(func() { w.run(f.RequestReload) })
	f.watcher = w // applyLocked points it at the secrets directory
}

// scanDuplicates keeps discovery's twin index current until ctx ends: a
// pass every opts.DuplicateScan, the first at once. It runs wherever
// lookups may (a standby too), so that one found without every vCenter's
// answer is checked against an index as fresh on the replica that takes
// the lease as on the leader.
func (f *fleet) scanDuplicates(ctx context.Context) {
	tick := time.NewTicker(f.opts.DuplicateScan)
	defer tick.Stop()
	for {
		f.discovery.ScanDuplicates()
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// close stops the file watch, the members' probes, makes replaced
// backends close at once, logs every current one out and waits for the
// fleet's goroutines. The caller has stopped the reload loop.
func (f *fleet) close(ctx context.Context) {
	f.cancel() // the members of a later apply are closed at once
	defer f.goroutines.Wait()
	f.mu.Lock()
	defer f.mu.Unlock()
	f.discovery.Members().Close()
	if f.watcher != nil {
		_ = f.watcher.w.Close() // ends its run
		f.watcher = nil
	}
	for name, b := range f.served.Load().backends {
		if err := b.Backend.Close(ctx); err != nil {
			klog.FromContext(ctx).Info("Closing vCenter session failed", "vcenter", name, "err", err)
		}
	}
}
