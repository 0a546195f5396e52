package credentials_test

import (
	"context"
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

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/backends/credentials"
)

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

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
	stop := make(chan struct{})
	defer close(stop)
	var changes atomic.Int64
	secrets := credentials.NewSecrets(client, stop, func(ns, name string) {
		if ns == "kube-system" && name == "vsphere-creds" {
			changes.Add(1)
		}
	})
	src := secrets.Source("kube-system", "vsphere-creds", server)
	ctx := ctxT(t)
	got, err := src.Get(ctx)
	if err != nil || got.User != "ccm" || got.Password.Reveal() != "pw-1" {
		t.Fatalf("Get = %v, %v", got, err)
	}

	before := changes.Load()
	if _, err := client.CoreV1().Secrets("kube-system").Update(ctx, secret(map[string]string{server + ".username": "ccm", server + ".password": "pw-2"}), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool {
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
	waitFor(t, func() bool {
		_, err := src.Get(ctx)
		return err != nil && strings.Contains(err.Error(), "kube-system/vsphere-creds not found")
	})
	if _, err := src.Get(ctx); strings.Contains(fmt.Sprint(err), "pw-") {
		t.Fatalf("error leaks a password: %v", err)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in 5s")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestDirectorySource(t *testing.T) {
	dir := t.TempDir()
	src := credentials.Directory{Dir: dir, Server: "vc.example.com"}
	if _, err := src.Get(ctxT(t)); err == nil {
		t.Fatal("no files: want an error")
	}
	for k, v := range map[string]string{"vc.example.com.username": "ccm\n", "vc.example.com.password": "s3cret\n"} {
		if err := os.WriteFile(filepath.Join(dir, k), []byte(v), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	got, err := src.Get(ctxT(t))
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
				_, err := credentials.Directory{Dir: dir, Server: server}.Get(ctxT(t))
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
		got, err := credentials.Directory{Dir: dir, Server: server}.Get(ctxT(t))
		if err != nil || got.User != "ccm" || got.Password.Reveal() != "pw" {
			t.Fatalf("Get = %+v, %v", got, err)
		}
	})
}
