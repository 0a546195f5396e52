package cloud

import (
	"sync/atomic"

	"k8s.io/component-base/metrics"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/discovery"
)

// deletionHeldCollector is the gauge of Nodes each vCenter's deletion
// policy holds back, read from discovery at scrape time: 0 included for
// every configured vCenter and reason, so a freeze's end shows as a drop.
type deletionHeldCollector struct {
	metrics.BaseStableCollector
	desc   *metrics.Desc
	source atomic.Pointer[func() []discovery.HeldNodes]
}

func newDeletionHeldCollector(ns string) *deletionHeldCollector {
	return &deletionHeldCollector{desc: metrics.NewDesc(ns+"_nodes_deletion_held",
		"Nodes whose VM was confirmed absent that the vCenter's deletion policy (nodeDeletion) keeps now, by reason: grace (minAbsence not yet spanned) or frozen.",
		[]string{"vcenter", "reason"}, nil, metrics.ALPHA, "")}
}

func (c *deletionHeldCollector) DescribeWithStability(ch chan<- *metrics.Desc) { ch <- c.desc }

func (c *deletionHeldCollector) CollectWithStability(ch chan<- metrics.Metric) {
	src := c.source.Load()
	if src == nil {
		return
	}
	for _, h := range (*src)() {
		ch <- metrics.NewLazyConstMetric(c.desc, metrics.GaugeValue, float64(h.Grace), h.VCenter, discovery.HeldGrace)
		ch <- metrics.NewLazyConstMetric(c.desc, metrics.GaugeValue, float64(h.Frozen), h.VCenter, discovery.HeldFrozen)
	}
}

// setDeletionHeldSource tells the held-Nodes gauge where to read from.
func (m *Metrics) setDeletionHeldSource(f func() []discovery.HeldNodes) {
	m.deletionHeld.source.Store(&f)
}
