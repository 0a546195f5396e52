package credentials_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config/credentials"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/test/poll"
)

func secret(data map[string]string) *corev1.Secret {
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "vsphere-creds"}, Data: map[string][]byte{}}
	for k, v := range data {
		s.Data[k] = []byte(v)
	}
	return s
}

func TestSecretSource(t *testing.T) {
	const server = "10.0.0.1"
	client := fake.NewClientset(secret(map[string]string{server + ".username": "ccm", server + ".password": "pw-1\n"}))
	var changes atomic.Int64
	secrets := credentials.NewSecrets(client, func(ns, name string) {
		if ns == "kube-system" && name == "vsphere-creds" {
			changes.Add(1)
		}
	})
	defer secrets.Close()
	src := secrets.Source("kube-system", "vsphere-creds", server)
	ctx := t.Context()
	got, err := src.Get(ctx)
	if err != nil || got.User != "ccm" || got.Password.Reveal() != "pw-1" {
		t.Fatalf("Get = %v, %v", got, err)
	}

	before := changes.Load()
	if _, err := client.CoreV1().Secrets("kube-system").Update(ctx, secret(map[string]string{server + ".username": "ccm", server + ".password": "pw-2"}), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the updated Secret's password", func() bool {
		c, err := src.Get(ctx)
		return err == nil && c.Password.Reveal() == "pw-2" && changes.Load() > before
	})

	// Another server's keys only: a clear error naming the key, no value.
	other := secrets.Source("kube-system", "vsphere-creds", "10.9.9.9")
	if _, err := other.Get(ctx); err == nil || !strings.Contains(err.Error(), "10.9.9.9.username") {
		t.Fatalf("missing keys: err = %v", err)
	}

	if err := client.CoreV1().Secrets("kube-system").Delete(ctx, "vsphere-creds", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the deleted Secret to be reported not found", func() bool {
		_, err := src.Get(ctx)
		return err != nil && strings.Contains(err.Error(), "kube-system/vsphere-creds not found")
	})
	if _, err := src.Get(ctx); strings.Contains(fmt.Sprint(err), "pw-") {
		t.Fatalf("error leaks a password: %v", err)
	}
}

// waitFor polls cond every 20ms for up to 5s.
var waitFor = poll.Schedule{Every: 20 * time.Millisecond, Within: 5 * time.Second}.Until

