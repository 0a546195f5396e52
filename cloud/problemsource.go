package cloud

import (
	"context"
	"sync"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/cloud/problems"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config"
)

var _ problems.Recorder = (*eventLog)(nil)

// Event implements problems.Recorder.
func (l *eventLog) Event(obj runtime.Object, eventType, reason, message string) {
	l.record(obj, eventType, reason, message)
}

// problemInputs are what a pass of the periodic checks judges: the config
// served, each vCenter's datacenters (one list each, in parallel, under
// its request deadline; a vCenter that does not answer is left out), the
// Nodes from the cache.
func (f *fleet) problemInputs(ctx context.Context, w nodeWatch) problems.Inputs {
	cfg := f.config()
	in := problems.Inputs{Config: cfg, Datacenters: map[string][]config.Datacenter{}}
	built := f.builtBackends()
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, vc := range cfg.VCenters {
		b, ok := built[vc.Name]
		if !ok {
			continue
		}
		wg.Go(func() {
			dctx, cancel := context.WithTimeout(ctx, vc.RequestTimeout)
			defer cancel()
			dcs, err := b.Datacenters(dctx)
			if err != nil {
				return
			}
			mu.Lock()
			in.Datacenters[vc.Name] = dcs
			mu.Unlock()
		})
	}
	wg.Wait()
	in.Nodes, _ = w.lister.List(labels.Everything())
	return in
}
