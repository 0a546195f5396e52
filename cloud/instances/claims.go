package instances

// Identity claims. A kubelet sets its own spec.providerID (--provider-id)
// and reports its own status.nodeInfo.systemUUID: what a Node says of its
// VM is its kubelet's word, not a proof. Before a Node is initialized with
// a VM's identity (providerID, addresses, zone, labels), the Nodes that
// already hold that VM are read from the Node informer's index — memory
// only, no API call — and a claim on a VM another Node holds is refused
// while that Node lives. Initialized Nodes are never refused: they hold
// their identity already, and refusing their address updates would undo
// nothing.
//
// A Node replaced on its own VM (the VM reinstalled and re-registered
// under another Node name) is the one claim that must win, or the new
// Node would wait forever: nothing deletes the old Node, whose VM exists.
// It wins only on evidence the kubelet cannot forge: the old Node has been
// NotReady for ReplacedNodeGrace, and the VM, powered on, reports through
// VMware Tools (vCenter's guest host name, not anything a kubelet writes)
// the new Node's host name and not the old one's. An impostor claiming a
// VM whose kubelet is down fails the second test: the VM still calls
// itself the old Node. The old Node is left as it is, for its operator to
// delete: this CCM reports a Node deleted only when its VM is confirmed
// absent, never for another Node's word.

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/backends"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/cloud/nodes"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/discovery"
)

// Event reasons of identity claims.
const (
	// ReasonNodeReplaced: a replaced Node's VM went to its new Node
	// (Normal on the new Node, Warning on the old one, which is kept for
	// its operator to delete), each naming the other.
	ReasonNodeReplaced = "NodeReplaced"
)

// ReplacedNodeGrace is how long the Node holding a VM must have been
// NotReady (its Ready condition False or Unknown) before a new Node that
// the VM's guest names takes the VM over. It is the node-lifecycle
// controller's default not-ready toleration (300s), after which the old
// Node's Pods have been evicted: the new Node does not serve beside Pods
// still bound to the old one, and a kubelet merely restarting (Unknown
// after 40-50s) loses nothing.
const ReplacedNodeGrace = 5 * time.Minute

// claimSyncWait bounds how long a lookup waits for the Node informer's
// first list: without it the holders are unknown, and the claim is not
// granted.
const claimSyncWait = 10 * time.Second

// claimIndex is the Node informer's index of the BIOS UUIDs each Node
// claims (claimedUUIDs).
const claimIndex = "vsphere-federated-ccm.io/claimed-vm-uuid"

type conflictKey struct {
	claimant, holder       string
	claimantUID, holderUID types.UID
	outcome                string
}

// maxCounted bounds counted, as maxCauses bounds the Events' causes: past
// it all are forgotten, at the cost of one conflict counted again.
const maxCounted = 8192

// Watch has the claims read w, the Node owner's informer: it indexes w's
// Nodes by the VMs they claim and forgets the conflicts counted of a Node
// once it is deleted. A shared informer may have started already: an index
// added then indexes the Nodes it holds.
func (in *Instances) Watch(w nodes.Watch) {
	log := klog.Background()
	if err := w.Informer.AddIndexers(cache.Indexers{claimIndex: claimedUUIDs}); err != nil {
		// Another provider in this process indexed this shared informer
		// already, with this same function: use it.
		if _, ok := w.Informer.GetIndexer().GetIndexers()[claimIndex]; !ok {
			log.Error(err, "Indexing Nodes by the VMs they claim failed: claims on a VM another Node holds are not checked")
			return
		}
	}
	if _, err := w.Informer.AddEventHandler(cache.ResourceEventHandlerFuncs{DeleteFunc: nodes.OnDelete(in.gone)}); err != nil {
		log.Error(err, "Watching Node deletions failed: what is kept of deleted Nodes is bounded only by its cap")
	}
	in.view.Store(&w)
}

// gone forgets the conflicts counted of a deleted Node.
func (in *Instances) gone(node *v1.Node) {
	in.mu.Lock()
	defer in.mu.Unlock()
	maps.DeleteFunc(in.counted, func(k conflictKey, _ bool) bool {
		return k.claimant == node.Name || k.holder == node.Name
	})
}

// claimedUUIDs indexes a Node under the BIOS UUIDs its providerID and
// system UUID name, each in both byte orders, as lookups try both.
func claimedUUIDs(obj any) ([]string, error) {
	node, ok := obj.(*v1.Node)
	if !ok {
		return nil, nil
	}
	var out []string
	for _, u := range append(providerUUIDs(node), systemUUIDs(node)...) {
		if !slices.Contains(out, u) {
			out = append(out, u)
		}
	}
	return out, nil
}

