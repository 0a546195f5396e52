package cloud

// Reloads: the config file, the record of the vCenters served, and every
// vCenter's credentials, read again at each reload (a new session logged
// in before the old one is logged out).

import (
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/cloud/nodes"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config"
)

// Event reasons about configuration and credentials.
const (
	ReasonConfigInvalid = "ConfigInvalid"
	ReasonConfigApplied = "ConfigApplied"
	// ReasonConfigUnknownKey: a key of the applied config that neither CPI
	// nor this CCM reads (a typo?); it is ignored, as CPI ignores it.
	ReasonConfigUnknownKey   = "ConfigUnknownKey"
	ReasonCredentialsFailed  = "CredentialsFailed"
	ReasonCredentialsRotated = "CredentialsRotated"
)

// RequestReload asks for the config file and every vCenter's credentials to
// be read again. Requests coalesce; one worker applies them in order, so
// the config file, the Secrets and the secrets directory all enter through
// this one path.
func (f *fleet) RequestReload() { signal(f.reloads) }

// signal sends on ch, a channel of capacity 1, unless a signal is pending
// there already: signals coalesce.
func signal(ch chan<- struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// historyRetry spaces attempts to record the config history while the
// API server cannot be read or written.
const historyRetry = 5 * time.Second

// retryLoop calls do at each signal on ch, until ctx ends, and again
// retry after a call that reports false.
func retryLoop(ctx context.Context, ch <-chan struct{}, retry time.Duration, do func() bool) {
	var retryC <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-ch:
		case <-retryC:
		}
		retryC = nil
		if !do() {
			retryC = time.After(retry)
		}
	}
}

// Reload re-reads the config file (when the provider has one) and applies
// it if it changed and is valid, records the vCenters served (see
// configHistory), then refreshes every vCenter's credentials. An invalid
// file leaves the last good config serving. It reports whether the
// history (and, for a writer, the legacy label's cutoff) is recorded
// (false: try again later).
func (f *fleet) Reload(ctx context.Context) bool {
	if path := f.opts.ConfigPath; path != "" {
		if fresh, err := f.reloadConfig(ctx, path); err != nil {
			klog.FromContext(ctx).Error(err, "Config rejected; the last good config keeps serving", "path", path)
			f.opts.Metrics.configReloads.WithLabelValues("error").Inc()
			if fresh {
				f.events.Record(f.opts.EventObject, v1.EventTypeWarning, ReasonConfigInvalid,
					fmt.Sprintf("%s rejected, the last good config keeps serving: %v", path, err))
			}
		}
	}
	recorded := f.recordHistory(ctx)
	f.refreshCredentials(ctx)
	return recorded
}

// recordHistory folds the current vCenters into the stored history,
// merging in what this process knows that the store may lack, and hands
// the result to discovery. It reports false when the record could not be
// read or written (try again later); the history in memory only grows
// meanwhile.
func (f *fleet) recordHistory(ctx context.Context) bool {
	f.mu.Lock()
	served, store := f.served.Load(), f.store
	cfg := served.cfg
	mem, unsaved, current := f.history.clone(), f.historyUnsaved, servingOf(cfg, served.backends)
	f.mu.Unlock()
	rctx, cancel := context.WithTimeout(ctx, config.DefaultRequestTimeout)
	defer cancel()
	h, saved, err := store.record(rctx, mem, unsaved, current, cfg.RetiredRetention, time.Now())
	f.mu.Lock()
	defer f.mu.Unlock()
	if err != nil {
		klog.FromContext(ctx).Error(err, "The vCenters served before are not known; until they are, no VM is reported deleted")
		if f.historyUnread != "" {
			f.historyUnread = err.Error()
			f.publishHistoryLocked(f.discovery.Members())
		}
		f.onCutoff(nodes.LegacyCutoff{Why: err.Error()}) // a cutoff known stays so
		return false
	}
	// The cutoff is the ConfigMap's, whatever the config: known as soon
	// as read or written.
	f.onCutoff(h.cutoff)
	if f.config() != cfg {
		// A newer config was applied meanwhile: it is in memory, and its
		// own reload records it.
		return true
	}
	f.history, f.historyUnsaved, f.historyUnread = h, !saved, ""
	f.publishHistoryLocked(f.discovery.Members())
	// A store that writes nothing has nothing to retry; one that writes
	// retries until the cutoff is written too (or readable: one that does
	// not parse is an operator's to correct, read again at each retry).
	return !store.writes() || saved && !h.cutoff.At.IsZero()
}

