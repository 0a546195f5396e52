// Package cloud is the router: a cloudprovider.Interface whose InstancesV2
// answers the cloud-node and cloud-node-lifecycle controllers for Nodes in
// any of several vCenters, through package discovery. It holds the fleet
// and composes its rooms: instances (the read-only InstancesV2), nodes
// (the one writer of Nodes), events and metadata below them.
package cloud

import (
	"cmp"
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/klog/v2"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/backends"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/cloud/events"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/cloud/instances"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/cloud/nodes"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/cloud/problems"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config/credentials"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/discovery"
)

// ProviderName is CPI's, so this CCM is a drop-in replacement.
const ProviderName = "vsphere"

// ClientName is the name Initialize asks the controller manager's client
// builder for (with --use-service-account-credentials, a ServiceAccount's).
const ClientName = "vsphere-federated-ccm"

var (
	_ cloudprovider.Interface   = (*Cloud)(nil)
	_ cloudprovider.InstancesV2 = (*Cloud)(nil)
	// The controllers' shared informers: Nodes watched once.
	_ cloudprovider.InformerUser = (*Cloud)(nil)
)

// BackendFactory builds the backend of one vCenter.
type BackendFactory func(vc config.VCenter, creds credentials.Source) backends.Backend

// Options tune a Cloud; zero values are production defaults, but for
// NewBackend.
type Options struct {
	// NewBackend builds each vCenter's backend; required (cmd builds
	// backends/vsphere's, tests may build in-memory ones).
	NewBackend BackendFactory
	Discovery  discovery.Options
	// ConfigPath, when set, is watched: edits are applied in place.
	ConfigPath string
	// Metrics, when set, are updated (the caller registers them).
	Metrics *Metrics
	// EventObject is where Events about the configuration go; default the
	// CCM's leader-election Lease, kube-system/cloud-controller-manager.
	EventObject *v1.ObjectReference
	// HistoryObject is the ConfigMap recording the vCenters served (see
	// configHistory) and the leader's logins (logins.go); default
	// kube-system/DefaultHistoryObject.
	HistoryObject types.NamespacedName
	// LeaderLease is the leader-election Lease: a standby reads whether
	// the logins recorded are its holder's; default
	// kube-system/cloud-controller-manager.
	LeaderLease types.NamespacedName
	// NodeLabels are added to every Node at initialization (CPI's
	// --node-labels).
	NodeLabels map[string]string
	// ConfigEnv is the environment the config file is read in (CPI's
	// VSPHERE_* overrides, its default secrets directory); zero: none.
	ConfigEnv config.Env
	// SkipNodeDeletion is CPI's SKIP_NODE_DELETION switch: a VM confirmed
	// absent is reported as an error, so no Node is ever deleted.
	SkipNodeDeletion bool
	// RecoveryPoll is how often vCenters' health is checked to re-queue
	// uninitialized Nodes when one comes back; default 1s.
	RecoveryPoll time.Duration
	// DuplicateScan is how often the vCenters' inventories are compared
	// for BIOS UUIDs held in several vCenters (discovery.ScanDuplicates);
	// default 1s.
	DuplicateScan time.Duration
	// UnmanagedNodeSelector marks, besides the label nodes.LabelUnmanaged=true,
	// the Nodes this CCM leaves alone (--unmanaged-node-selector); nil:
	// the label only.
	UnmanagedNodeSelector labels.Selector
	// UninitializedAfter is how long a Node may carry the uninitialized
	// taint before its NodeUninitialized Event; default
	// nodes.DefaultUninitializedAfter.
	UninitializedAfter time.Duration
	// NodeResync is how often every Node is compared with its VM even
	// when no inventory changed (drift.go); default nodes.DefaultNodeResync.
	NodeResync time.Duration
	// ProblemCheckInterval is how often the leader runs the periodic
	// checks (package problems); default DefaultProblemCheckInterval,
	// less than 0: never.
	ProblemCheckInterval time.Duration
}

// DefaultProblemCheckInterval is how often the periodic checks run.
const DefaultProblemCheckInterval = 10 * time.Minute

// Cloud is the vsphere cloud provider. It only puts its owners together:
// the fleet (the config and everything built from it), instances
// (cloudprovider.InstancesV2, which reads through the fleet and writes
// nothing) and nodes (the one writer of Nodes).
type Cloud struct {
	events    *events.Log
	fleet     *fleet
	instances *instances.Instances
	nodes     *nodes.Owner

	// ctx is the provider's life: every goroutine Prepare, Start,
	// SetInformers and Inspect start runs under it, and workers waits for
	// them. Stop, or a stop channel given to Prepare or Start closing,
	// cancels it.
	ctx     context.Context
	cancel  context.CancelFunc
	workers sync.WaitGroup

	// mu guards starting: nothing starts once ctx is cancelled (Stop
	// cancels it under mu, then waits). client is the one Start was given,
	// which the Node owner writes with; watching is set once SetInformers
	// started the Node owner.
	mu       sync.Mutex
	prepared bool
	started  bool
	watching bool
	client   kubernetes.Interface
	// logins is the leader's record of vCenter logins: read by a
	// prepared standby, written once this replica leads.
	logins *logins
}

