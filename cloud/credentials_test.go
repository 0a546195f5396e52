package cloud_test

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"k8s.io/client-go/kubernetes/fake"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/backends"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/cloud"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config/credentials"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/test/backendtest"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/test/vcsim"
)

// Each vCenter's credentials are the chain CPI's connection manager tries:
// the config's user and password, then its Secret, else the secrets
// directory.
func TestCredentialSourcesInCPIOrder(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name, yaml, want string
	}{
		{"inline only", "vcenter:\n  a:\n    server: a.example.com\n    user: u\n    password: p\n", "config file"},
		{"Secret only", "global:\n  secretName: s\n  secretNamespace: kube-system\nvcenter:\n  a:\n    server: a.example.com\n", "secret kube-system/s"},
		{"inline, then the Secret", "global:\n  secretName: s\n  secretNamespace: kube-system\nvcenter:\n  a:\n    server: a.example.com\n    user: u\n    password: p\n", "config file, then secret kube-system/s"},
		{"directory only", "global:\n  secretsDirectory: " + dir + "\nvcenter:\n  a:\n    server: a.example.com\n", "secrets directory " + dir},
		{"inline, then the directory", "global:\n  secretsDirectory: " + dir + "\nvcenter:\n  a:\n    server: a.example.com\n    user: u\n    password: p\n", "config file, then secrets directory " + dir},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			var got []string
			fleet := newFakeFleet("a")
			fleet.start(t, tc.yaml, fake.NewClientset(), func(o *cloud.Options) {
				o.NewBackend = func(vc config.VCenter, creds credentials.Source) backends.Backend {
					mu.Lock()
					got = append(got, creds.String())
					mu.Unlock()
					return backendtest.New()
				}
			})
			mu.Lock()
			defer mu.Unlock()
			if len(got) != 1 || got[0] != tc.want {
				t.Fatalf("credential sources = %q, want [%q]", got, tc.want)
			}
		})
	}
}

// A stale password left in the config does not stop a CPI cluster whose
// secrets directory (or Secret) holds the right one: vCenter refuses the
// former, the latter logs in, as in CPI.
func TestStaleInlinePasswordFallsBackToTheSecretsDirectory(t *testing.T) {
	fed, err := vcsim.Start(vcsim.Options{VCenters: 1, Datacenters: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fed.Close)
	vc := fed.VCenters[0]
	dir := t.TempDir()
	for k, v := range map[string]string{credentials.UsernameKey(vc.Host): vc.User, credentials.PasswordKey(vc.Host): vc.Password} {
		if err := os.WriteFile(filepath.Join(dir, k), []byte(v+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	yaml := fmt.Sprintf("global:\n  insecureFlag: true\n  requestTimeout: 5s\n  secretsDirectory: %s\nvcenter:\n  %s:\n    server: %s\n    port: %d\n    user: %q\n    password: \"pw-stale\"\n",
		dir, vc.Name, vc.Host, vc.Port, vc.User)
	cfg, err := config.Parse([]byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	c := cloud.New(cfg, cloud.Options{NewBackend: vsphereBackends})
	startCloud(t, c)
	vm := vc.VMs[0]
	eventually(t, "the Node's metadata, logged in with the directory's password", func() bool {
		md, err := c.InstanceMetadata(t.Context(), kubeletNode("node-0", vm.SystemUUID()))
		return err == nil && md.ProviderID == "vsphere://"+vm.UUID
	})
}
