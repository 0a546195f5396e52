// Package cloud is the router: a cloudprovider.Interface whose InstancesV2
// answers the cloud-node and cloud-node-lifecycle controllers for Nodes in
// any of several vCenters, through package discovery.
package cloud

import (
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	cloudprovider "k8s.io/cloud-provider"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/backends"
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
	_ cloudprovider.InstancesV2 = (*instances)(nil)
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
	// ReadOnly makes a provider that writes nothing, for `diagnose`: no
	// Event, no Node patch (location labels are not backfilled), no write
	// of the state ConfigMap (the record is read, and the current config
	// folded into it in memory, as the running CCM would), no watch of
	// the config file or of Nodes, no re-queue of Nodes. Lookups, logins
	// and the inventories are the running CCM's own.
	ReadOnly bool
	// AwaitInformers: the caller hands the controllers' shared informer
	// factory to SetInformers, and starts it after (the cloud-controller-
	// manager does, right after Initialize), so Nodes are watched and
	// held once; the Node owner waits for it. Otherwise it watches Nodes
	// itself.
	AwaitInformers bool
	// RecoveryPoll is how often vCenters' health is checked to re-queue
	// uninitialized Nodes when one comes back; default 1s.
	RecoveryPoll time.Duration
	// DuplicateScan is how often the vCenters' inventories are compared
	// for BIOS UUIDs held in several vCenters (discovery.ScanDuplicates);
	// default 1s.
	DuplicateScan time.Duration
	// UnmanagedNodeSelector marks, besides the label LabelUnmanaged=true,
	// the Nodes this CCM leaves alone (--unmanaged-node-selector); nil:
	// the label only.
	UnmanagedNodeSelector labels.Selector
	// UninitializedAfter is how long a Node may carry the uninitialized
	// taint before its NodeUninitialized Event; default
	// DefaultUninitializedAfter.
	UninitializedAfter time.Duration
	// NodeResync is how often every Node is compared with its VM even
	// when no inventory changed (drift.go); default DefaultNodeResync.
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
	readOnly bool
	events   *eventLog
	fleet    *fleet
	*instances
	nodes *nodes

	// mu guards starting (prepared, started, cancels, the Node owner's
	// pending start: informers, nodeClient, nodeCtx). workers are the
	// goroutines Prepare and Start run (reloads, the Node writer,
	// releasing the Secret informers and the Event broadcaster); each
	// ends when the stop it was started with closes or Stop cancels it,
	// and Stop waits for them.
	mu       sync.Mutex
	prepared bool
	started  bool
	cancels  []context.CancelFunc
	// awaitInformers is Options.AwaitInformers; informers the factory
	// SetInformers gave. nodeClient and nodeCtx are what Start would
	// have run the Node owner with while it waits for them.
	awaitInformers bool
	informers      informers.SharedInformerFactory
	nodeClient     kubernetes.Interface
	nodeCtx        context.Context
	workers        sync.WaitGroup
	// logins is the leader's record of vCenter logins: read by a
	// prepared standby, written once this replica leads.
	logins *logins
}

// New returns a provider for cfg; it talks to no vCenter until Start.
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
	if opts.Discovery.Observer == nil {
		opts.Discovery.Observer = opts.Metrics
	}
	if opts.HistoryObject.Name == "" {
		opts.HistoryObject.Name = DefaultHistoryObject
	}
	if opts.HistoryObject.Namespace == "" {
		opts.HistoryObject.Namespace = "kube-system"
	}
	if opts.LeaderLease.Name == "" {
		opts.LeaderLease = types.NamespacedName{Namespace: "kube-system", Name: "cloud-controller-manager"}
	}
	if opts.RecoveryPoll == 0 {
		opts.RecoveryPoll = time.Second
	}
	if opts.DuplicateScan == 0 {
		opts.DuplicateScan = time.Second
	}
	if opts.NodeResync == 0 {
		opts.NodeResync = DefaultNodeResync
	}
	if opts.EventObject == nil {
		opts.EventObject = &v1.ObjectReference{
			Kind: "Lease", APIVersion: "coordination.k8s.io/v1", Namespace: "kube-system", Name: "cloud-controller-manager",
		}
	}
	if opts.ProblemCheckInterval == 0 {
		opts.ProblemCheckInterval = DefaultProblemCheckInterval
	}
	if opts.UninitializedAfter == 0 {
		opts.UninitializedAfter = DefaultUninitializedAfter
	}
	c := &Cloud{readOnly: opts.ReadOnly, events: &eventLog{}, awaitInformers: opts.AwaitInformers}
	c.nodes = newNodes(c.events, opts.RecoveryPoll, opts.NodeResync, opts.Metrics.nodes)
	c.nodes.checks = newNodeChecks(c.events, opts.Metrics, opts.EventObject, opts.UninitializedAfter, newUnmanagedNodes(c.events, opts.UnmanagedNodeSelector))
	if opts.Discovery.OnDuplicate == nil {
		opts.Discovery.OnDuplicate = c.nodes.noteDuplicate
	}
	c.fleet = newFleet(cfg, opts, c.events)
	c.fleet.onCutoff = c.nodes.checks.unmanaged.setCutoff
	c.nodes.discovery = c.fleet.discovery
	opts.Metrics.health.setDuplicateSource(c.fleet.discovery.Duplicates)
	c.nodes.config = c.fleet.config
	c.instances = &instances{fleet: c.fleet, events: c.events, nodeLabels: opts.NodeLabels,
		skipNodeDeletion: opts.SkipNodeDeletion, located: c.nodes.located, checks: c.nodes.checks,
		claims: newClaims(c.events, opts.Metrics.nodes, c.nodes.checks.unmanaged)}
	if opts.ReadOnly {
		// Nothing labels a read-only provider's Nodes: nothing to keep.
		c.instances.located = func(*v1.Node, map[string]string) {}
	}
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