// providerUUIDs and systemUUIDs are the BIOS UUID node's providerID, or
// its system UUID, names, in both byte orders (none when it names none).
func providerUUIDs(node *v1.Node) []string {
	return bothOrders(discovery.ParseProviderID(node.Spec.ProviderID))
}

func systemUUIDs(node *v1.Node) []string {
	return bothOrders(discovery.NormalizeUUID(node.Status.NodeInfo.SystemUUID))
}

func bothOrders(u string, err error) []string {
	if err != nil {
		return nil
	}
	return []string{u, discovery.SwapByteOrder(u)}
}

// CheckClaim decides whether node, uninitialized, may be given the
// identity of res, the VM its lookup found (InstanceMetadata, and the
// serving-certificate approver, cloud.Guest): nil when no other Node holds
// that VM, or when node replaces every one that does; else a
// nodes.IdentityConflictError, with an Event on both Nodes.
func (in *Instances) CheckClaim(ctx context.Context, node *v1.Node, res *discovery.Result) error {
	const op = "instances.CheckClaim"
	v := in.view.Load()
	if v == nil {
		return nil
	}
	if !v.Informer.HasSynced() {
		// The controllers wait for this same informer before they ask:
		// only a provider watching Nodes on its own gets here, at start.
		if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, claimSyncWait, true, func(context.Context) (bool, error) {
			return v.Informer.HasSynced(), nil
		}); err != nil {
			return fmt.Errorf("%s: the Node cache is not synced: cannot tell whether another Node holds %s: %w", op, res, err)
		}
	}
	u, err := discovery.NormalizeUUID(res.VM.UUID)
	if err != nil {
		return fmt.Errorf("%s: %s: %w", op, res, err)
	}
	objs, err := v.Informer.GetIndexer().ByIndex(claimIndex, u)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	var holders []*v1.Node
	for _, obj := range objs {
		other, ok := obj.(*v1.Node)
		if !ok || other.Name == node.Name || other.DeletionTimestamp != nil || in.nodes.Unmanaged(other) || !holdsAgainst(other, node) {
			continue
		}
		holders = append(holders, other)
	}
	if len(holders) == 0 {
		return nil
	}
	slices.SortFunc(holders, func(a, b *v1.Node) int { return strings.Compare(a.Name, b.Name) })
	now := time.Now()
	var conflict *nodes.IdentityConflictError
	for _, h := range holders {
		state, ok := replaces(node, h, &res.VM, now)
		if ok {
			continue
		}
		in.refused(node, h, res, u, state)
		if conflict == nil {
			conflict = &nodes.IdentityConflictError{Node: node.Name, Holder: h.Name, VM: res.String(), State: state}
		}
	}
	if conflict != nil {
		return conflict
	}
	for _, h := range holders {
		in.replaced(node, h, res, u)
	}
	return nil
}

// holdsAgainst reports whether other, which claims the VM node claims,
// holds it against node: it was initialized with it, or, both waiting,
// registered first (by name when at once), so that of two newcomers
// exactly one can win.
func holdsAgainst(other, node *v1.Node) bool {
	if !nodes.Uninitialized(other) {
		return true
	}
	a, b := other.CreationTimestamp, node.CreationTimestamp
	if !a.Equal(&b) {
		return a.Before(&b)
	}
	return other.Name < node.Name
}

// replaces reports whether node replaces holder on vm at now, and else
// what keeps holder the VM's, in words that stay the same while that
// lasts (no duration counted from now).
func replaces(node, holder *v1.Node, vm *backends.VM, now time.Time) (string, bool) {
	ready, since := readiness(holder)
	switch {
	case ready:
		return "is Ready", false
	case now.Sub(since) < ReplacedNodeGrace:
		return fmt.Sprintf("has been NotReady only since %s (a replaced Node gives its VM up once NotReady for %s)",
			since.UTC().Format(time.RFC3339), ReplacedNodeGrace), false
	case vm.PowerState != backends.PoweredOn:
		return fmt.Sprintf("is NotReady, but the VM is %s: no new kubelet runs in it", vm.PowerState), false
	case !namesNode(vm.GuestHostName, node.Name) || namesNode(vm.GuestHostName, holder.Name):
		return fmt.Sprintf("is NotReady, but the VM's guest host name (VMware Tools) is %q, not Node %s's: nothing shows the VM now runs it",
			vm.GuestHostName, node.Name), false
	}
	return "", true
}

