package cloud

import (
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config"
)

// RequestReload asks for the config file and every vCenter's credentials to
// be read again. Requests coalesce; one worker applies them in order, so
// the config file, the Secrets and the secrets directory all enter through
// this one path.
func (c *Cloud) RequestReload() {
	select {
	case c.reloads <- struct{}{}:
	default:
	}
}

// historyRetry spaces attempts to record the config history while the
// API server cannot be read or written.
const historyRetry = 5 * time.Second

func (c *Cloud) reloadLoop(ctx context.Context) {
	var retry <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-c.reloads:
		case <-retry:
		}
		retry = nil
		if !c.Reload(ctx) {
			retry = time.After(historyRetry)
		}
	}
}

// Reload re-reads the config file (when the provider has one) and applies
// it if it changed and is valid, records the vCenters served (see
// configHistory), then refreshes every vCenter's credentials. An invalid
// file leaves the last good config serving. It reports whether the
// history is recorded (false: try again later).
func (c *Cloud) Reload(ctx context.Context) bool {
	log := klog.FromContext(ctx)
	if path := c.opts.ConfigPath; path != "" {
		if err, fresh := c.reloadConfig(ctx, path); err != nil {
			log.Error(err, "Config rejected; the last good config keeps serving", "path", path)
			c.observeReload("error")
			if fresh {
				c.event(c.opts.EventObject, v1.EventTypeWarning, ReasonConfigInvalid,
					fmt.Sprintf("%s rejected, the last good config keeps serving: %v", path, err))
			}
		}
	}
	recorded := c.recordHistory(ctx)
	c.refreshCredentials(ctx)
	return recorded
}

// recordHistory folds the current vCenters into the stored history,
// merging in what this process knows that the store may lack, and hands
// the result to discovery. It reports false when the record could not be
// read or written (try again later); the history in memory only grows
// meanwhile.
func (c *Cloud) recordHistory(ctx context.Context) bool {
	if c.client == nil {
		return true
	}
	c.mu.Lock()
	cfg := c.cfg.Load()
	mem, unsaved, current := c.history.clone(), c.historyUnsaved, servingOf(cfg, c.backends)
	c.mu.Unlock()
	rctx, cancel := context.WithTimeout(ctx, config.DefaultRequestTimeout)
	defer cancel()
	store := historyStore{client: c.client, object: c.opts.HistoryObject}
	h, saved, err := store.record(rctx, mem, unsaved, current, cfg.RetiredRetention, time.Now(), !c.opts.ReadOnly)
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		klog.FromContext(ctx).Error(err, "The vCenters served before are not known; until they are, no VM is reported deleted")
		if !c.historyKnown {
			c.historyWhy = err.Error()
			c.publishHistoryLocked()
		}
		return false
	}
	if c.cfg.Load() != cfg {
		// A newer config was applied meanwhile: it is in memory, and its
		// own reload records it.
		return true
	}
	c.history, c.historyUnsaved, c.historyKnown = h, !saved, true
	c.publishHistoryLocked()
	return saved || c.opts.ReadOnly
}

// reloadConfig applies the file at path unless its content is the one
// applied last. A rejected file is validated again at every call:
// validation reads outside state (a caFile may appear after its
// ConfigMap). fresh tells whether the rejection is news, to report once.
func (c *Cloud) reloadConfig(ctx context.Context, path string) (err error, fresh bool) {
	// Read under the lock: a read that lost the race to a newer one must
	// not be applied after it.
	c.mu.Lock()
	defer c.mu.Unlock()
	data, err := os.ReadFile(path)
	if err != nil {
		return err, true
	}
	sum := sha256.Sum256(data)
	if sum == c.applied {
		c.rejected.sum = [32]byte{}
		return nil, false
	}
	cfg, err := config.ParseIn(data, c.opts.ConfigEnv)
	if err != nil {
		fresh = sum != c.rejected.sum || err.Error() != c.rejected.err
		c.rejected.sum, c.rejected.err = sum, err.Error()
		return err, fresh
	}
	c.applied = sum
	c.rejected.sum = [32]byte{}
	old := c.cfg.Load()
	c.applyLocked(ctx, cfg)
	c.observeReload("success")
	summary := describeChange(old, cfg)
	klog.FromContext(ctx).Info("Config applied", "path", path, "change", summary)
	c.event(c.opts.EventObject, v1.EventTypeNormal, ReasonConfigApplied, fmt.Sprintf("%s applied: %s", path, summary))
	return nil, false
}

// describeChange names the vCenters added, removed or changed.
func describeChange(old, cur *config.Config) string {
	before := map[string]string{}
	for _, vc := range old.VCenters {
		before[vc.Name] = fmt.Sprintf("%+v", vc)
	}
	var added, changed, removed []string
	for _, vc := range cur.VCenters {
		prev, ok := before[vc.Name]
		switch {
		case !ok:
			added = append(added, vc.Name)
		case prev != fmt.Sprintf("%+v", vc):
			changed = append(changed, vc.Name)
		}
		delete(before, vc.Name)
	}
	for name := range before {
		removed = append(removed, name)
	}
	return fmt.Sprintf("vCenters added %v, removed %v, changed %v", added, removed, changed)
}

func (c *Cloud) observeReload(result string) {
	if c.opts.Metrics != nil {
		c.opts.Metrics.configReloads.WithLabelValues(result).Inc()
	}
}

// reportNoticesLocked logs, once per applied config, the keys that have no
// effect (or not the one they seem to have) and the environment's
// overrides; each unknown key is also an Event, naming it by path, so a
// typo is seen where kubectl shows the config's fate.
func (c *Cloud) reportNoticesLocked(cfg *config.Config) {
	if c.noticed == cfg {
		return
	}
	c.noticed = cfg
	log := klog.Background().WithValues("path", c.opts.ConfigPath)
	for _, n := range cfg.Notices {
		switch n.Kind {
		case config.NoticeUnknown:
			log.Info("Config key ignored: neither CPI nor this CCM reads it", "key", n.Path, "line", n.Line, "reason", n.Reason)
			c.event(c.opts.EventObject, v1.EventTypeWarning, ReasonConfigUnknownKey, n.String())
		default:
			log.Info("Config notice", "kind", n.Kind.String(), "key", n.Path, "line", n.Line, "reason", n.Reason)
		}
	}
}
