package cloud_test

import (
	"context"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/component-base/metrics"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/backends"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/cloud"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/cloud/instances"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config/credentials"
)

// A frozen vCenter keeps the Node of a VM confirmed absent: InstanceExists
// is an error naming the freeze, recorded as a NodeDeletionHeld Event; the
// vCenter's status and the held-Nodes gauge show it. An edit that lifts
// the freeze applies without a restart, and without a new backend: the
// Node is reported gone at the next ask.
func TestFrozenVCenterHoldsTheNodeUntilAnEditLiftsIt(t *testing.T) {
	f := newFakeFleet("vcA", "vcB")
	node := providerNode("node-gone", uuidA)
	client := stateClient(node)
	path := filepath.Join(t.TempDir(), "vsphere.conf")
	frozen := strings.Replace(f.yaml("", "vcA", "vcB"), "    server: vcB.example.com\n", "    server: vcB.example.com\n    nodeDeletion: frozen\n", 1)
	writeAtomically(t, path, frozen)

	var built atomic.Int32
	opts := f.options()
	newBackend := opts.NewBackend
	opts.NewBackend = func(vc config.VCenter, src credentials.Source) backends.Backend {
		built.Add(1)
		return newBackend(vc, src)
	}
	m := cloud.NewMetrics(cloud.BuildInfo{})
	reg := metrics.NewKubeRegistry()
	reg.MustRegister(m.Collectors()...)
	reg.CustomMustRegister(m.CustomCollectors()...)
	opts.Metrics = m
	c, err := cloud.NewFromFile(path, opts)
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	startLeader(c, client, stop)
	t.Cleanup(func() {
		close(stop)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		c.Stop(ctx)
	})

	// Once the record of the vCenters served is read (until then every
	// absence is an error of its own).
	want := "deletion is frozen for vcenter vcB (vcenter.vcB.nodeDeletion: frozen)"
	eventually(t, "InstanceExists to name the freeze", func() bool {
		return strings.Contains(requireKept(t, c, node, "vcB frozen").Error(), want)
	})
	eventually(t, "a NodeDeletionHeld Event naming the freeze", func() bool {
		evs, err := client.CoreV1().Events("").List(t.Context(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range evs.Items {
			if e.Reason == instances.ReasonNodeDeletionHeld && e.Type == v1.EventTypeWarning && e.InvolvedObject.Name == node.Name &&
				strings.Contains(e.Message, "vcenter.vcB.nodeDeletion: frozen") {
				return true
			}
		}
		return false
	})
	status := statusOf(t, c, "vcB")
	if want := (cloud.NodeDeletionStatus{MinAbsence: "0s", Frozen: true, FrozenBy: "vcenter.vcB.nodeDeletion", HeldNodes: 1}); status.NodeDeletion != want {
		t.Errorf("vcB's nodeDeletion status = %+v, want %+v", status.NodeDeletion, want)
	}
	if st := statusOf(t, c, "vcA"); st.NodeDeletion.HeldNodes != 0 || st.NodeDeletion.Frozen {
		t.Errorf("vcA's nodeDeletion status = %+v, want neither frozen nor holding", st.NodeDeletion)
	}
	if v := heldGauge(t, reg, "vcB", "frozen"); v != 1 {
		t.Errorf("nodes_deletion_held{vcB, frozen} = %v, want 1", v)
	}
	if v := heldGauge(t, reg, "vcA", "frozen"); v != 0 {
		t.Errorf("nodes_deletion_held{vcA, frozen} = %v, want 0", v)
	}

	before := built.Load()
	writeAtomically(t, path, f.yaml("", "vcA", "vcB"))
	if !c.Reload(t.Context()) {
		t.Fatal("the edit lifting the freeze was not applied")
	}
	if v := heldGauge(t, reg, "vcB", "frozen"); v != 0 {
		t.Errorf("after the edit, nodes_deletion_held{vcB, frozen} = %v, want 0", v)
	}
	if ok, err := c.InstanceExists(t.Context(), node); ok || err != nil {
		t.Fatalf("freeze lifted: InstanceExists = %v, %v; want false, nil", ok, err)
	}
	if n := built.Load() - before; n != 0 {
		t.Errorf("the edit of nodeDeletion built %d backends, want none (sessions and inventories stay)", n)
	}
}

func statusOf(t *testing.T, c *cloud.Cloud, name string) cloud.VCenterStatus {
	t.Helper()
	for _, st := range c.VCenterStatuses() {
		if st.Name == name {
			return st
		}
	}
	t.Fatalf("no status for vcenter %s", name)
	return cloud.VCenterStatus{}
}

// heldGauge is cloudprovider_vsphere_nodes_deletion_held{vcenter, reason}.
func heldGauge(t *testing.T, reg metrics.KubeRegistry, vcenter, reason string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "cloudprovider_vsphere_nodes_deletion_held" {
			continue
		}
		for _, mm := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range mm.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["vcenter"] == vcenter && labels["reason"] == reason {
				return mm.GetGauge().GetValue()
			}
		}
	}
	t.Fatalf("no nodes_deletion_held series for vcenter %s reason %s", vcenter, reason)
	return 0
}
