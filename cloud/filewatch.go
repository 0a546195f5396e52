package cloud

// The watch of the config file and the secrets directory (fsnotify).

import (
	"fmt"
	"path/filepath"
	"time"

	"github.com/fsnotify/fsnotify"
	"k8s.io/klog/v2"
)

// debounce groups the burst of file events one edit makes (a ConfigMap
// update swaps a symlink; editors write, rename and chmod).
const debounce = 200 * time.Millisecond

// fileWatcher requests a reload when the config file or the secrets
// directory changes. It watches directories, not files: a mounted
// ConfigMap or Secret swaps a "..data" symlink, and editors replace files
// by renaming, both of which a watch on the file itself would miss. The
// secrets directory follows the config (setSecretsDirectory).
type fileWatcher struct {
	w         *fsnotify.Watcher
	configDir string
	// secretsDir is set by the fleet's apply, under its mu.
	secretsDir string
}

// newFileWatcher watches configPath's directory (none when empty); its
// owner runs run, which ends once w is closed.
func newFileWatcher(configPath string) (*fileWatcher, error) {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, err
	}
	fw := &fileWatcher{w: w}
	if configPath != "" {
		fw.configDir = filepath.Dir(configPath)
		if err := w.Add(fw.configDir); err != nil {
			_ = w.Close()
			return nil, fmt.Errorf("watch %s: %w", fw.configDir, err)
		}
	}
	return fw, nil
}

// run calls reload after each burst of events, until w is closed.
func (fw *fileWatcher) run(reload func()) {
	// Debounced in this goroutine (no timer callback outliving it): a
	// burst of events is one reload, debounce after the last.
	timer := time.NewTimer(debounce)
	timer.Stop()
	defer timer.Stop()
	for {
		select {
		case <-timer.C:
			reload()
		case _, ok := <-fw.w.Events:
			if !ok {
				return
			}
			timer.Reset(debounce)
		case err, ok := <-fw.w.Errors:
			if !ok {
				return
			}
			klog.Background().Error(err, "File watch error")
		}
	}
}

// setSecretsDirectory watches dir instead of the previous secrets
// directory (none when empty).
func (fw *fileWatcher) setSecretsDirectory(dir string) {
	if dir == fw.secretsDir {
		return
	}
	if fw.secretsDir != "" && fw.secretsDir != fw.configDir {
		_ = fw.w.Remove(fw.secretsDir)
	}
	fw.secretsDir = ""
	if dir == "" {
		return
	}
	if err := fw.w.Add(dir); err != nil {
		klog.Background().Error(err, "Watching the secrets directory failed; rotated files are read at the next login", "dir", dir)
		return
	}
	fw.secretsDir = dir
}
