// Package nodes is the nodes owner: the one Node informer, and the only
// writer of Nodes (the location labels here, the labels that follow VMs in
// drift.go, the re-queue in recovery.go; its Events in reports.go: Nodes
// stuck uninitialized, vCenters down and up, duplicate UUIDs), and which
// Nodes are not this CCM's (unmanaged.go).
//
// It is a room of its own so that every write to a Node has one owner:
// package cloud builds it (New) and runs it (Run) once the controllers'
// shared informer is handed over, and instances, which writes nothing,
// tells it what lookups found (Located, MetadataAnswered) and asks it
// which Nodes are not ours (Decide).
package nodes

import (
	"context"
	"encoding/json"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	cloudproviderapi "k8s.io/cloud-provider/api"
	"k8s.io/klog/v2"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/cloud/events"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/discovery"
)

// Owner is the nodes owner.
type Owner struct {
	events    *events.Log
	discovery *discovery.Discoverer // for its vCenters' health
	// config is the config served now (fleet.config), read at each pass
	// of followVMs (drift.go).
	config  func() *config.Config
	metrics *Metrics
	// poll, resync, uninitializedAfter (reports.go) and eventObject are
	// Options'.
	poll, resync, uninitializedAfter time.Duration
	eventObject                      *v1.ObjectReference
	// wake tells run that relabel has work (coalesced).
	wake chan struct{}

	// Which Nodes are not ours (unmanaged.go): selector is
	// Options.UnmanagedNodeSelector (nil: only LabelUnmanaged); cutoff the
	// last known LegacyCutoff (SetCutoff), nil before any read.
	selector labels.Selector
	cutoff   atomic.Pointer[LegacyCutoff]
	// announcedMu guards announced: what was announced of each Node, by
	// name, as the legacy key's verdict: legacyNone for a Node unmanaged
	// otherwise (its NodeUnmanaged Event), or with the legacy key alone
	// honoured (NodeUnmanaged and UnmanagedLabelLegacy), ignored
	// (UnmanagedLabelIgnored) or undecided (UnmanagedLabelUndecided). A
	// Node that becomes managed again is forgotten, so a later return is
	// announced again; one deleted is forgotten (gone), and past
	// maxAnnounced all are.
	announcedMu sync.Mutex
	announced   map[string]legacyVerdict

	// failuresMu guards what the periodic checks (reports.go) keep between
	// ticks, which lookups write and the tick reads: failures are the
	// Nodes' last InstanceMetadata failures, by name (a success forgets
	// it); warned the reason of each Node's last NodeUninitialized Event.
	failuresMu sync.Mutex
	failures   map[string]lookupFailure
	warned     map[string]string

	// mu guards what lookups and discovery reported, for run to write.
	mu sync.Mutex
	// relabel are the location labels of the initialized Nodes whose
	// last lookup found their VM elsewhere than their labels say
	// (located), by Node name, until written. A Node deleted meanwhile
	// is forgotten.
	relabel map[string]map[string]string
	// pendingDuplicates are BIOS UUIDs newly held in several vCenters,
	// to report on their Nodes.
	pendingDuplicates map[string][]string
	// changed are the Nodes the informer saw added or changed since the
	// last pass of followVMs; reports what it last reported of each
	// Node. A Node deleted is forgotten.
	changed map[string]bool
	reports map[string]*nodeReport

	// run's own, for followVMs: the config and inventory version of its
	// last pass over every Node, and when that was.
	passConfig  *config.Config
	passVersion uint64
	lastFull    time.Time
}

// Options are what the owner is built with; cloud.New gives its
// defaults.
type Options struct {
	// Discovery is the fleet's Discoverer (for its vCenters' health and
	// the inventories' memory); Config the config served now, read at
	// each pass of followVMs.
	Discovery *discovery.Discoverer
	Config    func() *config.Config
	// Poll is cloud.Options.RecoveryPoll, Resync NodeResync,
	// UninitializedAfter UninitializedAfter, UnmanagedNodeSelector
	// UnmanagedNodeSelector.
	Poll, Resync          time.Duration
	UninitializedAfter    time.Duration
	UnmanagedNodeSelector labels.Selector
	// EventObject is where the vCenter down and up Events go.
	EventObject *v1.ObjectReference
	Metrics     *Metrics
}

