package e2e

// The image test/image.sh builds (test/all.sh passes it in E2E_IMAGE):
// an index of linux/amd64 and linux/arm64 images from scratch, each the
// static binary at /vsphere-federated-ccm (the entrypoint) and at CPI's
// /bin/vsphere-cloud-controller-manager, CA roots, the license, user
// 65532, no shell, OCI labels; and the binary in it runs.

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/test/harness"
)

type ociDescriptor struct {
	MediaType string `json:"mediaType"`
	Digest    string `json:"digest"`
	Size      int64  `json:"size"`
	Platform  *struct {
		Architecture string `json:"architecture"`
		OS           string `json:"os"`
	} `json:"platform"`
}

// ociArchive is the files of an OCI layout archive, by path.
type ociArchive map[string][]byte

func readOCIArchive(t *testing.T, path string) ociArchive {
	t.Helper()
	f, err := os.Open(path)
	must(t, err)
	defer f.Close()
	out := ociArchive{}
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		must(t, err)
		if h.Typeflag == tar.TypeReg {
			data, err := io.ReadAll(tr)
			must(t, err)
			out[strings.TrimPrefix(h.Name, "./")] = data
		}
	}
}

func (a ociArchive) blob(t *testing.T, digest string, into any) []byte {
	t.Helper()
	data, ok := a["blobs/"+strings.Replace(digest, ":", "/", 1)]
	if !ok {
		t.Fatalf("blob %s missing from the archive", digest)
	}
	if into != nil {
		must(t, json.Unmarshal(data, into))
	}
	return data
}

// layerFiles lists a (gzip or plain) layer's entries: path -> type and link.
func layerFiles(t *testing.T, data []byte) map[string]string {
	t.Helper()
	var r io.Reader = bytes.NewReader(data)
	if len(data) > 2 && data[0] == 0x1f && data[1] == 0x8b {
		gz, err := gzip.NewReader(r)
		must(t, err)
		r = gz
	}
	out := map[string]string{}
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		must(t, err)
		name := "/" + strings.TrimPrefix(strings.TrimSuffix(h.Name, "/"), "./")
		switch h.Typeflag {
		case tar.TypeSymlink:
			out[name] = "symlink " + h.Linkname
		case tar.TypeReg:
			out[name] = fmt.Sprintf("file %o %d", h.Mode&0o7777, h.Size)
		default:
			out[name] = fmt.Sprintf("type %c", h.Typeflag)
		}
	}
}

