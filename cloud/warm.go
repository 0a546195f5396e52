package cloud

// Keeping a standby's tag caches loaded: a backend reads its tag cache in
// bulk at the first tag lookup and refreshes it when a lookup finds it
// old, so a replica that makes no lookups (a standby, Cloud.Prepare) would
// make the first ones after it takes the lease wait for that read.

import (
	"context"
	"math"
	"time"

	"k8s.io/klog/v2"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/backends"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/cloud/metadata"
)

// warmPeriod is how often a standby asks each inventoried vCenter for one
// VM's tags: the first ask loads its tag cache, later ones let it refresh
// as a leader's lookups would (an ask answered from a fresh cache costs
// vCenter nothing).
const warmPeriod = time.Minute

// warmTags asks, every period (at once for a vCenter whose inventory is
// newly in service), each vCenter with an inventory for the zone and
// region tags of one VM it holds, until ctx ends. Without zone and region
// categories in the config there is nothing to warm.
func (f *fleet) warmTags(ctx context.Context, period time.Duration) {
	warmed := map[backends.Backend]time.Time{}
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		served := f.served.Load()
		categories := metadata.TagCategories(served.cfg)
		if len(categories) == 0 {
			continue
		}
		// Only current backends are kept: not one replaced or removed.
		current := map[backends.Backend]time.Time{}
		for _, vc := range served.cfg.VCenters {
			b, ok := served.backends[vc.Name]
			if !ok {
				continue
			}
			current[b.Backend] = warmed[b.Backend]
			if time.Since(current[b.Backend]) >= period && warmOne(ctx, b.Backend, categories, vc.RequestTimeout) {
				current[b.Backend] = time.Now()
			}
		}
		warmed = current
	}
}

// warmOne asks b for the tags of one VM its inventory holds, from memory
// where it can. It reports whether it asked (a failure is retried a
// period later, as a success is repeated); false when its inventory is
// not in service or holds no VM yet: asked again at the next tick.
func warmOne(ctx context.Context, b backends.Backend, categories []string, timeout time.Duration) bool {
	if inv := b.Status().Inventory; inv == nil || !inv.InService {
		return false
	}
	uuids, _, ok := b.UUIDs(math.MaxUint64) // a version no inventory has: the list
	if !ok || len(uuids) == 0 {
		return false
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	vms, err := b.Find(ctx, backends.Query{By: backends.ByUUID, Values: uuids[:1], AllowCached: true})
	if err != nil || len(vms) == 0 {
		return false
	}
	if _, err := b.Tags(ctx, &vms[0], categories); err != nil {
		klog.FromContext(ctx).V(2).Info("Reading tags ahead of leadership failed; asked again later", "err", err)
	}
	return true
}