// New builds the owner; it starts nothing (Watch, then Run).
func New(events *events.Log, o Options) *Owner {
	if o.UnmanagedNodeSelector != nil && o.UnmanagedNodeSelector.Empty() {
		// An empty selector matches every Node: surely not what was meant.
		o.UnmanagedNodeSelector = nil
	}
	return &Owner{events: events, discovery: o.Discovery, config: o.Config, metrics: o.Metrics,
		poll: o.Poll, resync: o.Resync, uninitializedAfter: o.UninitializedAfter, eventObject: o.EventObject,
		wake: make(chan struct{}, 1), selector: o.UnmanagedNodeSelector, announced: map[string]legacyVerdict{},
		failures: map[string]lookupFailure{}, warned: map[string]string{}, relabel: map[string]map[string]string{},
		pendingDuplicates: map[string][]string{}, changed: map[string]bool{}, reports: map[string]*nodeReport{}}
}

// Located is told where a lookup found node's VM: an initialized Node
// whose labels say otherwise is labelled (labelNodes), as the cloud-node
// controller applies a provider's labels only at initialization. Only a
// lookup relabels: an edit of the labels stands until the next one.
func (n *Owner) Located(node *v1.Node, location map[string]string) {
	if Uninitialized(node) || len(missingLabels(node, location)) == 0 {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	n.relabel[node.Name] = location
	n.wakeUp()
}

// seen is the informer's view of a Node added or changed: one that was
// waiting for the cache to hold it (labelNodes) is labelled now.
func (n *Owner) seen(obj any) {
	node, ok := obj.(*v1.Node)
	if !ok {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	n.changed[node.Name] = true
	if _, ok := n.relabel[node.Name]; ok {
		n.wakeUp()
	}
}

// gone forgets a deleted Node.
func (n *Owner) gone(node *v1.Node) {
	n.announcedMu.Lock()
	delete(n.announced, node.Name)
	n.announcedMu.Unlock()
	n.mu.Lock()
	defer n.mu.Unlock()
	delete(n.relabel, node.Name)
	delete(n.changed, node.Name)
	delete(n.reports, node.Name)
}

// wakeUp asks run to look at relabel.
func (n *Owner) wakeUp() {
	select {
	case n.wake <- struct{}{}:
	default:
	}
}

// labelNodes adds the location labels to each initialized Node that lacks
// them or whose VM moved: the cloud-node controller applies a provider's
// labels only at initialization, so Nodes initialized by CPI, or before
// these labels existed, would never get them. Best effort: a failure is
// logged and retried at the Node's next lookup.
func (n *Owner) labelNodes(ctx context.Context, client kubernetes.Interface, lister corelisters.NodeLister) {
	for name, want := range take(&n.mu, &n.relabel) {
		node, err := lister.Get(name)
		if apierrors.IsNotFound(err) {
			// Not in the informer's cache yet (seen wakes run when it is):
			// put back, unless a newer lookup has.
			n.mu.Lock()
			if _, ok := n.relabel[name]; !ok {
				n.relabel[name] = want
			}
			n.mu.Unlock()
			continue
		}
		if err != nil || Uninitialized(node) {
			continue
		}
		missing := missingLabels(node, want)
		if len(missing) == 0 {
			continue // labelled since
		}
		if err := patchNode(ctx, client, name, "labels", missing); err != nil {
			klog.FromContext(ctx).Error(err, "Adding the location labels failed; retried at the next status pass", "node", name, "labels", missing)
			continue
		}
		klog.FromContext(ctx).V(2).Info("Location labels added", "node", name, "labels", missing)
	}
}

// missingLabels are the labels of want that node does not carry with
// their value (nil: none).
func missingLabels(node *v1.Node, want map[string]string) map[string]string {
	var missing map[string]string
	for k, v := range want {
		if node.Labels[k] != v {
			if missing == nil {
				missing = map[string]string{}
			}
			missing[k] = v
		}
	}
	return missing
}

// patchNode merge-patches the Node name's metadata field (labels,
// annotations) with values: every write this owner makes. A nil value
// removes its key.
func patchNode(ctx context.Context, client kubernetes.Interface, name, field string, values any) error {
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{field: values}})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_, err = client.CoreV1().Nodes().Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
	return err
}

