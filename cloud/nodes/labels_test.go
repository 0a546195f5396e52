package nodes

import (
	"testing"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/backends"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/discovery"
)

func TestLocationLabels(t *testing.T) {
	res := &discovery.Result{VCenter: "vc1", Where: discovery.Identity{Server: "vc.example.com:443"}, VM: backends.VM{Ref: backends.VMRef{Datacenter: "dc1", ID: "vm-1"}}}
	got := LocationLabels(res)
	if len(got) != 3 || got[LabelVCenter] != "vc1" || got[LabelServer] != "vc.example.com" || got[LabelDatacenter] != "dc1" {
		t.Fatalf("locationLabels = %v", got)
	}
	res.VM.Ref.Datacenter = ""
	if got := LocationLabels(res); len(got) != 2 {
		t.Fatalf("without a datacenter: %v", got)
	}
}
