package cloud

import (
	"context"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/klog/v2"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/backends"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/cloud/nodes"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/cloud/problems"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/discovery"
)

// problemInputs are what a pass of the periodic checks judges: the config
// served, each vCenter's datacenters and what its login lacks of the
// privileges the CCM needs (in parallel, each under its request
// deadline; a vCenter that does not answer, or has no session, is left
// out: the privileges are read with the session the backend has, never
// a login of their own), the Nodes from the cache, and the VMs of those
// this CCM serves from the inventories' memory (as the nodes' pass
// follows them: no request per Node).
func (f *fleet) problemInputs(ctx context.Context, w nodes.Watch, unmanaged func(*v1.Node) bool) problems.Inputs {
	served := f.served.Load()
	cfg := served.cfg
	in := problems.Inputs{Config: cfg, Datacenters: map[string][]config.Datacenter{},
		Privileges: map[string]backends.PrivilegeReport{}, VMs: map[string]*problems.NodeVM{}}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, vc := range cfg.VCenters {
		b, ok := served.backends[vc.Name]
		if !ok {
			continue
		}
		wg.Go(func() {
			dctx, cancel := context.WithTimeout(ctx, vc.RequestTimeout)
			defer cancel()
			dcs, dcErr := b.Datacenters(dctx)
			pctx, cancel := context.WithTimeout(ctx, vc.RequestTimeout)
			defer cancel()
			r, err := b.MissingPrivileges(pctx)
			if err != nil {
				klog.FromContext(ctx).V(4).Info("Privileges not read: unknown this pass", "vcenter", vc.Name, "err", err)
			}
			mu.Lock()
			defer mu.Unlock()
			if dcErr == nil {
				in.Datacenters[vc.Name] = dcs
			}
			if err == nil {
				in.Privileges[vc.Name] = r
			}
		})
	}
	wg.Wait()
	in.Nodes, _ = w.Lister.List(labels.Everything())
	for _, node := range in.Nodes {
		if nodes.Uninitialized(node) || unmanaged(node) {
			continue
		}
		uuid, err := discovery.ParseProviderID(node.Spec.ProviderID)
		if err != nil {
			continue
		}
		placed, ok := f.discovery.Placed(uuid, nil)
		if !ok {
			in.VMs[node.Name] = nil // not placed from memory: unknown
			continue
		}
		in.VMs[node.Name] = &problems.NodeVM{VCenter: placed.VCenter, Name: placed.VM.Name, ID: placed.VM.Ref.ID, HardwareVersion: placed.VM.HardwareVersion}
	}
	return in
}
