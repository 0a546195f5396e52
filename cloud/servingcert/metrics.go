package servingcert

import "k8s.io/component-base/metrics"

// Metrics count the approver's decisions; built per process, registered
// by the caller.
type Metrics struct {
	decisions *metrics.CounterVec
	pending   *metrics.Counter
}

// NewMetrics builds the approver's metrics.
func NewMetrics() *Metrics {
	return &Metrics{
		decisions: metrics.NewCounterVec(&metrics.CounterOpts{
			Namespace: "cloudprovider", Subsystem: "vsphere", Name: "kubelet_serving_csr_decisions_total",
			Help:           "Kubelet serving certificate requests decided, by decision (approved, denied) and reason (the check that decided).",
			StabilityLevel: metrics.ALPHA,
		}, []string{"decision", "reason"}),
		pending: metrics.NewCounter(&metrics.CounterOpts{
			Namespace: "cloudprovider", Subsystem: "vsphere", Name: "kubelet_serving_csr_lookup_failures_total",
			Help:           "Lookups of a Node's VM for a kubelet serving certificate request that failed (a vCenter did not answer): each leaves the request pending, retried within 30 s.",
			StabilityLevel: metrics.ALPHA,
		}),
	}
}

// Collectors are the metrics to register.
func (m *Metrics) Collectors() []metrics.Registerable {
	return []metrics.Registerable{m.decisions, m.pending}
}
