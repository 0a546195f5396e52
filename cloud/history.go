package cloud

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/discovery"
)

// DefaultHistoryObject is the ConfigMap that records which vCenters and
// datacenters this CCM has served, in the namespace of its Pod.
const DefaultHistoryObject = "vsphere-federated-ccm-state"

// historyKey is the ConfigMap key of the record.
const historyKey = "vcenters.json"

// configHistory is what the config held before, kept where it outlives
// the process: a vCenter removed from the config — by an edit, or while
// the CCM was down — is retired, and while it is remembered a VM not
// found elsewhere is not gone (discovery.History).
type configHistory struct {
	// Served are the vCenters of the last config recorded, by name.
	Served map[string]servedVCenter `json:"served"`
	// Retired left the config; remembered until their Until.
	Retired []retiredRecord `json:"retired,omitempty"`
}

type servedVCenter struct {
	Server string `json:"server"`
	// Datacenters is empty for every datacenter.
	Datacenters []string `json:"datacenters,omitempty"`
}

type retiredRecord struct {
	VCenter string `json:"vcenter"`
	// Datacenter: empty for the whole vCenter, "*" for every datacenter
	// but those now listed.
	Datacenter string    `json:"datacenter,omitempty"`
	Since      time.Time `json:"since"`
	Until      time.Time `json:"until"`
}

// update folds cfg into h at now: what h served and cfg lacks is retired
// for retention, what cfg serves again is no longer retired, expired
// entries go. It reports whether h changed.
func (h *configHistory) update(cfg *config.Config, now time.Time, retention time.Duration) bool {
	before, _ := json.Marshal(h)
	if h.Served == nil {
		h.Served = map[string]servedVCenter{}
	}
	current := map[string]config.VCenter{}
	for _, vc := range cfg.VCenters {
		current[vc.Name] = vc
	}
	retire := func(vcName, dc string) {
		if i := slices.IndexFunc(h.Retired, func(r retiredRecord) bool { return r.VCenter == vcName && r.Datacenter == dc }); i >= 0 {
			h.Retired[i].Until = now.Add(retention)
			return
		}
		h.Retired = append(h.Retired, retiredRecord{VCenter: vcName, Datacenter: dc, Since: now, Until: now.Add(retention)})
	}
	for name, served := range h.Served {
		vc, ok := current[name]
		switch {
		case !ok:
			retire(name, "")
		case len(vc.Datacenters) == 0:
		case len(served.Datacenters) == 0:
			retire(name, "*")
		default:
			for _, dc := range served.Datacenters {
				if !slices.Contains(vc.Datacenters, dc) {
					retire(name, dc)
				}
			}
		}
	}
	h.Retired = slices.DeleteFunc(h.Retired, func(r retiredRecord) bool {
		vc, ok := current[r.VCenter]
		switch {
		case !now.Before(r.Until):
			return true
		case !ok:
			return false
		case len(vc.Datacenters) == 0:
			return true // served whole again
		case r.Datacenter == "":
			return false // back, but only some datacenters: see below
		default:
			return r.Datacenter != "*" && slices.Contains(vc.Datacenters, r.Datacenter)
		}
	})
	// A whole vCenter back with only some datacenters listed: the others
	// are still retired.
	for i, r := range h.Retired {
		if _, ok := current[r.VCenter]; ok && r.Datacenter == "" {
			h.Retired[i].Datacenter = "*"
		}
	}
	h.Served = map[string]servedVCenter{}
	for _, vc := range cfg.VCenters {
		h.Served[vc.Name] = servedVCenter{Server: vc.Server, Datacenters: slices.Clone(vc.Datacenters)}
	}
	after, _ := json.Marshal(h)
	return string(before) != string(after)
}

// retiredBetween lists what old serves and cur does not, as the history
// would record it.
func retiredBetween(old, cur *config.Config, now time.Time) []discovery.Retired {
	if old == cur {
		return nil
	}
	h := &configHistory{}
	h.update(old, now, cur.RetiredRetention)
	h.Retired = nil
	h.update(cur, now, cur.RetiredRetention)
	return h.forDiscovery().Retired
}

// forDiscovery is h as discovery judges absence with it.
func (h *configHistory) forDiscovery() discovery.History {
	out := discovery.History{Known: true}
	for _, r := range h.Retired {
		out.Retired = append(out.Retired, discovery.Retired{VCenter: r.VCenter, Datacenter: r.Datacenter, Since: r.Since, Until: r.Until})
	}
	return out
}

// historyStore reads and writes the record in a ConfigMap.
type historyStore struct {
	client kubernetes.Interface
	object types.NamespacedName
}

// load returns the record and the ConfigMap holding it (nil when there is
// none yet: an empty record).
func (s historyStore) load(ctx context.Context) (*configHistory, *v1.ConfigMap, error) {
	cm, err := s.client.CoreV1().ConfigMaps(s.object.Namespace).Get(ctx, s.object.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return &configHistory{}, nil, nil
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
	return h, cm, nil
}

func (s historyStore) save(ctx context.Context, cm *v1.ConfigMap, h *configHistory) error {
	data, err := json.MarshalIndent(h, "", "  ")
	if err != nil {
		return err
	}
	configMaps := s.client.CoreV1().ConfigMaps(s.object.Namespace)
	if cm == nil {
		cm = &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
			Namespace: s.object.Namespace, Name: s.object.Name,
			Labels: map[string]string{"app.kubernetes.io/name": "vsphere-federated-ccm"},
			Annotations: map[string]string{
				"vsphere-federated-ccm.io/purpose": "vCenters and datacenters this CCM has served; a retired one keeps its Nodes from deletion until its until time (delete its entry to forget it sooner)",
			},
		}}
		cm.Data = map[string]string{historyKey: string(data)}
		_, err = configMaps.Create(ctx, cm, metav1.CreateOptions{})
		return err
	}
	cm = cm.DeepCopy()
	if cm.Data == nil {
		cm.Data = map[string]string{}
	}
	cm.Data[historyKey] = string(data)
	_, err = configMaps.Update(ctx, cm, metav1.UpdateOptions{})
	return err
}

// peek is record without the write: the stored history with cfg folded
// in, in memory only (a read-only provider's view).
func (s historyStore) peek(ctx context.Context, cfg *config.Config, now time.Time) (*configHistory, error) {
	const op = "cloud.history.peek"
	h, _, err := s.load(ctx)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	h.update(cfg, now, cfg.RetiredRetention)
	return h, nil
}

// record folds cfg into the stored history, writing it back when it
// changed (optimistic concurrency: a conflict reads it again), and hands
// the result to discovery. Until a record has been read, discovery treats
// absence as unknown history: an error.
func (s historyStore) record(ctx context.Context, cfg *config.Config, now time.Time) (*configHistory, error) {
	const op = "cloud.history.record"
	var lastErr error
	for range 3 {
		h, cm, err := s.load(ctx)
		if err != nil {
			return nil, fmt.Errorf("%s: read configmap %s: %w", op, s.object, err)
		}
		if !h.update(cfg, now, cfg.RetiredRetention) && cm != nil {
			return h, nil
		}
		err = s.save(ctx, cm, h)
		if err == nil {
			return h, nil
		}
		if !apierrors.IsConflict(err) && !apierrors.IsAlreadyExists(err) {
			// Known, but not stored: a restart recomputes the same
			// retirements from the record as it was.
			klog.FromContext(ctx).Error(err, "Recording the served vCenters failed; retried at the next reload", "configmap", s.object)
			return h, nil
		}
		lastErr = err
	}
	return nil, fmt.Errorf("%s: configmap %s: %w", op, s.object, lastErr)
}
