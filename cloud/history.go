package cloud

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/cloud/nodes"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/discovery"
)

// DefaultHistoryObject is the ConfigMap that records which vCenters and
// datacenters this CCM has served, in the namespace of its Pod.
const DefaultHistoryObject = "vsphere-federated-ccm-state"

// historyKey is the ConfigMap key of the record.
const historyKey = "vcenters.json"

// legacyCutoffKey is the ConfigMap key of the legacy unmanaged label's
// cutoff (nodes.LegacyCutoff), RFC 3339: written by the first
// leader of a version that reads it, when absent, with the record; kept by
// every save of the record (earlier versions' too: they update the
// ConfigMap they read), never moved.
const legacyCutoffKey = "legacyUnmanagedCutoff"

// configHistory is the record of the vCenters served (discovery.History),
// kept where it outlives the process: a vCenter removed from the config —
// by an edit, or while the CCM was down — is retired, and while it is
// remembered a VM not found elsewhere is not gone.
type configHistory struct {
	discovery.History

	// cutoff is the ConfigMap's legacyCutoffKey, read and written with
	// the record but no part of it (unexported: not in historyKey's JSON,
	// nor in what update compares).
	cutoff nodes.LegacyCutoff
}

// serving is a configured vCenter as the history sees it: the config's
// and its backend's instance UUID now ("" before it answered).
type serving struct {
	config.VCenter
	instance string
}

// recordIs reports whether r is the vCenter cur is now. lenient takes an
// instance UUID that either side does not know yet for a match (is it
// still served?); strict needs r's own to be cur's (is a retired one
// back?).
func recordIs(r discovery.VCenterRecord, cur serving, strict bool) bool {
	if !atServer(r, cur) {
		return false
	}
	switch {
	case r.InstanceUUID == "":
		return true
	case cur.instance == "":
		return !strict
	}
	return r.InstanceUUID == cur.instance
}

// atServer reports whether cur is configured at r's server and port.
func atServer(r discovery.VCenterRecord, cur serving) bool {
	return strings.EqualFold(r.Server, cur.Server) && (r.Port == 0 || r.Port == cur.Port)
}

// find returns the current vCenter that r is. Several config entries may
// name one vCenter (CPI's tenants): it is served as their union — every
// datacenter when one of them names none — so that an entry whose
// datacenters differ from another's of the same vCenter retires nothing.
//
// Identity is per entry: each entry has its own session, and one may
// have logged in to a new appliance at the address while another's
// session is down (its instance unknown) or still on the old one. An
// instance that any entry of its server answers against is not served,
// whatever the others answer or do not: an entry of unknown instance
// never keeps it alive (issue 32 §1: one did, nothing was retired, and a
// VM on the old appliance was taken for gone once every entry answered
// as the new one).
func find(current []serving, r discovery.VCenterRecord, strict bool) (serving, bool) {
	if r.InstanceUUID != "" && slices.ContainsFunc(current, func(cur serving) bool {
		return atServer(r, cur) && cur.instance != "" && cur.instance != r.InstanceUUID
	}) {
		return serving{}, false
	}
	var out serving
	found, all := false, false
	for _, cur := range current {
		if !recordIs(r, cur, strict) {
			continue
		}
		if !found {
			out, found = cur, true
			out.Datacenters = nil
		}
		all = all || len(cur.Datacenters) == 0
		for _, dc := range cur.Datacenters {
			if !slices.Contains(out.Datacenters, dc) {
				out.Datacenters = append(out.Datacenters, dc)
			}
		}
	}
	if all {
		out.Datacenters = nil
	}
	return out, found
}