func TestDirectorySource(t *testing.T) {
	dir := t.TempDir()
	src := credentials.Directory{Dir: dir, Server: "vc.example.com"}
	if _, err := src.Get(t.Context()); err == nil {
		t.Fatal("no files: want an error")
	}
	for k, v := range map[string]string{"vc.example.com.username": "ccm\n", "vc.example.com.password": "s3cret\n"} {
		if err := os.WriteFile(filepath.Join(dir, k), []byte(v), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	got, err := src.Get(t.Context())
	if err != nil || got.User != "ccm" || got.Password.Reveal() != "s3cret" {
		t.Fatalf("Get = %+v, %v", got, err)
	}
	if s := fmt.Sprintf("%v %+v %#v", got, got, got); strings.Contains(s, "s3cret") {
		t.Fatalf("credentials print their password: %s", s)
	}
}

// A secrets directory holds what a Secret volume or a vault agent put
// there. A FIFO, a link to a device or a huge file is not a credential:
// an error naming the file, at once, and nothing read into memory. A
// Secret volume's layout (each key a link through ..data) works.
func TestDirectoryReadsOnlyRegularFiles(t *testing.T) {
	const server = "vc.example.com"
	for _, tc := range []struct {
		name string
		make func(t *testing.T, path string)
	}{
		{"fifo", func(t *testing.T, path string) {
			if err := syscall.Mkfifo(path, 0o600); err != nil {
				t.Skipf("mkfifo: %v", err)
			}
		}},
		{"link to /dev/zero", func(t *testing.T, path string) {
			if err := os.Symlink("/dev/zero", path); err != nil {
				t.Fatal(err)
			}
		}},
		{"directory", func(t *testing.T, path string) {
			if err := os.Mkdir(path, 0o700); err != nil {
				t.Fatal(err)
			}
		}},
		{"oversize", func(t *testing.T, path string) {
			if err := os.WriteFile(path, []byte(strings.Repeat("S3cr3t", 20000)), 0o600); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, server+".username"), []byte("ccm\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			tc.make(t, filepath.Join(dir, server+".password"))
			done := make(chan error, 1)
			go func() {
				_, err := credentials.Directory{Dir: dir, Server: server}.Get(t.Context())
				done <- err
			}()
			select {
			case err := <-done:
				if err == nil || !strings.Contains(err.Error(), server+".password") || strings.Contains(err.Error(), "S3cr3t") {
					t.Fatalf("err = %v; want an error naming the file, not its content", err)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("reading the secrets directory hangs")
			}
		})
	}
	t.Run("secret volume layout", func(t *testing.T) {
		dir := t.TempDir()
		data := filepath.Join(dir, "..2026_11_23_00_00_00.1")
		if err := os.Mkdir(data, 0o700); err != nil {
			t.Fatal(err)
		}
		for k, v := range map[string]string{server + ".username": "ccm", server + ".password": "pw\n"} {
			if err := os.WriteFile(filepath.Join(data, k), []byte(v), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(filepath.Join("..data", k), filepath.Join(dir, k)); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.Symlink(filepath.Base(data), filepath.Join(dir, "..data")); err != nil {
			t.Fatal(err)
		}
		got, err := credentials.Directory{Dir: dir, Server: server}.Get(t.Context())
		if err != nil || got.User != "ccm" || got.Password.Reveal() != "pw" {
			t.Fatalf("Get = %+v, %v", got, err)
		}
	})
}

// A Secret the config no longer names has its informer stopped (it
// watched the API server for nothing, for ever); named again, it is
// watched again.
func TestWatchStopsInformersOfReleasedSecrets(t *testing.T) {
	a := secret(map[string]string{"vc-a.username": "ccm", "vc-a.password": "pw-a"})
	b := secret(map[string]string{"vc-b.username": "ccm", "vc-b.password": "pw-b"})
	b.Name = "other-creds"
	client := fake.NewClientset(a, b)
	var changesB atomic.Int64
	secrets := credentials.NewSecrets(client, func(_, name string) {
		if name == "other-creds" {
			changesB.Add(1)
		}
	})
	defer secrets.Close()
	ctx := t.Context()
	srcA := secrets.Source("kube-system", "vsphere-creds", "vc-a")
	srcB := secrets.Source("kube-system", "other-creds", "vc-b")
	for _, src := range []credentials.Source{srcA, srcB} {
		if _, err := src.Get(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if got := fmt.Sprint(secrets.Watching()); got != "[kube-system/other-creds kube-system/vsphere-creds]" {
		t.Fatalf("Watching = %s", got)
	}
	secrets.Watch([]credentials.SecretRef{{Namespace: "kube-system", Name: "vsphere-creds"}})
	if got := fmt.Sprint(secrets.Watching()); got != "[kube-system/vsphere-creds]" {
		t.Fatalf("after Watch, Watching = %s; want only vsphere-creds", got)
	}
	before := changesB.Load()
	b2 := b.DeepCopy()
	b2.Data["vc-b.password"] = []byte("pw-b2")
	if _, err := client.CoreV1().Secrets("kube-system").Update(ctx, b2, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	if changesB.Load() != before {
		t.Fatal("a released Secret is still watched")
	}
	// Named again: a fresh informer, current values.
	got, err := srcB.Get(ctx)
	if err != nil || got.Password.Reveal() != "pw-b2" {
		t.Fatalf("released Secret read again: %v, %v", got, err)
	}
}
