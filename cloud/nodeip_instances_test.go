package cloud_test

import (
	"encoding/base64"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	cloudproviderapi "k8s.io/cloud-provider/api"
	"k8s.io/cloud-provider/node/helpers"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/backends"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/cloud"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/cloud/instances"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/cloud/metadata"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/cloud/nodes"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/discovery"
)

// kubeletWithNodeIP is the Node of a kubelet started with
// --cloud-provider=external --node-ip=nodeIP ("" without the flag): the
// annotation, the uninitialized taint, and the addresses the kubelet sets
// while the Node has none.
func kubeletWithNodeIP(name, uuid, nodeIP string) *v1.Node {
	n := &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       v1.NodeSpec{Taints: uninitializedTaint()},
		Status: v1.NodeStatus{NodeInfo: v1.NodeSystemInfo{SystemUUID: uuid},
			Addresses: []v1.NodeAddress{{Type: v1.NodeHostName, Address: name}}},
	}
	if nodeIP != "" {
		n.Annotations = map[string]string{cloudproviderapi.AnnotationAlphaProvidedIPAddr: nodeIP}
		for _, ip := range strings.Split(nodeIP, ",") {
			n.Status.Addresses = append([]v1.NodeAddress{{Type: v1.NodeInternalIP, Address: ip}}, n.Status.Addresses...)
		}
	}
	return n
}

// nicVM is a VM of the fake fleet with the NICs given.
func nicVM(uuid string, nics ...backends.NIC) backends.VM {
	vm := fakeVM("dc0", "vm-1", "vm-1", uuid)
	vm.NICs = nics
	return vm
}

func deviceNIC(network string, ips ...string) backends.NIC {
	return backends.NIC{Network: network, IPs: ips, DeviceConfigID: 4000}
}

// The contract of the cloud-node controller (k8s.io/cloud-provider
// controllers/node): before it removes the taint, and at each address
// refresh, it passes InstanceMetadata's addresses and the Node's
// provided-node-ip annotation to helpers.GetNodeAddressesFromNodeIP, and
// refuses the Node if that fails. For a kubelet given --node-ip of any IP
// its VM reports, our answer passes, with the node IPs as the Node's
// InternalIPs; without the annotation it is CPI's answer. Before the fix
// the second NIC, the dual-stack pair, the subnet rule and the metadata
// cases failed here: CPI's one InternalIP per family is the first NIC's.
func TestInstanceMetadataMeetsTheNodeIPContract(t *testing.T) {
	meta := "network:\n  version: 2\n  ethernets:\n    id0:\n      addresses: [10.2.0.5/24]\n"
	for _, c := range []struct {
		name, nodeIP, extra, nodes string
		nics                       []backends.NIC
		metadata                   string
	}{
		{name: "first NIC", nodeIP: "10.0.0.5", nics: []backends.NIC{deviceNIC("VM Network", "10.0.0.5"), deviceNIC("Storage", "10.1.0.5")}},
		{name: "second NIC", nodeIP: "10.1.0.5", nics: []backends.NIC{deviceNIC("VM Network", "10.0.0.5"), deviceNIC("Storage", "10.1.0.5")}},
		{name: "dual-stack pair on two NICs", nodeIP: "10.0.0.5,fd00::5", extra: "  ipFamily: [ipv4, ipv6]\n",
			nics: []backends.NIC{deviceNIC("VM Network", "10.0.0.5", "fd00::1"), deviceNIC("v6", "fd00::5")}},
		{name: "over a subnet rule picking another", nodeIP: "10.1.0.5", nodes: "nodes:\n  internalNetworkSubnetCidr: 10.0.0.0/24\n",
			nics: []backends.NIC{deviceNIC("VM Network", "10.0.0.5"), deviceNIC("Storage", "10.1.0.5")}},
		{name: "only in guestinfo.metadata", nodeIP: "10.2.0.5", metadata: meta,
			nics: []backends.NIC{deviceNIC("VM Network", "10.0.0.5")}},
		{name: "no --node-ip", nodes: "nodes:\n  internalNetworkSubnetCidr: 10.1.0.0/24\n",
			nics: []backends.NIC{deviceNIC("VM Network", "10.0.0.5"), deviceNIC("Storage", "10.1.0.5")}},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFakeFleet("vcA")
			vm := nicVM(uuidA, c.nics...)
			if c.metadata != "" {
				vm.GuestInfoMetadata, vm.GuestInfoMetadataEncoding = base64.StdEncoding.EncodeToString([]byte(c.metadata)), "base64"
			}
			f["vcA"].Add(vm, nil)
			cfg := f.yaml(c.extra, "vcA") + c.nodes
			cl := f.start(t, cfg, nil)
			node := kubeletWithNodeIP("vm-1", uuidA, c.nodeIP)
			md, err := cl.InstanceMetadata(t.Context(), node)
			if err != nil {
				t.Fatal(err)
			}
			if c.nodeIP == "" { // CPI's answer
				parsed, err := config.Parse([]byte(cfg))
				if err != nil {
					t.Fatal(err)
				}
				want, err := metadata.SelectAddresses(&vm, parsed.VCenters[0].IPFamily, parsed.Nodes, nil)
				if err != nil || !reflect.DeepEqual(md.NodeAddresses, want) {
					t.Fatalf("addresses %v; CPI's %v, %v", md.NodeAddresses, want, err)
				}
				return
			}
			enforced, err := helpers.GetNodeAddressesFromNodeIP(c.nodeIP, md.NodeAddresses)
			if err != nil {
				t.Fatalf("the cloud-node controller refuses %v for --node-ip=%s: %v", md.NodeAddresses, c.nodeIP, err)
			}
			var internal []string
			for _, a := range enforced {
				if a.Type == v1.NodeInternalIP {
					internal = append(internal, a.Address)
				}
			}
			if strings.Join(internal, ",") != c.nodeIP {
				t.Fatalf("the Node's InternalIPs would be %v (of %v), want %s", internal, enforced, c.nodeIP)
			}
		})
	}
}

