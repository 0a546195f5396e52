package cloud

import (
	"sync/atomic"

	"k8s.io/component-base/metrics"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/backends"
)

// vcenterStatus is one current backend's status, as the collectors read
// it at scrape time.
type vcenterStatus struct {
	VCenter string
	backends.Status
}

// vcenterCollector reads each current backend at scrape time: a backend
// replaced by a config edit starts its counters again (a counter reset,
// which rate() handles).
type vcenterCollector struct {
	metrics.BaseStableCollector
	budgetWaits, budgetRejections, certificateExpiry *metrics.Desc
	source                                           atomic.Pointer[func() []vcenterStatus]
}

func newVCenterCollector(ns string) *vcenterCollector {
	return &vcenterCollector{
		budgetWaits: metrics.NewDesc(ns+"_vcenter_request_budget_waits_total",
			"Calls sent to the vCenter directly (not answered from its inventory) that waited for their turn in its request budget (requestsPerSecond, requestBurst), since its backend was built.",
			[]string{"vcenter"}, nil, metrics.ALPHA, ""),
		budgetRejections: metrics.NewDesc(ns+"_vcenter_request_budget_rejections_total",
			"Calls refused before being sent because their turn in the vCenter's request budget came after their deadline (an error, never an answer about a VM; not a breaker failure).",
			[]string{"vcenter"}, nil, metrics.ALPHA, ""),
		certificateExpiry: metrics.NewDesc(ns+"_vcenter_certificate_expiry_seconds",
			"When the certificate the vCenter presented at the last TLS handshake expires (its NotAfter), in Unix seconds; alert on it - time() < 30*86400.",
			[]string{"vcenter"}, nil, metrics.ALPHA, ""),
	}
}

func (c *vcenterCollector) DescribeWithStability(ch chan<- *metrics.Desc) {
	ch <- c.budgetWaits
	ch <- c.budgetRejections
	ch <- c.certificateExpiry
}

func (c *vcenterCollector) CollectWithStability(ch chan<- metrics.Metric) {
	src := c.source.Load()
	if src == nil {
		return
	}
	for _, b := range (*src)() {
		if b.Budget != nil {
			ch <- metrics.NewLazyConstMetric(c.budgetWaits, metrics.CounterValue, float64(b.Budget.Waits), b.VCenter)
			ch <- metrics.NewLazyConstMetric(c.budgetRejections, metrics.CounterValue, float64(b.Budget.Rejections), b.VCenter)
		}
		if b.Certificate != nil {
			ch <- metrics.NewLazyConstMetric(c.certificateExpiry, metrics.GaugeValue, float64(b.Certificate.NotAfter.Unix()), b.VCenter)
		}
	}
}

// setStatusSource tells the collectors reading backends' statuses (the
// inventory's, the vCenter's) where to read from.
func (m *Metrics) setStatusSource(f func() []vcenterStatus) {
	m.vcenters.source.Store(&f)
	m.inventory.source.Store(&f)
}

// backendStatuses reads every current backend's status.
func (f *fleet) backendStatuses() []vcenterStatus {
	bs := f.builtBackends()
	out := make([]vcenterStatus, 0, len(bs))
	for name, b := range bs {
		out = append(out, vcenterStatus{VCenter: name, Status: b.Status()})
	}
	return out
}
