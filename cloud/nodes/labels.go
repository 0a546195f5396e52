package nodes

import (
	v1 "k8s.io/api/core/v1"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/discovery"
)

// Labels this provider puts on a Node, so that where its VM lived
// outlasts a restart: a Node whose labels name a vCenter, server or
// datacenter that has left the config is not reported deleted. Values are
// discovery.LabelValue of the vCenter's and datacenter's names, and
// discovery.ServerLabelValue of the vCenter's server: the name is for
// people, the server says which vCenter it was when the name is repointed.
// Set at initialization and added to initialized Nodes that lack them
// (Nodes initialized by CPI).
const (
	LabelVCenter    = "vsphere-federated-ccm.io/vcenter"
	LabelServer     = "vsphere-federated-ccm.io/vcenter-server"
	LabelDatacenter = "vsphere-federated-ccm.io/datacenter"
)

// LocationLabels are the location labels for res.
func LocationLabels(res *discovery.Result) map[string]string {
	out := map[string]string{LabelVCenter: discovery.LabelValue(res.VCenter), LabelServer: discovery.ServerLabelValue(res.Where.Server)}
	if dc := res.VM.Ref.Datacenter; dc != "" {
		out[LabelDatacenter] = discovery.LabelValue(dc)
	}
	return out
}

// NodeKeys are what identifies node's VM, and where its labels claim it is.
func NodeKeys(node *v1.Node) discovery.NodeKeys {
	return discovery.NodeKeys{
		Name: node.Name, ProviderID: node.Spec.ProviderID, SystemUUID: node.Status.NodeInfo.SystemUUID,
		ClaimedVCenter: node.Labels[LabelVCenter], ClaimedServer: node.Labels[LabelServer], ClaimedDatacenter: node.Labels[LabelDatacenter],
	}
}
