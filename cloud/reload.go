package cloud

import (
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/fsnotify/fsnotify"
	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/backends"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config"
)

// Event reasons about configuration and credentials.
const (
	ReasonConfigInvalid      = "ConfigInvalid"
	ReasonConfigApplied      = "ConfigApplied"
	ReasonCredentialsFailed  = "CredentialsFailed"
	ReasonCredentialsRotated = "CredentialsRotated"
)

// debounce groups the burst of file events one edit makes (a ConfigMap
// update swaps a symlink; editors write, rename and chmod).
const debounce = 200 * time.Millisecond

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

func (c *Cloud) reloadLoop(stop <-chan struct{}) {
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-stop; cancel() }()
	for {
		select {
		case <-stop:
			return
		case <-c.reloads:
			c.Reload(ctx)
		}
	}
}

// Reload re-reads the config file (when the provider has one) and applies
// it if it changed and is valid, then refreshes every vCenter's
// credentials. An invalid file leaves the last good config serving.
func (c *Cloud) Reload(ctx context.Context) {
	log := klog.FromContext(ctx)
	if path := c.opts.ConfigPath; path != "" {
		if err := c.reloadConfig(ctx, path); err != nil {
			log.Error(err, "Config rejected; the last good config keeps serving", "path", path)
			c.observeReload("error")
			c.event(c.opts.EventObject, v1.EventTypeWarning, ReasonConfigInvalid,
				fmt.Sprintf("%s rejected, the last good config keeps serving: %v", path, err))
		}
	}
	c.refreshCredentials(ctx)
}

// reloadConfig applies the file at path if its content changed since it
// was last applied or rejected.
func (c *Cloud) reloadConfig(ctx context.Context, path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	sum := sha256.Sum256(data)
	c.mu.Lock()
	defer c.mu.Unlock()
	if sum == c.lastConfig {
		return nil
	}
	c.lastConfig = sum
	cfg, err := config.Parse(data)
	if err != nil {
		return err
	}
	old := c.cfg.Load()
	c.applyLocked(cfg)
	c.observeReload("success")
	summary := describeChange(old, cfg)
	klog.FromContext(ctx).Info("Config applied", "path", path, "change", summary)
	c.event(c.opts.EventObject, v1.EventTypeNormal, ReasonConfigApplied, fmt.Sprintf("%s applied: %s", path, summary))
	return nil
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

// refreshCredentials lets every vCenter's backend pick up changed
// credentials, in parallel, each under its request deadline.
func (c *Cloud) refreshCredentials(ctx context.Context) {
	cfg := c.cfg.Load()
	c.mu.Lock()
	current := make(map[string]*vcenterBackend, len(c.backends))
	for name, b := range c.backends {
		current[name] = b
	}
	c.mu.Unlock()
	var wg sync.WaitGroup
	for _, vc := range cfg.VCenters {
		b, ok := current[vc.Name]
		if !ok {
			continue
		}
		r, ok := b.Backend.(backends.CredentialRefresher)
		if !ok {
			continue
		}
		wg.Go(func() {
			log := klog.FromContext(ctx).WithValues("vcenter", vc.Name)
			rctx, cancel := context.WithTimeout(ctx, vc.RequestTimeout)
			defer cancel()
			rotated, err := r.RefreshCredentials(rctx, vc.RequestTimeout)
			switch {
			case err != nil:
				log.Error(err, "Credentials could not be refreshed; the current session keeps serving")
				c.observeCredentials(vc.Name, "error")
				c.event(c.credentialsObject(vc), v1.EventTypeWarning, ReasonCredentialsFailed,
					fmt.Sprintf("vcenter %s: %v; the current session keeps serving", vc.Name, err))
			case rotated:
				log.Info("Credentials rotated: new session in use, the old one is logged out")
				c.observeCredentials(vc.Name, "rotated")
				c.event(c.credentialsObject(vc), v1.EventTypeNormal, ReasonCredentialsRotated,
					fmt.Sprintf("vcenter %s: logged in with the new credentials", vc.Name))
			}
		})
	}
	wg.Wait()
}

func (c *Cloud) observeCredentials(vcenter, result string) {
	if c.opts.Metrics != nil {
		c.opts.Metrics.credentials.WithLabelValues(vcenter, result).Inc()
	}
}

func (c *Cloud) event(obj *v1.ObjectReference, eventType, reason, msg string) {
	if c.recorder != nil && obj != nil {
		c.recorder.Event(obj, eventType, reason, msg)
	}
}

// watchFiles requests a reload when the config file or the secrets
// directory changes. It watches directories, not files: a mounted
// ConfigMap or Secret swaps a "..data" symlink, and editors replace files
// by renaming, both of which a watch on the file itself would miss.
func (c *Cloud) watchFiles(stop <-chan struct{}) error {
	var dirs []string
	if c.opts.ConfigPath != "" {
		dirs = append(dirs, filepath.Dir(c.opts.ConfigPath))
	}
	if d := c.cfg.Load().SecretsDirectory; d != "" {
		dirs = append(dirs, d)
	}
	if len(dirs) == 0 {
		return nil
	}
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return err
	}
	for _, d := range dirs {
		if err := w.Add(d); err != nil {
			_ = w.Close()
			return fmt.Errorf("watch %s: %w", d, err)
		}
	}
	go func() {
		defer w.Close()
		var timer *time.Timer
		for {
			select {
			case <-stop:
				return
			case _, ok := <-w.Events:
				if !ok {
					return
				}
				if timer == nil {
					timer = time.AfterFunc(debounce, c.RequestReload)
				} else {
					timer.Reset(debounce)
				}
			case err, ok := <-w.Errors:
				if !ok {
					return
				}
				klog.Background().Error(err, "File watch error")
			}
		}
	}()
	return nil
}