// update folds the current vCenters into h at now: what h served and is
// not served now is retired for retention, what is served again is no
// longer retired, expired entries go. It reports whether h changed.
func (h *configHistory) update(current []serving, now time.Time, retention time.Duration) bool {
	before, _ := json.Marshal(h)
	retire := func(name string, was discovery.VCenterRecord, dc string) {
		same := func(r discovery.Retired) bool { return r.VCenterRecord == was && r.Datacenter == dc }
		if i := slices.IndexFunc(h.Retired, same); i >= 0 {
			h.Retired[i].Until = now.Add(retention)
			return
		}
		h.Retired = append(h.Retired,
			discovery.Retired{VCenter: name, VCenterRecord: was, Datacenter: dc, Since: now, Until: now.Add(retention)})
	}
	for name, served := range h.Served {
		vc, ok := find(current, served.VCenterRecord, false)
		switch {
		case !ok:
			retire(name, served.VCenterRecord, "")
		case len(vc.Datacenters) == 0:
		case len(served.Datacenters) == 0:
			retire(name, served.VCenterRecord, "*")
		default:
			for _, dc := range served.Datacenters {
				if !slices.Contains(vc.Datacenters, dc) {
					retire(name, served.VCenterRecord, dc)
				}
			}
		}
	}
	servedAgain := func(r discovery.Retired) (serving, bool) {
		if r.Server == "" { // recorded before identities were: by name
			i := slices.IndexFunc(current, func(c serving) bool { return c.Name == r.VCenter })
			if i < 0 {
				return serving{}, false
			}
			return current[i], true
		}
		return find(current, r.VCenterRecord, true)
	}
	kept := h.Retired[:0]
	for _, r := range h.Retired {
		vc, ok := servedAgain(r)
		switch {
		case !now.Before(r.Until):
			continue
		case !ok:
		case len(vc.Datacenters) == 0:
			continue // served whole again
		case r.Datacenter == "":
			// A whole vCenter back with only some datacenters listed: the
			// others are still retired.
			r.Datacenter = "*"
		case r.Datacenter != "*" && slices.Contains(vc.Datacenters, r.Datacenter):
			continue
		}
		kept = append(kept, r)
	}
	h.Retired = kept
	served := map[string]discovery.Served{}
	for _, vc := range current {
		rec := discovery.VCenterRecord{Server: vc.Server, Port: vc.Port, InstanceUUID: vc.instance}
		if rec.InstanceUUID == "" {
			was, ok := h.Served[vc.Name]
			rec.InstanceUUID = unanswered(was, ok, vc, current)
		}
		served[vc.Name] = discovery.Served{VCenterRecord: rec, Datacenters: slices.Clone(vc.Datacenters)}
	}
	h.Served = served
	after, _ := json.Marshal(h)
	return string(before) != string(after)
}

// unanswered is the instance recorded for vc, an entry whose instance is
// not known now (its session down, or not logged in yet): what was
// recorded for it while the entries of its server that answer (if any)
// answer as that; else the one instance they answer as, since an entry
// is its server's vCenter; else none (they disagree, and every instance
// recorded there is retired meanwhile: find). An old instance is never
// kept alive by the silence of an entry.
func unanswered(was discovery.Served, had bool, vc serving, current []serving) string {
	var answered []string
	for _, cur := range current {
		if cur.instance != "" && strings.EqualFold(cur.Server, vc.Server) && cur.Port == vc.Port && !slices.Contains(answered, cur.instance) {
			answered = append(answered, cur.instance)
		}
	}
	switch {
	case had && recordIs(was.VCenterRecord, vc, false) &&
		(len(answered) == 0 || len(answered) == 1 && answered[0] == was.InstanceUUID):
		return was.InstanceUUID
	case len(answered) == 1:
		return answered[0]
	}
	return ""
}

// merge adds what o served and retired to h: what this process learned
// and could not write yet is never dropped for a record read back that
// lacks it. A vCenter o served under a name h uses for another is kept
// under "name@server"; the same one under the same name keeps every
// datacenter either served.
func (h *configHistory) merge(o *configHistory) {
	if h.Served == nil {
		h.Served = map[string]discovery.Served{}
	}
	for name, s := range o.Served {
		cur, ok := h.Served[name]
		switch {
		case !ok:
			h.Served[name] = s
		case cur.VCenterRecord != s.VCenterRecord:
			h.Served[name+"@"+s.Server] = s
		case len(cur.Datacenters) > 0 && len(s.Datacenters) > 0:
			for _, dc := range s.Datacenters {
				if !slices.Contains(cur.Datacenters, dc) {
					cur.Datacenters = append(cur.Datacenters, dc)
				}
			}
			h.Served[name] = cur
		default:
			cur.Datacenters = nil // one served them all
			h.Served[name] = cur
		}
	}
	for _, r := range o.Retired {
		i := slices.IndexFunc(h.Retired, func(x discovery.Retired) bool {
			return x.VCenter == r.VCenter && x.VCenterRecord == r.VCenterRecord && x.Datacenter == r.Datacenter
		})
		if i < 0 {
			h.Retired = append(h.Retired, r)
			continue
		}
		if r.Until.After(h.Retired[i].Until) {
			h.Retired[i].Until = r.Until
		}
	}
}

