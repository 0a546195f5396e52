package harness

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Image is a working container of the CCM's image (an OCI archive, as
// test/image.sh writes), from which a CCM runs as in a Pod: the image's own
// entrypoint and user, host networking, and the Env's directory mounted
// read-only where the arguments name it, as the kubelet mounts a ConfigMap
// and a token. So a wrong entrypoint, a file missing from the image or a
// user that cannot read its config fails the test that runs it. It needs
// buildah (as root, vfs storage, chroot isolation: no daemon, no
// user namespaces).
type Image struct {
	Archive string
	// Entrypoint and User are the image config's, as buildah read them.
	Entrypoint []string
	User       string

	container string
}

// buildahGlobal are the options every buildah call of the harness shares.
var buildahGlobal = []string{"--storage-driver", "vfs"}

func buildah(args ...string) ([]byte, error) {
	cmd := exec.Command("buildah", append(append([]string(nil), buildahGlobal...), args...)...)
	out, err := cmd.Output()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return out, fmt.Errorf("buildah %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(ee.Stderr)))
	}
	if err != nil {
		return out, fmt.Errorf("buildah %s: %w", strings.Join(args, " "), err)
	}
	return out, nil
}

// OpenImage creates a working container of the archive's image for this
// machine's platform; Close removes it.
func OpenImage(archive string) (*Image, error) {
	abs, err := filepath.Abs(archive)
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(abs); err != nil {
		return nil, fmt.Errorf("harness: image: %w", err)
	}
	name := "vfccm-e2e-" + strconv.Itoa(os.Getpid()) + "-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	if _, err := buildah("from", "--quiet", "--name", name, "oci-archive:"+abs); err != nil {
		return nil, fmt.Errorf("harness: image %s: %w", abs, err)
	}
	img := &Image{Archive: abs, container: name}
	out, err := buildah("inspect", "--type", "container", name)
	if err != nil {
		_ = img.Close()
		return nil, fmt.Errorf("harness: image %s: %w", abs, err)
	}
	var inspected struct {
		OCIv1 struct {
			Config struct {
				User       string   `json:"User"`
				Entrypoint []string `json:"Entrypoint"`
			} `json:"config"`
		} `json:"OCIv1"`
	}
	if err := json.Unmarshal(out, &inspected); err != nil {
		_ = img.Close()
		return nil, fmt.Errorf("harness: image %s config: %w", abs, err)
	}
	cfg := inspected.OCIv1.Config
	if len(cfg.Entrypoint) == 0 {
		_ = img.Close()
		return nil, fmt.Errorf("harness: image %s has no entrypoint", abs)
	}
	img.Entrypoint, img.User = cfg.Entrypoint, cfg.User
	return img, nil
}

// Command is how to run the image's entrypoint with args: buildah run
// adds no entrypoint of its own, so it is the image config's, and the user
// is the image's. Each of dirs is mounted read-only at its own path.
func (i *Image) Command(dirs []string, args []string) (bin string, argv []string) {
	argv = append(argv, buildahGlobal...)
	argv = append(argv, "run", "--isolation", "chroot", "--network", "host")
	if i.User != "" {
		argv = append(argv, "--user", i.User)
	}
	for _, d := range dirs {
		argv = append(argv, "--volume", d+":"+d+":ro")
	}
	argv = append(argv, i.container, "--")
	argv = append(argv, i.Entrypoint...)
	return "buildah", append(argv, args...)
}

// Close removes the working container.
func (i *Image) Close() error {
	_, err := buildah("rm", i.container)
	return err
}

// mountLikeKubelet gives dir and the files in it the modes a kubelet gives
// a ConfigMap or projected-token volume (directory 0755, files 0644), so
// the image's unprivileged user reads what a Pod would; what a test makes
// unreadable later stays so.
func mountLikeKubelet(dir string, files ...string) error {
	if err := os.Chmod(dir, 0o755); err != nil {
		return err
	}
	for _, f := range files {
		if err := os.Chmod(f, 0o644); err != nil {
			return err
		}
	}
	return nil
}
