package cloud_test

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/cloud/nodes"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/discovery"
)

const tagLabelsSection = "nodes:\n  tagLabels:\n    rack: example.com/rack\n    power feed: example.com/power\n"

func rackTags(zone, rack, power string) map[string]string {
	out := tags(zone, "r-1")
	if rack != "" {
		out["rack"] = rack
	}
	if power != "" {
		out["power feed"] = power
	}
	return out
}

// nodes.tagLabels: at initialization a Node gets a label per category the
// VM has a tag of (encoded as the location labels are), none for one it
// has not; then the Node writer keeps them after the tags, from memory,
// with an Event and a count per rewrite.
func TestTagLabelsFollowTheTags(t *testing.T) {
	w := newDriftWorld(t, tagLabelsSection)
	vcA := w.f["vcA"]
	vcA.Add(placedVM("dc0", "esx-1", "c-1"), rackTags("z-1", "R12", ""))
	md, err := w.c.InstanceMetadata(t.Context(), providerNode("node-a", uuidA))
	if err != nil {
		t.Fatal(err)
	}
	if got := md.AdditionalLabels["example.com/rack"]; got != "R12" {
		t.Fatalf("AdditionalLabels %v; want example.com/rack=R12", md.AdditionalLabels)
	}
	if _, ok := md.AdditionalLabels["example.com/power"]; ok {
		t.Fatalf("AdditionalLabels %v: a label for a category the VM has no tag of", md.AdditionalLabels)
	}

	// Initialized: the pass keeps them.
	node := initializedNode()
	node.Labels["example.com/rack"] = "R12"
	if _, err := w.client.CoreV1().Nodes().Create(t.Context(), node, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	calls := w.calls()
	vcA.Add(placedVM("dc0", "esx-1", "c-1"), rackTags("z-1", "R13", "Feed A/B"))
	w.waitLabel(t, "node-a", "example.com/rack", "R13")
	w.waitLabel(t, "node-a", "example.com/power", discovery.LabelValue("Feed A/B"))
	w.waitEvent(t, nodes.ReasonTagLabelsUpdated, "example.com/rack R12 → R13")
	w.waitValue(t, 1, updatesCount, "label", "tag")
	// The tag detached: the label goes.
	vcA.Add(placedVM("dc0", "esx-1", "c-1"), rackTags("z-1", "", "Feed A/B"))
	w.waitLabel(t, "node-a", "example.com/rack", "")
	if got := w.calls(); got != calls {
		t.Fatalf("%d backend calls by the pass; it reads the inventories only", got-calls)
	}
}

// Without zone and region, tag labels are read all the same.
func TestTagLabelsWithoutZones(t *testing.T) {
	w := newDriftWorldBase(t, "", tagLabelsSection)
	w.f["vcA"].Add(placedVM("dc0", "esx-1", "c-1"), rackTags("", "R7", ""))
	md, err := w.c.InstanceMetadata(t.Context(), providerNode("node-a", uuidA))
	if err != nil {
		t.Fatal(err)
	}
	if md.AdditionalLabels["example.com/rack"] != "R7" || md.Zone != "" {
		t.Fatalf("labels %v zone %q; want example.com/rack=R7 and no zone", md.AdditionalLabels, md.Zone)
	}
}
