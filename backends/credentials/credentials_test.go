package credentials_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
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