// New returns a provider for cfg; it starts nothing and talks to no
// vCenter until Prepare, Start or Inspect.
func New(cfg *config.Config, opts Options) *Cloud {
	if opts.NewBackend == nil {
		// Which backend to build is the caller's choice (cmd builds
		// backends/vsphere's); a provider without one cannot run.
		panic("cloud.New: Options.NewBackend is required")
	}
	if opts.Metrics == nil {
		// Metrics nobody registered count nothing: no "no metrics" mode.
		opts.Metrics = NewMetrics(BuildInfo{})
	}
	opts.Discovery.Observer = cmp.Or[discovery.Observer](opts.Discovery.Observer, opts.Metrics)
	opts.HistoryObject.Name = cmp.Or(opts.HistoryObject.Name, DefaultHistoryObject)
	opts.HistoryObject.Namespace = cmp.Or(opts.HistoryObject.Namespace, "kube-system")
	if opts.LeaderLease.Name == "" {
		opts.LeaderLease = types.NamespacedName{Namespace: "kube-system", Name: "cloud-controller-manager"}
	}
	opts.RecoveryPoll = cmp.Or(opts.RecoveryPoll, time.Second)
	opts.DuplicateScan = cmp.Or(opts.DuplicateScan, time.Second)
	opts.NodeResync = cmp.Or(opts.NodeResync, nodes.DefaultNodeResync)
	opts.EventObject = cmp.Or(opts.EventObject, &v1.ObjectReference{
		Kind: "Lease", APIVersion: "coordination.k8s.io/v1", Namespace: "kube-system", Name: "cloud-controller-manager",
	})
	opts.ProblemCheckInterval = cmp.Or(opts.ProblemCheckInterval, DefaultProblemCheckInterval)
	opts.UninitializedAfter = cmp.Or(opts.UninitializedAfter, nodes.DefaultUninitializedAfter)
	c := &Cloud{events: &events.Log{}}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	// The fleet's discovery reports duplicates and its history the legacy
	// label's cutoff to the Node owner, built right after it: neither is
	// reported before Prepare, Start or Inspect.
	if opts.Discovery.OnDuplicate == nil {
		opts.Discovery.OnDuplicate = func(uuid string, vcenters []string) { c.nodes.NoteDuplicate(uuid, vcenters) }
	}
	c.fleet = newFleet(cfg, opts, c.events, func(k nodes.LegacyCutoff) { c.nodes.SetCutoff(k) })
	c.nodes = nodes.New(c.events, nodes.Options{Discovery: c.fleet.discovery, Config: c.fleet.config,
		Poll: opts.RecoveryPoll, Resync: opts.NodeResync, UninitializedAfter: opts.UninitializedAfter,
		UnmanagedNodeSelector: opts.UnmanagedNodeSelector, EventObject: opts.EventObject, Metrics: opts.Metrics.nodes})
	c.instances = instances.New(c.events, instances.Options{Discovery: c.fleet.discovery, Config: c.fleet.config,
		Nodes: c.nodes, NodeLabels: opts.NodeLabels, SkipNodeDeletion: opts.SkipNodeDeletion})
	return c
}

// NewFromFile loads the config at path and returns a provider that applies
// later edits of the file in place once started.
func NewFromFile(path string, opts Options) (*Cloud, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("vsphere: %w", err)
	}
	cfg, err := config.ParseIn(data, opts.ConfigEnv)
	if err != nil {
		return nil, fmt.Errorf("vsphere: %s: %w", path, err)
	}
	opts.ConfigPath = path
	c := New(cfg, opts)
	c.fleet.applied = sha256.Sum256(data)
	return c, nil
}

// Initialize implements cloudprovider.Interface: Start with the client
// the controller manager builds for ClientName.
func (c *Cloud) Initialize(clientBuilder cloudprovider.ControllerClientBuilder, stop <-chan struct{}) {
	c.Start(clientBuilder.ClientOrDie(ClientName), stop)
}

