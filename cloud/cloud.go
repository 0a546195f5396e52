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
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/klog/v2"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/backends"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config/credentials"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/discovery"
)

// ProviderName is CPI's, so this CCM is a drop-in replacement.
const ProviderName = "vsphere"

var (
	_ cloudprovider.Interface   = (*Cloud)(nil)
	_ cloudprovider.InstancesV2 = (*Cloud)(nil)
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
	// configHistory); default kube-system/DefaultHistoryObject.
	HistoryObject types.NamespacedName
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
	// RecoveryPoll is how often vCenters' health is checked to re-queue
	// uninitialized Nodes when one comes back; default 1s.
	RecoveryPoll time.Duration
}

// Cloud is the vsphere cloud provider.
type Cloud struct {
	opts Options

	cfg       atomic.Pointer[config.Config]
	discovery *discovery.Discoverer

	reloads chan struct{} // coalesced reload requests

	mu       sync.Mutex
	started  bool
	client   kubernetes.Interface // nil without a cluster (unit tests)
	secrets  *credentials.Secrets
	backends map[string]*builtBackend
	recorder record.EventRecorder
	// applied is the file content applied last: an unchanged file is
	// not applied again. rejected is the last rejection's content and
	// error, so a file still rejected the same way is not reported again;
	// a rejected file is validated again at every reload (validation
	// reads outside state: a caFile may appear).
	applied  [32]byte
	rejected struct {
		sum [32]byte
		err string
	}
	// pendingDuplicates are BIOS UUIDs newly held in several vCenters,
	// to report on their Nodes (watchNodes).
	dupMu             sync.Mutex
	pendingDuplicates map[string][]string
	// noticed is the config whose Notices were reported last.
	noticed *config.Config
	// history is what this process knows of the config's past: the
	// last record read, with what it learned since merged in (see
	// configHistory); historyUnsaved says it holds what the store may
	// lack, so it is merged into the next read. historyKnown is set once
	// a record has been read (historyWhy says why not yet).
	history        *configHistory
	historyUnsaved bool
	historyKnown   bool
	historyWhy     string
	watcher        *fileWatcher
	// retiring are the goroutines closing replaced backends (retireLater);
	// stopping, closed by Stop, makes them close at once.
	retiring sync.WaitGroup
	stopping chan struct{}
	stopOnce sync.Once
	// workers are the goroutines Start runs (reloads, the Node watch,
	// releasing the Secret informers and the Event broadcaster); they end
	// when Start's stop closes or cancelWorkers is called, and Stop
	// waits for them.
	workers       sync.WaitGroup
	cancelWorkers context.CancelFunc
}

// New returns a provider for cfg; it talks to no vCenter until Start.
func New(cfg *config.Config, opts Options) *Cloud {
	if opts.NewBackend == nil {
		// Which backend to build is the caller's choice (cmd builds
		// backends/vsphere's); a provider without one cannot run.
		panic("cloud.New: Options.NewBackend is required")
	}
	if opts.Metrics != nil && opts.Discovery.Observer == nil {
		opts.Discovery.Observer = opts.Metrics
	}
	if opts.HistoryObject.Name == "" {
		opts.HistoryObject.Name = DefaultHistoryObject
	}
	if opts.HistoryObject.Namespace == "" {
		opts.HistoryObject.Namespace = "kube-system"
	}
	if opts.RecoveryPoll == 0 {
		opts.RecoveryPoll = time.Second
	}
	if opts.EventObject == nil {
		opts.EventObject = &v1.ObjectReference{
			Kind: "Lease", APIVersion: "coordination.k8s.io/v1", Namespace: "kube-system", Name: "cloud-controller-manager",
		}
	}
	c := &Cloud{opts: opts, backends: map[string]*builtBackend{}, reloads: make(chan struct{}, 1), stopping: make(chan struct{}),
		history: &configHistory{}, historyKnown: true}
	if opts.Discovery.OnDuplicate == nil {
		opts.Discovery.OnDuplicate = c.noteDuplicate
	}
	if opts.Discovery.OnIdentity == nil {
		// A vCenter answering as another instance than recorded: record
		// it, which retires the one that served before.
		opts.Discovery.OnIdentity = c.RequestReload
	}
	c.discovery = discovery.New(nil, opts.Discovery)
	c.cfg.Store(cfg)
	if opts.Metrics != nil {
		opts.Metrics.setInventorySource(c.inventoryStatuses)
		opts.Metrics.setHealthSource(c.discovery.Health)
	}
	return c
}

