package cloud

import (
	"sync/atomic"
	"time"

	"k8s.io/component-base/metrics"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/backends"
)

// vcenterBackend is what the vCenter collector reads of one backend: its
// request budget and the certificate its vCenter presented, when it has
// them.
type vcenterBackend struct {
	VCenter     string
	Budget      backends.BudgetStatus
	HasBudget   bool
	Certificate backends.Certificate
	HasCert     bool
}

// vcenterCollector reads each current backend at scrape time: a backend
// replaced by a config edit starts its counters again (a counter reset,
// which rate() handles).
type vcenterCollector struct {
	metrics.BaseStableCollector
	budgetWaits, budgetRejections, certificateExpiry *metrics.Desc
	source                                           atomic.Pointer[func() []vcenterBackend]
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
		if b.HasBudget {
			ch <- metrics.NewLazyConstMetric(c.budgetWaits, metrics.CounterValue, float64(b.Budget.Waits), b.VCenter)
			ch <- metrics.NewLazyConstMetric(c.budgetRejections, metrics.CounterValue, float64(b.Budget.Rejections), b.VCenter)
		}
		if b.HasCert {
			ch <- metrics.NewLazyConstMetric(c.certificateExpiry, metrics.GaugeValue, float64(b.Certificate.NotAfter.Unix()), b.VCenter)
		}
	}
}

// setVCenterSource tells the vCenter collector where to read from.
func (m *Metrics) setVCenterSource(f func() []vcenterBackend) { m.vcenters.source.Store(&f) }

// vcenterBackends reads every current backend's budget and certificate.
func (f *fleet) vcenterBackends() []vcenterBackend {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]vcenterBackend, 0, len(f.backends))
	for name, b := range f.backends {
		out = append(out, readVCenterBackend(name, b.Backend))
	}
	return out
}

func readVCenterBackend(name string, b backends.Backend) vcenterBackend {
	v := vcenterBackend{VCenter: name}
	if r, ok := b.(backends.RequestBudget); ok {
		v.Budget, v.HasBudget = r.Budget(), true
	}
	if r, ok := b.(backends.CertificateReporter); ok {
		v.Certificate, v.HasCert = r.Certificate()
	}
	return v
}

// BudgetStatus is a vCenter's request budget: the pace of the calls sent
// to it directly, and how many waited or were refused.
type BudgetStatus struct {
	RequestsPerSecond float64 `json:"requestsPerSecond"`
	RequestBurst      int     `json:"requestBurst"`
	Waits             uint64  `json:"waits"`
	Rejections        uint64  `json:"rejections"`
}

// CertificateStatus is the certificate a vCenter presented at the last
// TLS handshake (all of it public).
type CertificateStatus struct {
	NotAfter         time.Time `json:"notAfter"`
	ExpiresInSeconds float64   `json:"expiresInSeconds"` // negative once expired
	Subject          string    `json:"subject"`
	Issuer           string    `json:"issuer"`
	SHA256Thumbprint string    `json:"sha256Thumbprint"`
}

// budgetAndCertificate fills st's budget and certificate from b.
func budgetAndCertificate(st *VCenterStatus, b backends.Backend, now time.Time) {
	v := readVCenterBackend(st.Name, b)
	if v.HasBudget {
		st.Budget = &BudgetStatus{RequestsPerSecond: v.Budget.PerSecond, RequestBurst: v.Budget.Burst, Waits: v.Budget.Waits, Rejections: v.Budget.Rejections}
	}
	if v.HasCert {
		c := v.Certificate
		st.Certificate = &CertificateStatus{NotAfter: c.NotAfter.UTC(), ExpiresInSeconds: c.NotAfter.Sub(now).Round(time.Second).Seconds(),
			Subject: c.Subject, Issuer: c.Issuer, SHA256Thumbprint: c.SHA256}
	}
}