// Prepare starts, ahead of Start, everything a standby replica may run
// while another holds the leader lease, so that taking the lease serves
// at once: the Secrets credentials are read from, the watch of the config
// file and its reloads, and the vCenter backends with their inventories
// and tag caches. It writes nothing to the cluster: no Event, no Node
// write, no write of the history (it is read). Start adds the writers and
// keeps these backends. client must not be nil. It runs until Stop, or
// until stop closes.
func (c *Cloud) Prepare(client kubernetes.Interface, stop <-chan struct{}) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if client == nil || c.prepared || c.started || c.ctx.Err() != nil {
		return
	}
	c.prepared = true
	c.stopOnLocked(stop)
	// A standby sends vCenter only credentials the leader logged in with,
	// and retries none it was refused: together the replicas are refused
	// no more often than the leader alone.
	c.logins = newLogins(client, c.fleet.opts.HistoryObject, c.fleet.opts.LeaderLease, c.fleet.ledger)
	c.fleet.ledger.Follow(c.logins)
	c.workers.Go(func() { c.logins.follow(c.ctx, c.fleet.RequestReload) })
	c.prepareLocked(client, false)
	// Lookups load and refresh the tag caches; a standby makes none.
	c.workers.Go(func() { c.fleet.warmTags(c.ctx, warmPeriod) })
}

// prepareLocked starts the reading part of the provider: what readLocked
// reads, the config file watched and applied (the backends built and
// started), reloads.
func (c *Cloud) prepareLocked(client kubernetes.Interface, writeHistory bool) {
	c.readLocked(client, writeHistory)
	c.fleet.watchFile()
	c.fleet.apply(c.ctx)
	c.workers.Go(func() {
		retryLoop(c.ctx, c.fleet.reloads, historyRetry, func() bool { return c.fleet.Reload(c.ctx) })
	})
	c.fleet.RequestReload() // reads the history (and records it when it writes), retried until it is known
}

// readLocked starts the duplicate scan and reads, through client (nil:
// none), the Secrets and the history, written when writeHistory.
func (c *Cloud) readLocked(client kubernetes.Interface, writeHistory bool) {
	c.workers.Go(func() { c.fleet.scanDuplicates(c.ctx) })
	if client != nil {
		secrets := c.fleet.useCluster(client, writeHistory)
		c.workers.Go(func() { <-c.ctx.Done(); secrets.Close() })
	}
}

// stopOnLocked makes stop's closing end the provider, as Stop does but
// for the logouts.
func (c *Cloud) stopOnLocked(stop <-chan struct{}) {
	c.workers.Go(func() {
		select {
		case <-stop:
			c.cancel()
		case <-c.ctx.Done():
		}
	})
}

// Start connects the provider to Kubernetes (Secrets, Events, the history
// ConfigMap; client may be nil: none) and creates the vCenter backends,
// unless Prepare did: then it adds only the writers (Events, the history
// written, the leader's logins published) and keeps Prepare's backends.
// SetInformers adds the Node owner. Sessions open lazily, in parallel, on
// first lookup, or as inventories load. It runs until Stop, or until
// stop closes.
func (c *Cloud) Start(client kubernetes.Interface, stop <-chan struct{}) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.started || c.ctx.Err() != nil {
		return
	}
	c.started = true
	c.stopOnLocked(stop)
	if client != nil {
		c.client = client
		// Bound before the config is reported on (prepareLocked, lead).
		b := record.NewBroadcaster()
		b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events("")})
		c.events.Bind(b.NewRecorder(scheme.Scheme, v1.EventSource{Component: "vsphere-federated-ccm"}))
		c.workers.Go(func() { <-c.ctx.Done(); b.Shutdown() })
		if c.logins == nil {
			c.logins = newLogins(client, c.fleet.opts.HistoryObject, c.fleet.opts.LeaderLease, c.fleet.ledger)
		}
		c.fleet.ledger.Lead(c.logins.changed)
		c.workers.Go(func() { c.logins.publish(c.ctx) })
	}
	if !c.prepared {
		c.prepareLocked(client, true)
		return
	}
	if client != nil {
		c.fleet.lead(client)
	}
	c.fleet.RequestReload() // records the history
}

// SetInformers implements cloudprovider.InformerUser; the controller
// manager calls it right after Initialize and starts factory once it
// returns. It starts the Node owner (every write to Nodes) and the
// periodic checks over factory's Node informer, so that each Node is
// watched and held once, with the client Start was given: before Start,
// without a client, or a second time, it starts nothing.
func (c *Cloud) SetInformers(factory informers.SharedInformerFactory) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.watching || c.ctx.Err() != nil {
		return
	}
	if c.client == nil {
		klog.Background().Error(nil, "Shared informers handed over before Start gave a client: the Node owner does not run")
		return
	}
	c.watching = true
	ctx, client := c.ctx, c.client
	w := c.nodes.Watch(factory)
	c.instances.Watch(w)
	c.workers.Go(func() { c.nodes.Run(ctx, client, w) })
	if opts := c.fleet.opts; opts.ProblemCheckInterval > 0 {
		d := problems.New(func(ctx context.Context) problems.Inputs { return c.fleet.problemInputs(ctx, w, c.nodes.Unmanaged) },
			c.events, opts.EventObject, opts.Metrics.problems, opts.ProblemCheckInterval)
		c.workers.Go(func() {
			// After the Node cache is synced: an empty list is no finding.
			if cache.WaitForCacheSync(ctx.Done(), w.Informer.HasSynced) {
				d.Run(ctx)
			}
		})
	}
}