func (c *Cloud) inventoryStatuses() []vcenterInventory {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []vcenterInventory
	for name, b := range c.backends {
		if st, ok := b.Inventory(); ok {
			out = append(out, vcenterInventory{VCenter: name, InventoryStatus: st})
		}
	}
	return out
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
	c.applied = sha256.Sum256(data)
	return c, nil
}

// Initialize implements cloudprovider.Interface.
func (c *Cloud) Initialize(clientBuilder cloudprovider.ControllerClientBuilder, stop <-chan struct{}) {
	c.Start(clientBuilder.ClientOrDie("vsphere-federated-ccm"), stop)
}

// Start connects the provider to Kubernetes (Secrets, Events) and creates the
// vCenter backends. Sessions open lazily, in parallel, on first lookup.
func (c *Cloud) Start(client kubernetes.Interface, stop <-chan struct{}) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.started {
		return
	}
	c.started = true
	ctx, cancel := context.WithCancel(wait.ContextForChannel(stop))
	c.cancelWorkers = cancel
	if c.opts.ReadOnly {
		if client != nil {
			c.client = client
			secrets := credentials.NewSecrets(client, nil)
			c.secrets = secrets
			c.workers.Go(func() { <-ctx.Done(); secrets.Close() })
			c.historyKnown, c.historyWhy = false, "reading configmap "+c.opts.HistoryObject.String()
		}
		c.applyLocked(ctx, c.cfg.Load())
		return
	}
	if client != nil {
		c.client = client
		secrets := credentials.NewSecrets(client, func(_, _ string) { c.RequestReload() })
		c.secrets = secrets
		b := record.NewBroadcaster()
		b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events("")})
		c.recorder = b.NewRecorder(scheme.Scheme, v1.EventSource{Component: "vsphere-federated-ccm"})
		c.workers.Go(func() {
			<-ctx.Done()
			secrets.Close()
			b.Shutdown()
		})
		// Until the record of the vCenters served before is read, a VM
		// not found is not gone: one may have left the config meanwhile.
		c.historyKnown, c.historyWhy = false, "reading configmap "+c.opts.HistoryObject.String()
		c.workers.Go(func() { c.watchNodes(ctx) })
	}
	w, err := newFileWatcher(c.opts.ConfigPath, c.RequestReload)
	if err != nil {
		klog.Background().Error(err, "Watching the config file failed; edits will not be picked up")
	}
	c.watcher = w
	c.applyLocked(ctx, c.cfg.Load())
	c.workers.Go(func() { c.reloadLoop(ctx) })
	c.RequestReload() // records the history, retried until it is known
}

// Health reports each configured vCenter's reachability and breaker.
func (c *Cloud) Health() []discovery.VCenterHealth { return c.discovery.Health() }

// Stop logs every vCenter session out, replaced ones too, and stops the
// background probes.
func (c *Cloud) Stop(ctx context.Context) {
	c.discovery.Close()
	c.stopOnce.Do(func() { close(c.stopping) })
	defer c.retiring.Wait()
	c.mu.Lock()
	cancel := c.cancelWorkers
	c.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	c.workers.Wait() // they take c.mu
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.watcher != nil {
		c.watcher.close()
		c.watcher = nil
	}
	for name, b := range c.backends {
		if err := b.Backend.Close(ctx); err != nil {
			klog.FromContext(ctx).Info("Closing vCenter session failed", "vcenter", name, "err", err)
		}
	}
}

// LoadBalancer implements cloudprovider.Interface: not supported.
func (c *Cloud) LoadBalancer() (cloudprovider.LoadBalancer, bool) { return nil, false }

// Instances implements cloudprovider.Interface: InstancesV2 replaces it.
func (c *Cloud) Instances() (cloudprovider.Instances, bool) { return nil, false }

// InstancesV2 implements cloudprovider.Interface.
func (c *Cloud) InstancesV2() (cloudprovider.InstancesV2, bool) { return c, true }

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
