package cloud_test

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/cloud"
)

// --node-labels (CPI's flag) are given at initialization; on an
// initialized Node only the location labels are added, so an operator's
// later edit of a --node-labels label stands.
func TestNodeLabelsAtInitializationOnly(t *testing.T) {
	f := newFakeFleet("vcA")
	f["vcA"].Add(fakeVM("dc0", "vm-1", "node-a", uuidA), nil)
	initialized := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a", Labels: map[string]string{"example.com/pool": "edited"}},
		Spec: v1.NodeSpec{ProviderID: "vsphere://" + uuidA}}
	client := stateClient(initialized)
	c := f.start(t, f.yaml("", "vcA"), client, func(o *cloud.Options) {
		o.NodeLabels = map[string]string{"example.com/pool": "vsphere", "node.example.com/site": ""}
	})
	md, err := c.InstanceMetadata(t.Context(), initialized)
	if err != nil {
		t.Fatal(err)
	}
	if md.AdditionalLabels["example.com/pool"] != "vsphere" || md.AdditionalLabels[cloud.LabelVCenter] != "vcA" {
		t.Fatalf("AdditionalLabels = %v; want the --node-labels and the location labels", md.AdditionalLabels)
	}
	// The nodes owner writes the labels, after the lookup.
	var got *v1.Node
	eventually(t, "the location labels on the initialized Node", func() bool {
		got, err = client.CoreV1().Nodes().Get(t.Context(), "node-a", metav1.GetOptions{})
		return err == nil && got.Labels[cloud.LabelVCenter] == "vcA"
	})
	if got.Labels["example.com/pool"] != "edited" {
		t.Fatalf("initialized Node's labels %v: want the edited label kept", got.Labels)
	}
}