// Inspect readies a provider that neither Prepare nor Start started for
// `diagnose`'s lookups, as the running CCM would make them, and writes
// nothing: the Secrets and the record of the vCenters served are read
// through client (the current config folded into the record in memory),
// the config applied once (no watch of the file, no reload), and every
// vCenter's connection settled once (a login each, in parallel; none is
// written to), so that none is "still connecting". Lookups, logins and
// inventories are the running CCM's own. It reports whether the record
// could be read; until it is, no VM is reported gone. Stop ends it.
func (c *Cloud) Inspect(ctx context.Context, client kubernetes.Interface) bool {
	c.mu.Lock()
	if c.prepared || c.started || c.ctx.Err() != nil {
		c.mu.Unlock()
		return false
	}
	c.started = true
	c.readLocked(client, false)
	c.fleet.apply(c.ctx) //nolint:contextcheck // the backends live as long as the provider, not this call
	c.mu.Unlock()
	read := c.fleet.recordHistory(ctx)
	c.fleet.discovery.Connect(ctx)
	return read
}

// Stop ends what Prepare, Start, SetInformers and Inspect started and
// waits for it, then logs every vCenter session out, replaced ones too,
// and stops the background probes.
func (c *Cloud) Stop(ctx context.Context) {
	c.mu.Lock()
	c.cancel()
	c.mu.Unlock()
	c.workers.Wait()
	c.fleet.close(ctx)
}

// Reload re-reads the config file and every vCenter's credentials now
// (fleet.Reload); it reports whether the history (and the legacy label's
// cutoff) is recorded.
func (c *Cloud) Reload(ctx context.Context) bool { return c.fleet.Reload(ctx) }

// InstanceExists implements cloudprovider.InstancesV2 (instances.Instances).
func (c *Cloud) InstanceExists(ctx context.Context, node *v1.Node) (bool, error) {
	return c.instances.InstanceExists(ctx, node)
}

// InstanceShutdown implements cloudprovider.InstancesV2 (instances.Instances).
func (c *Cloud) InstanceShutdown(ctx context.Context, node *v1.Node) (bool, error) {
	return c.instances.InstanceShutdown(ctx, node)
}

// InstanceMetadata implements cloudprovider.InstancesV2 (instances.Instances).
func (c *Cloud) InstanceMetadata(ctx context.Context, node *v1.Node) (*cloudprovider.InstanceMetadata, error) {
	return c.instances.InstanceMetadata(ctx, node)
}

// Locate finds node's VM exactly as the InstancesV2 methods do, for
// `diagnose` (instances.Instances.Locate).
func (c *Cloud) Locate(ctx context.Context, node *v1.Node) (*discovery.Result, error) {
	return c.instances.Locate(ctx, node)
}

// Unmanaged says why node is not this CCM's ("" when it is), for
// `diagnose`; it records nothing.
func (c *Cloud) Unmanaged(node *v1.Node) string { return c.nodes.Judge(node).Why }

// LoadBalancer implements cloudprovider.Interface: not supported.
func (c *Cloud) LoadBalancer() (cloudprovider.LoadBalancer, bool) { return nil, false }

// Instances implements cloudprovider.Interface: InstancesV2 replaces it.
func (c *Cloud) Instances() (cloudprovider.Instances, bool) { return nil, false }

// InstancesV2 implements cloudprovider.Interface.
func (c *Cloud) InstancesV2() (cloudprovider.InstancesV2, bool) { return c.instances, true }

// Zones implements cloudprovider.Interface: InstanceMetadata carries zones.
func (c *Cloud) Zones() (cloudprovider.Zones, bool) { return nil, false }

// Clusters implements cloudprovider.Interface: not supported.
func (c *Cloud) Clusters() (cloudprovider.Clusters, bool) { return nil, false }

// Routes implements cloudprovider.Interface: not supported.
func (c *Cloud) Routes() (cloudprovider.Routes, bool) { return nil, false }

// ProviderName implements cloudprovider.Interface.
func (c *Cloud) ProviderName() string { return ProviderName }

// HasClusterID implements cloudprovider.Interface.
func (c *Cloud) HasClusterID() bool { return true }