// A --node-ip the VM does not report keeps the Node tainted, and says why
// on the Node: one NodeIPNotOnVM Event naming the IP and the VM's IPs,
// its count growing at each pass rather than an Event each; the
// uninitialized-Nodes gauge counts it under that reason.
func TestNodeIPNotOnTheVMIsOneEventNamingTheIPs(t *testing.T) {
	f := newFakeFleet("vcA")
	f["vcA"].Add(nicVM(uuidA, deviceNIC("VM Network", "10.0.0.5"), deviceNIC("Storage", "10.1.0.5")), nil)
	node := kubeletWithNodeIP("vm-1", uuidA, "10.9.9.9")
	client := stateClient(node)
	m, reg := registered()
	c := f.start(t, f.yaml("", "vcA"), client, func(o *cloud.Options) {
		o.Metrics, o.RecoveryPoll = m, 20*time.Millisecond
	})
	const passes = 4
	for range passes {
		_, err := c.InstanceMetadata(t.Context(), node)
		var nip *metadata.NodeIPError
		if !errors.As(err, &nip) || !strings.Contains(err.Error(), "10.9.9.9") || !strings.Contains(err.Error(), "10.0.0.5, 10.1.0.5") {
			t.Fatalf("InstanceMetadata: %v; want a NodeIPError naming 10.9.9.9 and the VM's IPs", err)
		}
	}
	evs := waitNodeEvents(t, client, node.Name, nodes.ReasonNodeIPNotOnVM, passes)
	if len(evs) != 1 || !strings.Contains(evs[0].Message, "10.9.9.9") || !strings.Contains(evs[0].Message, "10.0.0.5, 10.1.0.5") || evs[0].Type != v1.EventTypeWarning {
		t.Fatalf("NodeIPNotOnVM Events: %+v; want one Warning naming 10.9.9.9 and 10.0.0.5, 10.1.0.5", evs)
	}
	eventually(t, "nodes_uninitialized{reason=NodeIPNotOnVM} 1", func() bool {
		v, ok := gauge(t, reg, "cloudprovider_vsphere_nodes_uninitialized", map[string]string{"reason": nodes.ReasonNodeIPNotOnVM})
		return ok && v == 1
	})
}