// Uninitialized reports whether n still carries the taint the cloud-node
// controller removes once it has initialized it.
func Uninitialized(n *v1.Node) bool {
	return slices.ContainsFunc(n.Spec.Taints, func(t v1.Taint) bool {
		return t.Key == cloudproviderapi.TaintExternalCloudProvider
	})
}

// Watch is the Node informer the owner reads: the controllers'
// shared one (Cloud.SetInformers), which the controller manager starts.
type Watch struct {
	Informer cache.SharedIndexInformer
	Lister   corelisters.NodeLister
}

// Watch registers the owner's handlers on factory's Node informer,
// before that factory starts, and drops the managedFields nobody here
// reads from the objects it holds: the largest part of a Node, held for
// every Node.
func (n *Owner) Watch(factory informers.SharedInformerFactory) Watch {
	var w Watch
	nodes := factory.Core().V1().Nodes()
	w.Informer, w.Lister = nodes.Informer(), nodes.Lister()
	// Fails only once started: then its objects keep their fields.
	if err := w.Informer.SetTransform(dropManagedFields); err != nil {
		klog.Background().V(2).Info("Node informer already started: its Nodes keep their managedFields", "err", err)
	}
	_, _ = w.Informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    n.seen,
		UpdateFunc: func(_, obj any) { n.seen(obj) },
		DeleteFunc: OnDelete(n.gone),
	})
	return w
}

// OnDelete is an informer's DeleteFunc that gives gone the Node deleted,
// from its tombstone when the informer missed the deletion.
func OnDelete(gone func(*v1.Node)) func(any) {
	return func(obj any) {
		if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = tomb.Obj
		}
		if node, ok := obj.(*v1.Node); ok {
			gone(node)
		}
	}
}

// take empties *m under mu and returns what it held.
func take[K comparable, V any](mu *sync.Mutex, m *map[K]V) map[K]V {
	mu.Lock()
	defer mu.Unlock()
	out := *m
	*m = map[K]V{}
	return out
}

// dropManagedFields is the Node informer's transform. It changes a copy:
// an object may be shared with others than this informer (a fake
// clientset hands one object to every watcher); the copy is shallow, and
// the original, managedFields and all, is garbage once decoded.
func dropManagedFields(obj any) (any, error) {
	node, ok := obj.(*v1.Node)
	if !ok || node.ManagedFields == nil {
		return obj, nil
	}
	out := *node
	out.ManagedFields = nil
	return &out, nil
}

// Run is every write to Nodes, from the Node informer of w, until ctx
// ends: location labels as lookups report them, and, every poll, the
// duplicate-UUID Events, the re-queue of uninitialized Nodes when a
// vCenter comes back (recovery.go) and the Nodes following their VMs
// (drift.go). The informer is started by its owner: until then the
// lister is empty and followVMs waits for it to sync.
func (n *Owner) Run(ctx context.Context, client kubernetes.Interface, w Watch) {
	var vcenters vcenterTransitions
	tick := time.NewTicker(n.poll)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-n.wake:
			n.labelNodes(ctx, client, w.Lister)
		case now := <-tick.C:
			// One list for the tick: the informer's cache fails no list.
			// Synced before the list, or the list may be partial, and
			// followVMs would count it as its pass over every Node.
			synced := w.Informer.HasSynced()
			all, _ := w.Lister.List(labels.Everything())
			n.reportDuplicates(all)
			changes := vcenters.next(n.discovery.Health())
			n.requeueOnRecovery(ctx, client, all, changes)
			n.tick(all, changes, time.Now())
			if synced {
				n.followVMs(ctx, client, w.Lister, all, now)
			}
		}
	}
}
