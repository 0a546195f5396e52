package cloud_test

import (
	"path/filepath"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	cloudprovider "k8s.io/cloud-provider"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/cloud"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/cloud/nodes"
)

// With the controllers' shared informers (cloudprovider.InformerUser, as
// the cloud-controller-manager hands them over after Initialize, before
// it starts them), the Node owner watches Nodes through them: one list of
// Nodes in all, not one per watcher, and the Nodes held without their
// managedFields. It still does its work: a moved VM's Node is relabelled.
func TestNodeOwnerUsesTheSharedInformers(t *testing.T) {
	node := initializedNode()
	node.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubelet", Operation: metav1.ManagedFieldsOperationUpdate}}
	w := &driftWorld{f: newFakeFleet("vcA", "vcB"), client: stateClient(node), path: filepath.Join(t.TempDir(), "vsphere.conf")}
	for _, b := range w.f {
		b.Inventoried()
	}
	w.writeConfig(t, "")
	opts := w.f.options()
	opts.RecoveryPoll = 10 * time.Millisecond
	c, err := cloud.NewFromFile(w.path, opts)
	if err != nil {
		t.Fatal(err)
	}
	w.c = c
	stop := make(chan struct{})
	factory := informers.NewSharedInformerFactory(w.client, 0)
	// Shutdown waits for the informers, which end when stop closes.
	t.Cleanup(func() { close(stop); factory.Shutdown(); stopCloud(t, c) })
	// As the controller manager: Initialize, SetInformers, the
	// controllers register theirs, then the factory starts.
	c.Start(w.client, stop)
	user, ok := any(c).(cloudprovider.InformerUser)
	if !ok {
		t.Fatal("the provider takes no shared informers (cloudprovider.InformerUser)")
	}
	user.SetInformers(factory)
	lister := factory.Core().V1().Nodes().Lister()
	factory.Start(stop)

	w.f["vcB"].Add(placedVM("dc1", "esx-2", "c-2"), tags("z-1", "r-1"))
	w.waitLabel(t, "node-a", nodes.LabelVCenter, "vcB")
	lists := 0
	for _, a := range w.client.Actions() {
		if a.GetVerb() == "list" && a.GetResource().Resource == "nodes" {
			lists++
		}
	}
	if lists != 1 {
		t.Errorf("Nodes listed %d times, want once (through the shared factory)", lists)
	}
	held, err := lister.Get("node-a")
	if err != nil {
		t.Fatal(err)
	}
	if len(held.ManagedFields) != 0 {
		t.Errorf("the shared informer holds the Node's managedFields %v", held.ManagedFields)
	}
}

// startLeader starts c as the cloud-controller-manager does: Start (its
// Initialize), then SetInformers with a factory over client, started once
// it returns; the factory's informers end when stop closes. Without a
// client (no cluster), Start alone.
func startLeader(c *cloud.Cloud, client kubernetes.Interface, stop <-chan struct{}) {
	c.Start(client, stop)
	if client == nil {
		return
	}
	factory := informers.NewSharedInformerFactory(client, 0)
	c.SetInformers(factory)
	factory.Start(stop)
}