// Initialize implements cloudprovider.Interface.
func (c *Cloud) Initialize(clientBuilder cloudprovider.ControllerClientBuilder, stop <-chan struct{}) {
	c.Start(clientBuilder.ClientOrDie(ClientName), stop)
}

// Prepare starts, ahead of Start, everything a standby replica may run
// while another holds the leader lease, so that taking the lease serves
// at once: the Secrets credentials are read from, the watch of the config
// file and its reloads, and the vCenter backends with their inventories
// and tag caches. It writes nothing to the cluster: no Event, no Node
// write, no write of the history (it is read, as a read-only provider
// reads it). Start adds the writers and keeps these backends. client
// must not be nil; a read-only provider is not prepared (its Start does
// all it does). What Prepare starts ends when stop closes or at Stop.
func (c *Cloud) Prepare(client kubernetes.Interface, stop <-chan struct{}) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if client == nil || c.readOnly || c.prepared || c.started {
		return
	}
	c.prepared = true
	ctx := c.workerContextLocked(stop)
	// A standby sends vCenter only credentials the leader logged in with,
	// and retries none it was refused: together the replicas are refused
	// no more often than the leader alone.
	c.logins = c.fleet.newLogins(client)
	c.fleet.ledger.Follow(c.logins)
	c.workers.Go(func() { c.logins.follow(ctx, c.fleet.RequestReload) })
	c.prepareLocked(ctx, client, false)
	// Lookups load and refresh the tag caches; a standby makes none.
	c.workers.Go(func() { c.fleet.warmTags(ctx, warmPeriod) })
}

// prepareLocked starts the reading part of the provider under ctx:
// Secrets and the history read through client (nil: none), the history
// written when writeHistory, the config file watched and applied (the
// backends built and started), reloads.
func (c *Cloud) prepareLocked(ctx context.Context, client kubernetes.Interface, writeHistory bool) {
	c.workers.Go(func() { c.fleet.scanDuplicates(ctx) })
	if client != nil {
		secrets := c.fleet.useCluster(client, writeHistory)
		c.workers.Go(func() { <-ctx.Done(); secrets.Close() })
	}
	c.fleet.watchFile()
	c.fleet.apply(ctx)
	c.workers.Go(func() { c.fleet.reloadLoop(ctx) })
	c.fleet.RequestReload() // reads the history (and records it when it writes), retried until it is known
}

// workerContextLocked is the context of workers started now: done when
// stop closes or at Stop.
func (c *Cloud) workerContextLocked(stop <-chan struct{}) context.Context {
	ctx, cancel := context.WithCancel(wait.ContextForChannel(stop))
	c.cancels = append(c.cancels, cancel)
	return ctx
}

