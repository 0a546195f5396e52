package metadata

import (
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/backends"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config"
)

// The labels below the zone (nodes.placementLabels): the ESXi host's
// name, the compute cluster's name and the resource pool's inventory
// path, as discovery.LabelValue encodes them (a value that is no valid
// label value becomes "sha256-" and 40 hex digits). A VM without one (a
// standalone host has no cluster) has the label removed, never set to "".
const (
	LabelHost         = "vsphere-federated-ccm.io/host"
	LabelCluster      = "vsphere-federated-ccm.io/cluster"
	LabelResourcePool = "vsphere-federated-ccm.io/resource-pool"
)

// PlacementLabels are vm's labels below the zone as asked: each label
// key to its value, "" for one to remove (not asked for, or the VM has no
// value: they are ours).
func PlacementLabels(vm *backends.VM, asked []config.PlacementLabel) map[string]string {
	out := map[string]string{LabelHost: "", LabelCluster: "", LabelResourcePool: ""}
	for _, l := range asked {
		switch l {
		case config.PlacementHost:
			out[LabelHost] = LabelValue(vm.HostName)
		case config.PlacementCluster:
			out[LabelCluster] = LabelValue(vm.Cluster)
		case config.PlacementResourcePool:
			out[LabelResourcePool] = LabelValue(vm.ResourcePoolPath)
		}
	}
	return out
}