// clone is a deep copy of h.
func (h *configHistory) clone() *configHistory {
	out := &configHistory{cutoff: h.cutoff}
	out.Served, out.Retired = make(map[string]discovery.Served, len(h.Served)), slices.Clone(h.Retired)
	for k, v := range h.Served {
		v.Datacenters = slices.Clone(v.Datacenters)
		out.Served[k] = v
	}
	return out
}

// historyStore keeps the record of the vCenters served.
type historyStore interface {
	// record folds current into the record kept and returns it (see
	// configMapHistory.record); saved is false when what it returns is
	// not kept (yet).
	record(ctx context.Context, mem *configHistory, unsaved bool, current []serving, retention time.Duration, now time.Time) (h *configHistory, saved bool, err error)
	// writes tells whether record writes: a store that does not has
	// nothing unsaved to wait for.
	writes() bool
}

// memoryHistory keeps the record in the process only (no cluster): what
// the process knows is all there is. It folds the current vCenters in as
// the ConfigMap's record does: an instance UUID learned after the config
// was applied, and an appliance that answers in its place later, are
// recorded (and the old one retired) here too.
type memoryHistory struct{}

func (memoryHistory) record(_ context.Context, mem *configHistory, _ bool, current []serving, retention time.Duration, now time.Time) (*configHistory, bool, error) {
	h := mem.clone()
	h.update(current, now, retention)
	h.cutoff = nodes.LegacyCutoff{Why: "no cluster: no state ConfigMap to record it in"}
	return h, false, nil
}

func (memoryHistory) writes() bool { return false }

// configMapHistory reads the record from a ConfigMap, and writes it back
// unless write is false (a read-only provider's view).
type configMapHistory struct {
	client kubernetes.Interface
	object types.NamespacedName
	write  bool
}

func (s configMapHistory) writes() bool { return s.write }

// load returns the record and the ConfigMap holding it (nil when there is
// none yet: an empty record), with the cutoff it holds.
func (s configMapHistory) load(ctx context.Context) (*configHistory, *v1.ConfigMap, error) {
	cm, err := s.client.CoreV1().ConfigMaps(s.object.Namespace).Get(ctx, s.object.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return &configHistory{cutoff: nodes.LegacyCutoff{Why: fmt.Sprintf("configmap %s does not exist yet", s.object)}}, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	h := &configHistory{}
	if data := cm.Data[historyKey]; data != "" {
		if err := json.Unmarshal([]byte(data), h); err != nil {
			return nil, nil, fmt.Errorf("configmap %s key %s: %w", s.object, historyKey, err)
		}
	}
	// A cutoff that does not parse is not replaced: it was written, and a
	// new one would be later, taking the legacy key for an operator's on
	// Nodes a kubelet may have labelled since.
	v, ok := cm.Data[legacyCutoffKey]
	at, err := time.Parse(time.RFC3339, strings.TrimSpace(v))
	switch {
	case !ok:
		who := "the leader writes it"
		if !s.write {
			who = "the leader writes it; this replica only reads it"
		}
		h.cutoff.Why = fmt.Sprintf("configmap %s has no key %s yet (%s)", s.object, legacyCutoffKey, who)
	case err != nil:
		h.cutoff.Why = fmt.Sprintf("configmap %s key %s: %v (an RFC 3339 time; correct it)", s.object, legacyCutoffKey, err)
	default:
		h.cutoff.At = at
	}
	return h, cm, nil
}

// hasCutoff reports whether cm holds a cutoff, parsed or not.
func hasCutoff(cm *v1.ConfigMap) bool {
	if cm == nil {
		return false
	}
	_, ok := cm.Data[legacyCutoffKey]
	return ok
}

func (s configMapHistory) save(ctx context.Context, cm *v1.ConfigMap, h *configHistory) error {
	data, err := json.MarshalIndent(h, "", "  ")
	if err != nil {
		return err
	}
	purpose := map[string]string{
		"vsphere-federated-ccm.io/purpose": "vCenters and datacenters this CCM has served; a retired one keeps its Nodes from deletion until its until time (delete its entry to forget it sooner). " +
			legacyCutoffKey + ": when this version first led; the legacy unmanaged label alone still opts out Nodes created before it (keep it)",
	}
	// Every other key is kept as read (the cutoff among them): only the
	// record is replaced, and the cutoff added where it is absent.
	return writeState(ctx, s.client, s.object, cm, purpose, func(d map[string]string) {
		d[historyKey] = string(data)
		if _, ok := d[legacyCutoffKey]; !ok && !h.cutoff.At.IsZero() {
			d[legacyCutoffKey] = h.cutoff.At.UTC().Format(time.RFC3339)
		}
	})
}

// writeState writes the state ConfigMap object, which the history and the
// leader's logins share: created when cm (as read) is nil, with the label
// every writer adds and annotations, else updated from cm; set changes its
// data, every key it leaves alone is kept.
func writeState(ctx context.Context, client kubernetes.Interface, object types.NamespacedName, cm *v1.ConfigMap,
	annotations map[string]string, set func(data map[string]string)) error {
	configMaps := client.CoreV1().ConfigMaps(object.Namespace)
	if cm == nil {
		cm = &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: object.Namespace, Name: object.Name,
			Labels: map[string]string{"app.kubernetes.io/name": "vsphere-federated-ccm"}, Annotations: annotations},
			Data: map[string]string{}}
		set(cm.Data)
		_, err := configMaps.Create(ctx, cm, metav1.CreateOptions{})
		return err
	}
	cm = cm.DeepCopy()
	if cm.Data == nil {
		cm.Data = map[string]string{}
	}
	set(cm.Data)
	_, err := configMaps.Update(ctx, cm, metav1.UpdateOptions{})
	return err
}