// reloadConfig applies the file at path unless its content is the one
// applied last. A rejected file is validated again at every call:
// validation reads outside state (a caFile may appear after its
// ConfigMap). fresh tells whether the rejection is news, to report once.
func (f *fleet) reloadConfig(ctx context.Context, path string) (fresh bool, err error) {
	// Read under the lock: a read that lost the race to a newer one must
	// not be applied after it.
	f.mu.Lock()
	defer f.mu.Unlock()
	data, err := os.ReadFile(path)
	if err != nil {
		return true, err
	}
	sum := sha256.Sum256(data)
	if sum == f.applied {
		f.rejected.sum = [32]byte{}
		return false, nil
	}
	cfg, err := config.ParseIn(data, f.opts.ConfigEnv)
	if err != nil {
		fresh = sum != f.rejected.sum || err.Error() != f.rejected.err
		f.rejected.sum, f.rejected.err = sum, err.Error()
		return fresh, err
	}
	f.applied = sum
	f.rejected.sum = [32]byte{}
	summary := describeChange(f.config(), cfg)
	f.applyLocked(ctx, cfg)
	f.opts.Metrics.configReloads.WithLabelValues("success").Inc()
	klog.FromContext(ctx).Info("Config applied", "path", path, "change", summary)
	f.events.Record(f.opts.EventObject, v1.EventTypeNormal, ReasonConfigApplied, fmt.Sprintf("%s applied: %s", path, summary))
	return false, nil
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

// reportNoticesLocked logs, once per applied config, the keys that have no
// effect (or not the one they seem to have) and the environment's
// overrides; each unknown key is also an Event, naming it by path, so a
// typo is seen where kubectl shows the config's fate.
func (f *fleet) reportNoticesLocked(cfg *config.Config) {
	if f.noticed == cfg {
		return
	}
	f.noticed = cfg
	log := klog.Background().WithValues("path", f.opts.ConfigPath)
	for _, n := range cfg.Notices {
		switch n.Kind {
		case config.NoticeUnknown:
			log.Info("Config key ignored: neither CPI nor this CCM reads it", "key", n.Path, "line", n.Line, "reason", n.Reason)
			f.events.Record(f.opts.EventObject, v1.EventTypeWarning, ReasonConfigUnknownKey, n.String())
		default:
			log.Info("Config notice", "kind", n.Kind.String(), "key", n.Path, "line", n.Line, "reason", n.Reason)
		}
	}
}

// refreshCredentials lets every vCenter's backend pick up changed
// credentials, in parallel, each under its request deadline.
func (f *fleet) refreshCredentials(ctx context.Context) {
	served := f.served.Load()
	var wg sync.WaitGroup
	for _, vc := range served.cfg.VCenters {
		b, ok := served.backends[vc.Name]
		if !ok {
			continue
		}
		wg.Go(func() {
			log := klog.FromContext(ctx).WithValues("vcenter", vc.Name)
			rctx, cancel := context.WithTimeout(ctx, vc.RequestTimeout)
			defer cancel()
			rotated, err := b.RefreshCredentials(rctx, vc.RequestTimeout)
			switch {
			case err != nil:
				log.Error(err, "Credentials could not be refreshed; the current session keeps serving")
				f.opts.Metrics.credentials.WithLabelValues(vc.Name, "error").Inc()
				f.events.Record(f.credentialsObject(vc), v1.EventTypeWarning, ReasonCredentialsFailed,
					fmt.Sprintf("vcenter %s: %v; the current session keeps serving", vc.Name, err))
			case rotated:
				log.Info("Credentials rotated: new session in use, the old one is logged out")
				f.opts.Metrics.credentials.WithLabelValues(vc.Name, "rotated").Inc()
				f.events.Record(f.credentialsObject(vc), v1.EventTypeNormal, ReasonCredentialsRotated,
					fmt.Sprintf("vcenter %s: logged in with the new credentials", vc.Name))
			}
		})
	}
	wg.Wait()
}