// An annotation no kubelet writes is an error naming it and its value,
// and an Event, before any vCenter is asked.
func TestInvalidNodeIPAnnotation(t *testing.T) {
	f := newFakeFleet("vcA")
	f["vcA"].Add(nicVM(uuidA, deviceNIC("VM Network", "10.0.0.5")), nil)
	node := kubeletWithNodeIP("vm-1", uuidA, "")
	node.Annotations = map[string]string{cloudproviderapi.AnnotationAlphaProvidedIPAddr: "10.0.0.5,10.0.0.6"}
	client := stateClient(node)
	c := f.start(t, f.yaml("", "vcA"), client)
	calls := f["vcA"].Calls()
	_, err := c.InstanceMetadata(t.Context(), node)
	if !errors.Is(err, metadata.ErrInvalidNodeIP) || !strings.Contains(err.Error(), `alpha.kubernetes.io/provided-node-ip="10.0.0.5,10.0.0.6"`) {
		t.Fatalf("InstanceMetadata: %v; want ErrInvalidNodeIP naming the annotation and its value", err)
	}
	if n := f["vcA"].Calls() - calls; n != 0 {
		t.Errorf("%d vCenter calls for a Node whose annotation is invalid; want none", n)
	}
	if evs := waitNodeEvents(t, client, node.Name, nodes.ReasonInvalidNodeIP, 1); !strings.Contains(evs[0].Message, "10.0.0.5,10.0.0.6") {
		t.Fatalf("InvalidNodeIP Event: %q; want the value named", evs[0].Message)
	}
}

// A deletion held back by the grace (nodeDeletion.minAbsence) is met at
// each pass of the cloud-node-lifecycle controller, every 5 s: N passes
// are one NodeDeletionHeld Event of count N, not N Events whose messages
// differ by the time the VM has been absent (six per destroyed VM under
// the default grace of 30 s, before the fix).
func TestHeldDeletionIsOneEventWithACount(t *testing.T) {
	f := newFakeFleet("vcA")
	node := providerNode("node-gone", uuidA)
	client := stateClient(node)
	cfg := strings.Replace(f.yaml("", "vcA"), "nodeDeletion: {minAbsence: 0s}", "nodeDeletion: {minAbsence: 1h}", 1)
	c := f.start(t, cfg, client)
	// The first answers may come before the record of the vCenters served
	// is read; the grace starts with the first answer of absence.
	eventually(t, "InstanceExists to hold the deletion", func() bool {
		_, err := c.InstanceExists(t.Context(), node)
		return errors.As(err, new(*discovery.DeletionHeldError))
	})
	const passes = 6
	for range passes {
		time.Sleep(5 * time.Millisecond) // the absence lasts longer at each pass
		if _, err := c.InstanceExists(t.Context(), node); !errors.As(err, new(*discovery.DeletionHeldError)) {
			t.Fatalf("InstanceExists: %v; want the deletion held", err)
		}
	}
	evs := waitNodeEvents(t, client, node.Name, instances.ReasonNodeDeletionHeld, passes+1)
	if len(evs) != 1 {
		var msgs []string
		for _, e := range evs {
			msgs = append(msgs, e.Message)
		}
		t.Fatalf("%d NodeDeletionHeld Events, want one with a count: %q", len(evs), msgs)
	}
	if !strings.Contains(evs[0].Message, "nodeDeletion.minAbsence") || !strings.Contains(evs[0].Message, "1h0m0s") {
		t.Errorf("NodeDeletionHeld message %q; want the grace named", evs[0].Message)
	}
}

// waitNodeEvents waits until the Events of reason on the Node name add up
// to at least count (their counts summed), and returns them.
func waitNodeEvents(t *testing.T, client kubernetes.Interface, name, reason string, count int32) []v1.Event {
	t.Helper()
	var got []v1.Event
	eventually(t, reason+" Events on "+name, func() bool {
		evs, err := client.CoreV1().Events("").List(t.Context(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		got = got[:0]
		var n int32
		for _, e := range evs.Items {
			if e.Reason == reason && e.InvolvedObject.Name == name {
				got = append(got, e)
				n += max(e.Count, 1)
			}
		}
		return n >= count
	})
	return got
}