// readiness is whether node is Ready, and else since when it is not (its
// Ready condition's last transition; its creation without one).
func readiness(node *v1.Node) (bool, time.Time) {
	for _, c := range node.Status.Conditions {
		if c.Type != v1.NodeReady {
			continue
		}
		if c.Status == v1.ConditionTrue {
			return true, time.Time{}
		}
		if !c.LastTransitionTime.IsZero() {
			return false, c.LastTransitionTime.Time
		}
	}
	return false, node.CreationTimestamp.Time
}

// namesNode reports whether a guest host name is the Node name's: equal
// but for case, or one the short form of the other (a kubelet names its
// Node after the host name, short or fully qualified).
func namesNode(guest, node string) bool {
	g, n := strings.ToLower(strings.TrimSpace(guest)), strings.ToLower(node)
	return g != "" && (g == n || strings.HasPrefix(g, n+".") || strings.HasPrefix(n, g+"."))
}

// claimOf says by which key node claims the BIOS UUID u.
func claimOf(node *v1.Node, u string) string {
	if slices.Contains(providerUUIDs(node), u) {
		return fmt.Sprintf("providerID %s", node.Spec.ProviderID)
	}
	if slices.Contains(systemUUIDs(node), u) {
		return fmt.Sprintf("system UUID %s", node.Status.NodeInfo.SystemUUID)
	}
	return "name"
}

// refused records the Events of node's claim refused for holder, and
// counts the conflict once.
func (in *Instances) refused(node, holder *v1.Node, res *discovery.Result, u, state string) {
	in.count(node, holder, "refused")
	msg := fmt.Sprintf("claims %s (BIOS UUID %s, by its %s), which Node %s holds (by its %s) and %s: this Node is not initialized while it does. "+
		"If Node %s no longer runs in that VM (reinstalled under another name), this Node takes it once %s has been NotReady for %s "+
		"and the VM's guest host name is this Node's; or delete Node %s",
		res, u, claimOf(node, u), holder.Name, claimOf(holder, u), state, holder.Name, holder.Name, ReplacedNodeGrace, holder.Name)
	in.events.RecordCause(node, v1.EventTypeWarning, nodes.ReasonNodeIdentityConflict, msg, msg)
	msg = fmt.Sprintf("Node %s claims this Node's VM %s (by its %s): it is not initialized while this Node %s", node.Name, res, claimOf(node, u), state)
	in.events.RecordCause(holder, v1.EventTypeWarning, nodes.ReasonNodeIdentityConflict, msg, msg)
}

// replaced records the Events of node taking the VM of holder, and counts
// it once.
func (in *Instances) replaced(node, holder *v1.Node, res *discovery.Result, u string) {
	in.count(node, holder, "replaced")
	_, since := readiness(holder)
	at := since.UTC().Format(time.RFC3339)
	msg := fmt.Sprintf("initialized as %s (BIOS UUID %s), replacing Node %s, which held it (by its %s): %s has been NotReady since %s and the VM's guest host name %q is this Node's",
		res, u, holder.Name, claimOf(holder, u), holder.Name, at, res.VM.GuestHostName)
	in.events.RecordCause(node, v1.EventTypeNormal, ReasonNodeReplaced, msg, msg)
	msg = fmt.Sprintf("replaced by Node %s: this Node's VM %s now calls itself %q (VMware Tools), and this Node has been NotReady since %s. "+
		"It is kept, as its VM exists: delete it (kubectl delete node %s) when it is no longer wanted",
		node.Name, res, res.VM.GuestHostName, at, holder.Name)
	in.events.RecordCause(holder, v1.EventTypeWarning, ReasonNodeReplaced, msg, msg)
}

// count counts the conflict of node and holder with its outcome, once.
func (in *Instances) count(node, holder *v1.Node, outcome string) {
	k := conflictKey{claimant: node.Name, claimantUID: node.UID, holder: holder.Name, holderUID: holder.UID, outcome: outcome}
	in.mu.Lock()
	first := !in.counted[k]
	if first {
		if len(in.counted) >= maxCounted {
			in.counted = map[conflictKey]bool{}
		}
		in.counted[k] = true
	}
	in.mu.Unlock()
	if first {
		in.nodes.CountIdentityConflict(outcome)
	}
}