// record folds the current vCenters into the stored history, writing it
// back when it changed (optimistic concurrency: a conflict reads it
// again). mem is what this process knows; unsaved says it holds what the
// store may lack (an edit applied, a write that failed), and is then
// merged into what is read. saved is false when the result could not be
// written: the caller keeps it and merges it again next time. Without
// s.write nothing is written (a read-only provider's view).
//
// The cutoff comes with it: as read, or, when the ConfigMap has none and
// s.write, now, written with the record. It is known only once
// read or written: one that could not be written is not known, since the
// next leader would record a later one.
func (s configMapHistory) record(ctx context.Context, mem *configHistory, unsaved bool, current []serving, retention time.Duration, now time.Time) (h *configHistory, saved bool, err error) {
	const op = "cloud.history.record"
	var lastErr error
	for range 3 {
		h, cm, err := s.load(ctx)
		if err != nil {
			return nil, false, fmt.Errorf("%s: read configmap %s: %w", op, s.object, err)
		}
		read, _ := json.Marshal(h)
		if unsaved {
			h.merge(mem)
		}
		h.update(current, now, retention)
		if !s.write {
			return h, false, nil
		}
		// Unchanged from what was read (not from what was merged): stored.
		folded, _ := json.Marshal(h)
		stored := string(folded) == string(read) && cm != nil
		// Absent: one that does not parse stays as written (load).
		stamp := !hasCutoff(cm)
		if stored && !stamp {
			return h, true, nil
		}
		if stamp {
			// Rounded up to the second, as creationTimestamps are, so that
			// a Node created within the second before, under the earlier
			// version, counts as before.
			h.cutoff = nodes.LegacyCutoff{At: now.Add(time.Second - 1).UTC().Truncate(time.Second)}
		}
		err = s.save(ctx, cm, h)
		if err == nil {
			return h, true, nil
		}
		if !apierrors.IsConflict(err) && !apierrors.IsAlreadyExists(err) {
			if stamp {
				h.cutoff = nodes.LegacyCutoff{Why: fmt.Sprintf("it could not be written to configmap %s: %v", s.object, err)}
			}
			if stored {
				// Only the cutoff was to be written: the record is
				// stored. The caller retries the cutoff.
				klog.FromContext(ctx).Error(err, "Recording the legacy unmanaged label's cutoff failed; retried", "configmap", s.object, "key", legacyCutoffKey)
				return h, true, nil
			}
			// Known, but not stored: the caller keeps it, and merges it
			// into the next read until a write succeeds.
			klog.FromContext(ctx).Error(err, "Recording the served vCenters failed; kept in memory and retried", "configmap", s.object)
			return h, false, nil
		}
		lastErr = err
	}
	return nil, false, fmt.Errorf("%s: configmap %s: %w", op, s.object, lastErr)
}
