package cloud

import (
	"sync"
	"sync/atomic"

	"k8s.io/component-base/metrics"
)

// healthCollector is the periodic checks' gauges: the Nodes counts the
// nodes owner's tick computed last (absent until its first), and the
// duplicate BIOS UUIDs read from discovery at scrape time.
type healthCollector struct {
	metrics.BaseStableCollector
	unmanaged, uninitialized, duplicates *metrics.Desc
	duplicateSource                      atomic.Pointer[func() []string]

	mu      sync.Mutex
	counted bool
	nodes   int            // unmanaged
	reasons map[string]int // uninitialized, by reason
}

func newHealthCollector(ns string) *healthCollector {
	return &healthCollector{
		unmanaged: metrics.NewDesc(ns+"_nodes_unmanaged",
			"Nodes this CCM leaves alone: label node-restriction.kubernetes.io/vsphere-federated-ccm-unmanaged=true or --unmanaged-node-selector.",
			nil, nil, metrics.ALPHA, ""),
		uninitialized: metrics.NewDesc(ns+"_nodes_uninitialized",
			"Nodes of this CCM still carrying node.cloudprovider.kubernetes.io/uninitialized, by reason: why their last InstanceMetadata failed (VMLookupFailed, VMNotFound, DuplicateVMUUID, ZoneTagMissing, NoSuitableNodeAddress, NodeIPNotOnVM, InvalidNodeIP, NodeIdentityConflict, ZoneHostGroupMissing, ZoneHostGroupAmbiguous), or Pending.",
			[]string{"reason"}, nil, metrics.ALPHA, ""),
		duplicates: metrics.NewDesc(ns+"_duplicate_uuids",
			"BIOS UUIDs held by VMs in more than one vCenter, as the inventories show them; their Nodes' lookups fail until one is changed.",
			nil, nil, metrics.ALPHA, ""),
	}
}

func (c *healthCollector) DescribeWithStability(ch chan<- *metrics.Desc) {
	ch <- c.unmanaged
	ch <- c.uninitialized
	ch <- c.duplicates
}

func (c *healthCollector) CollectWithStability(ch chan<- metrics.Metric) {
	if src := c.duplicateSource.Load(); src != nil {
		ch <- metrics.NewLazyConstMetric(c.duplicates, metrics.GaugeValue, float64(len((*src)())))
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.counted {
		return
	}
	ch <- metrics.NewLazyConstMetric(c.unmanaged, metrics.GaugeValue, float64(c.nodes))
	for r, n := range c.reasons {
		ch <- metrics.NewLazyConstMetric(c.uninitialized, metrics.GaugeValue, float64(n), r)
	}
}

// setNodes stores the tick's Node counts.
func (c *healthCollector) setNodes(unmanaged int, uninitialized map[string]int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.counted, c.nodes, c.reasons = true, unmanaged, uninitialized
}

// setDuplicateSource tells the duplicate_uuids metric where to read from.
func (c *healthCollector) setDuplicateSource(f func() []string) { c.duplicateSource.Store(&f) }