func TestImage(t *testing.T) {
	path := os.Getenv("E2E_IMAGE")
	if path == "" {
		t.Skip("E2E_IMAGE is not set (test/all.sh builds the image with test/image.sh and sets it)")
	}
	st, err := os.Stat(path)
	must(t, err)
	a := readOCIArchive(t, path)
	var top struct{ Manifests []ociDescriptor }
	must(t, json.Unmarshal(a["index.json"], &top))
	if len(top.Manifests) != 1 || top.Manifests[0].MediaType != "application/vnd.oci.image.index.v1+json" {
		t.Fatalf("index.json = %s; want one image index", a["index.json"])
	}
	var index struct{ Manifests []ociDescriptor }
	a.blob(t, top.Manifests[0].Digest, &index)
	var arches []string
	for _, m := range index.Manifests {
		if m.Platform == nil || m.Platform.OS != "linux" {
			t.Fatalf("manifest %s: platform %+v, want linux", m.Digest, m.Platform)
		}
		arches = append(arches, m.Platform.Architecture)
		var manifest struct {
			Config ociDescriptor
			Layers []ociDescriptor
		}
		a.blob(t, m.Digest, &manifest)
		var config struct {
			Architecture string
			Config       struct {
				User       string
				Entrypoint []string
				Cmd        []string
				Labels     map[string]string
			}
		}
		a.blob(t, manifest.Config.Digest, &config)
		c := config.Config
		if config.Architecture != m.Platform.Architecture || c.User != "65532:65532" ||
			!slices.Equal(c.Entrypoint, []string{"/vsphere-federated-ccm"}) || len(c.Cmd) != 0 {
			t.Errorf("%s: architecture %q user %q entrypoint %q cmd %q; want %s, 65532:65532, [/vsphere-federated-ccm], none",
				m.Platform.Architecture, config.Architecture, c.User, c.Entrypoint, c.Cmd, m.Platform.Architecture)
		}
		for _, k := range []string{"org.opencontainers.image.source", "org.opencontainers.image.version", "org.opencontainers.image.revision"} {
			if c.Labels[k] == "" || c.Labels[k] == "unknown" {
				t.Errorf("%s: label %s = %q", m.Platform.Architecture, k, c.Labels[k])
			}
		}
		if c.Labels["org.opencontainers.image.licenses"] != "Apache-2.0" {
			t.Errorf("%s: licenses label %q", m.Platform.Architecture, c.Labels["org.opencontainers.image.licenses"])
		}
		files := map[string]string{}
		var size int64
		for _, l := range manifest.Layers {
			size += l.Size
			for k, v := range layerFiles(t, a.blob(t, l.Digest, nil)) {
				files[k] = v
			}
		}
		if !strings.HasPrefix(files["/vsphere-federated-ccm"], "file 555 ") ||
			files["/bin/vsphere-cloud-controller-manager"] != "symlink ../vsphere-federated-ccm" ||
			!strings.HasPrefix(files["/etc/ssl/certs/ca-certificates.crt"], "file 444 ") ||
			!strings.HasPrefix(files["/LICENSE"], "file ") {
			t.Errorf("%s: files %v", m.Platform.Architecture, files)
		}
		for _, shell := range []string{"/bin/sh", "/bin/bash", "/usr/bin/sh"} {
			if _, ok := files[shell]; ok {
				t.Errorf("%s: %s in the image", m.Platform.Architecture, shell)
			}
		}
		t.Logf("linux/%s: %d layer(s), %.1f MB compressed", m.Platform.Architecture, len(manifest.Layers), float64(size)/1e6)
	}
	slices.Sort(arches)
	if !slices.Equal(arches, []string{"amd64", "arm64"}) {
		t.Fatalf("architectures %v, want amd64 and arm64", arches)
	}
	t.Logf("archive %s: %.1f MB", path, float64(st.Size())/1e6)

	// The amd64 image runs: its binary, by both paths, as its user.
	bh := []string{"--storage-driver", "vfs"}
	out, err := exec.Command("buildah", append(bh, "from", "--quiet", "oci-archive:"+path)...).Output()
	must(t, err)
	ctr := strings.TrimSpace(string(out))
	t.Cleanup(func() { _ = exec.Command("buildah", append(bh, "rm", ctr)...).Run() })
	for _, bin := range []string{"/vsphere-federated-ccm", "/bin/vsphere-cloud-controller-manager"} {
		out, err := exec.Command("buildah", append(bh, "run", "--isolation", "chroot", ctr, "--", bin, "--version")...).CombinedOutput()
		if err != nil || !strings.HasPrefix(string(out), "vsphere-federated-ccm ") {
			t.Errorf("%s --version in the image: %v\n%s", bin, err, out)
		}
	}
	if out, err := exec.Command("buildah", append(bh, "run", "--isolation", "chroot", ctr, "--", "/bin/sh", "-c", "true")...).CombinedOutput(); err == nil {
		t.Errorf("/bin/sh ran in the image:\n%s", out)
	}
}

// The image's user is not root: a config mounted readable only by root
// (mode 0600, as a hostPath or a Secret with defaultMode 0600 would be)
// stops the CCM with an error naming the file; the same files with the
// modes a kubelet gives a ConfigMap start it.
func TestImageUserReadsOnlyWhatAPodCould(t *testing.T) {
	path := os.Getenv("E2E_IMAGE")
	if path == "" {
		t.Skip("E2E_IMAGE is not set (test/all.sh builds the image with test/image.sh and sets it)")
	}
	t.Parallel()
	env := newEnv(t, harness.Options{VCenters: 1, Datacenters: 1, MachinesPerPool: 1})
	img, err := harness.OpenImage(path)
	must(t, err)
	t.Cleanup(func() { _ = img.Close() })
	args, err := env.CCMArgs(harness.CCMOptions{})
	must(t, err)
	must(t, os.Chmod(env.Opts.Dir, 0o755))
	must(t, os.Chmod(env.CCMKubeconfig, 0o644))
	must(t, os.Chmod(env.CloudConfig, 0o600))
	bin, argv := img.Command([]string{env.Opts.Dir}, args)
	p, err := harness.StartCCMProcess("ccm-image", bin, env.Opts.Dir, argv)
	must(t, err)
	t.Cleanup(func() { _ = p.Close() })
	err = wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		return !p.Running(), nil
	})
	if err != nil {
		t.Fatalf("the CCM runs with a config its user cannot read:\n%s", p.Tail(20))
	}
	if p.ExitErr() == nil {
		t.Fatalf("the CCM exited 0 with an unreadable config:\n%s", p.Tail(20))
	}
	if log := p.Log(); !strings.Contains(log, env.CloudConfig+": permission denied") {
		t.Fatalf("the log does not say the config %s could not be read:\n%s", env.CloudConfig, p.Tail(20))
	}
	must(t, os.Chmod(env.CloudConfig, 0o644))
	must(t, p.Restart())
	must(t, p.WaitHealthy(t.Context(), time.Minute))
	t.Logf("image user %s: refused a 0600 config (%v), runs with 0644", img.User, p.LogPaths())
}