// Start connects the provider to Kubernetes (Secrets, Events, the history
// ConfigMap, Nodes; client may be nil: none) and creates the vCenter
// backends, unless Prepare did: then it adds only the writers (Events,
// the history written, the Node owner) and keeps Prepare's backends.
// Sessions open lazily, in parallel, on first lookup, or as inventories
// load. A read-only provider reads the cluster and applies the config
// once: no Event, no Node write, no write of the history, no watch of the
// config file or of Nodes.
func (c *Cloud) Start(client kubernetes.Interface, stop <-chan struct{}) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.started {
		return
	}
	c.started = true
	ctx := c.workerContextLocked(stop)
	if c.readOnly {
		c.workers.Go(func() { c.fleet.scanDuplicates(ctx) })
		if client != nil {
			secrets := c.fleet.useCluster(client, false)
			c.workers.Go(func() { <-ctx.Done(); secrets.Close() })
		}
		c.fleet.apply(ctx)
		return
	}
	if client != nil {
		// Bound before the config is reported on (prepareLocked, lead).
		b := record.NewBroadcaster()
		b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events("")})
		c.events.bind(b.NewRecorder(scheme.Scheme, v1.EventSource{Component: "vsphere-federated-ccm"}))
		c.workers.Go(func() { <-ctx.Done(); b.Shutdown() })
	}
	if client != nil {
		if c.logins == nil {
			c.logins = c.fleet.newLogins(client)
		}
		c.fleet.ledger.Lead(c.logins.changed)
		c.workers.Go(func() { c.logins.publish(ctx) })
	}
	if c.prepared {
		if client != nil {
			c.fleet.lead(client)
		}
		c.fleet.RequestReload() // records the history
	} else {
		c.prepareLocked(ctx, client, true)
	}
	if client != nil {
		if c.informers != nil || !c.awaitInformers {
			c.runNodesLocked(ctx, client)
		} else {
			c.nodeClient, c.nodeCtx = client, ctx // for SetInformers, which starts the Node owner
		}
	}
}

// SetInformers implements cloudprovider.InformerUser: the Node owner
// watches Nodes through the controllers' shared factory instead of one
// of its own, so each Node is held once. It registers its handlers at
// once: the caller starts the factory after this returns.
func (c *Cloud) SetInformers(factory informers.SharedInformerFactory) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.readOnly || c.informers != nil {
		return
	}
	c.informers = factory
	if c.nodeClient != nil {
		c.runNodesLocked(c.nodeCtx, c.nodeClient)
		c.nodeClient, c.nodeCtx = nil, nil
	}
}

// runNodesLocked starts the Node owner over the shared factory, if one
// was given, or its own.
func (c *Cloud) runNodesLocked(ctx context.Context, client kubernetes.Interface) {
	w := c.nodes.watch(client, c.informers)
	c.instances.claims.watch(w)
	c.workers.Go(func() { c.nodes.run(ctx, client, w) })
	if opts := c.fleet.opts; opts.ProblemCheckInterval > 0 {
		d := problems.New(func(ctx context.Context) problems.Inputs { return c.fleet.problemInputs(ctx, w, c.nodes.unmanaged) },
			c.events, opts.EventObject, opts.Metrics.problems, opts.ProblemCheckInterval)
		c.workers.Go(func() {
			// After the Node cache is synced: an empty list is no finding.
			if cache.WaitForCacheSync(ctx.Done(), w.informer.HasSynced) {
				d.Run(ctx)
			}
		})
	}
}

// Stop ends what Prepare and Start started, logs every vCenter session
// out, replaced ones too, and stops the background probes.
func (c *Cloud) Stop(ctx context.Context) {
	c.mu.Lock()
	cancels := c.cancels
	c.cancels = nil
	c.nodeClient, c.nodeCtx = nil, nil // a later SetInformers starts nothing
	c.mu.Unlock()
	for _, cancel := range cancels {
		cancel()
	}
	c.workers.Wait()
	c.fleet.close(ctx)
}

// RequestReload asks for the config file and every vCenter's credentials
// to be read again (fleet.RequestReload).
func (c *Cloud) RequestReload() { c.fleet.RequestReload() }

// Reload re-reads the config file and every vCenter's credentials now
// (fleet.Reload); it reports whether the history (and the legacy label's
// cutoff) is recorded.
func (c *Cloud) Reload(ctx context.Context) bool { return c.fleet.Reload(ctx) }

// VCenterStatuses lists every configured vCenter's status, in the config's
// order, from memory only.
func (c *Cloud) VCenterStatuses() []VCenterStatus { return c.fleet.vcenterStatuses() }

// Settle prepares a started provider for one lookup as the running CCM
// would make it (fleet.settle); it reports whether the record of the
// vCenters served could be read.
func (c *Cloud) Settle(ctx context.Context) bool { return c.fleet.settle(ctx) }

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
