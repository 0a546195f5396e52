package cloud_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/backends"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/backends/vsphere"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/cloud"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config/credentials"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/discovery"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/test/vcsim"
)

// A vCenter re-imaged in place while the CCM runs — another appliance at
// the same address, every session ended — and then a VM destroyed on the
// new one: its Node is not gone, since the old appliance that held the VM
// cannot be asked. Found by TestRule1ModelVCsim in CI: the re-login kept
// the old appliance's instance UUID, so nothing retired it and the new
// appliance's "not found" deleted the Node.
func TestReimagedVCenterKeepsItsNodes(t *testing.T) {
	for _, inventory := range []bool{false, true} {
		t.Run(fmt.Sprintf("inventory=%t", inventory), func(t *testing.T) {
			fed, err := vcsim.Start(vcsim.Options{VCenters: 1, Datacenters: 1, MachinesPerPool: 1})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(fed.Close)
			vc := fed.VCenters[0]
			path := filepath.Join(t.TempDir(), "vsphere.conf")
			writeModelFile(t, path, fmt.Sprintf("global:\n  insecureFlag: true\n  requestTimeout: 2s\n  nodeDeletion: {minAbsence: 0s}\nvcenter:\n  vc1:\n    server: %s\n    port: %d\n    user: %q\n    password: %q\n    inventory: %t\n",
				vc.Host, vc.Port, vc.User, vc.Password, inventory))
			c, err := cloud.NewFromFile(path, cloud.Options{NewBackend: func(vc config.VCenter, creds credentials.Source) backends.Backend {
				return vsphere.New(vsphere.Options{Config: vc, Credentials: creds, Inventory: vc.Inventory, Heartbeat: time.Second})
			}})
			if err != nil {
				t.Fatal(err)
			}
			client := fake.NewClientset()
			stop := make(chan struct{})
			c.Start(client, stop)
			t.Cleanup(func() {
				close(stop)
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				c.Stop(ctx)
			})
			ctx := t.Context()
			vm := vc.VMs[0]
			node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: vm.Name}, Spec: v1.NodeSpec{ProviderID: discovery.ProviderID(vm.UUID)}}
			if _, err := client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			exists := func() (bool, error) {
				ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				defer cancel()
				return c.InstanceExists(ctx, node)
			}
			for deadline := time.Now().Add(10 * time.Second); ; {
				ok, err := exists()
				if ok {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("InstanceExists before the re-image = %t, %v; want true", ok, err)
				}
				time.Sleep(50 * time.Millisecond)
			}
			c.Reload(ctx) // the history holds the appliance that answered
			old := strings.ToLower(vc.InstanceUUID())
			vc.SetInstanceUUID("5f0a7c1e-0000-4000-8000-00000000a1b2")
			if err := vc.TerminateSessions(ctx); err != nil {
				t.Fatal(err)
			}
			if err := vc.Destroy(ctx, vm); err != nil {
				t.Fatal(err)
			}
			var last error
			for range 20 {
				ok, err := exists()
				if !ok && err == nil {
					t.Fatalf("InstanceExists = false, nil after the re-image: the Node would be deleted, though the appliance that held its VM (instance %s) was never asked", old)
				}
				last = err
				time.Sleep(50 * time.Millisecond)
			}
			// Not only kept by chance: the old appliance is remembered.
			if last == nil || !strings.Contains(last.Error(), old) {
				t.Fatalf("InstanceExists's last error = %v; want one naming the re-imaged-away instance %s", last, old)
			}
		})
	}
}
