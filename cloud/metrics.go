package cloud

import (
	"time"

	"github.com/sony/gobreaker/v2"
	"k8s.io/component-base/metrics"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/cloud/instances"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/cloud/nodes"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/cloud/problems"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/discovery"
)

var _ discovery.Observer = (*Metrics)(nil)

// Metrics are the provider's Prometheus metrics. They are built per
// process and registered by the caller (cmd registers them in
// component-base's legacyregistry, which the CCM's /metrics serves).
type Metrics struct {
	requestDuration *metrics.HistogramVec
	breakerState    *metrics.GaugeVec
	requestErrors   *metrics.CounterVec
	discoveries     *metrics.CounterVec
	cache           *metrics.CounterVec
	configReloads   *metrics.CounterVec
	credentials     *metrics.CounterVec
	scraped         *scrapedMetrics // metrics_scraped.go
	nodes           *nodes.Metrics
	problems        *problems.Metrics
}

// BuildInfo names the running binary: its version, the commit it was
// built from and the Go that built it.
type BuildInfo struct {
	Version, Commit, GoVersion string
}

// UserAgent is what vCenter shows for this process's sessions.
func (b BuildInfo) UserAgent() string {
	return "vsphere-federated-ccm/" + b.Version
}

// metricsNamespace prefixes every metric of this package's.
const metricsNamespace = "cloudprovider_vsphere"

// counterVec builds an ALPHA counter vector named metricsNamespace_name.
func counterVec(name, help string, labels ...string) *metrics.CounterVec {
	opts := metrics.CounterOpts{Namespace: metricsNamespace, Name: name, Help: help, StabilityLevel: metrics.ALPHA}
	return metrics.NewCounterVec(&opts, labels)
}

// NewMetrics builds the metrics, unregistered; the build-info gauge
// carries build's labels.
func NewMetrics(build BuildInfo) *Metrics {
	nm := nodes.NewMetrics()
	return &Metrics{
		requestDuration: metrics.NewHistogramVec(&metrics.HistogramOpts{
			Namespace: metricsNamespace, Name: "api_request_duration_seconds",
			Help:           "Duration of vCenter calls, by vCenter and operation (find, get, tags).",
			Buckets:        []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
			StabilityLevel: metrics.ALPHA,
		}, []string{"vcenter", "operation"}),
		requestErrors: counterVec("api_request_errors_total",
			"Failed vCenter calls, by vCenter, operation and reason (vcenter_down, connecting, deadline, breaker_open, auth, connection, other).",
			"vcenter", "operation", "reason"),
		breakerState: metrics.NewGaugeVec(&metrics.GaugeOpts{Namespace: metricsNamespace, Name: "breaker_state",
			Help: "Circuit breaker state per vCenter: 0 closed, 1 half-open, 2 open.", StabilityLevel: metrics.ALPHA},
			[]string{"vcenter"}),
		discoveries: counterVec("discovery_total",
			"VM lookups by result: found, not_found, duplicate, error.", "result"),
		cache: counterVec("discovery_cache_total",
			"Location cache lookups by result: hit (re-read and confirmed) or miss (searched every vCenter).", "result"),
		configReloads: counterVec("config_reload_total",
			"Configuration reloads by result: success, error (the last good configuration keeps serving).", "result"),
		credentials: counterVec("credential_rotation_total",
			"Credential changes applied per vCenter, by result: rotated, error (the current session keeps serving).",
			"vcenter", "result"),
		scraped:  newScrapedMetrics(build, nm),
		nodes:    nm,
		problems: problems.NewMetrics(),
	}
}

// Collectors lists the metrics for registration.
func (m *Metrics) Collectors() []metrics.Registerable {
	out := []metrics.Registerable{m.requestDuration, m.requestErrors, m.breakerState, m.discoveries, m.cache,
		m.configReloads, m.credentials}
	out = append(out, m.nodes.Collectors()...)
	return append(out, m.problems.Collectors()...)
}

// CustomCollectors lists the metrics computed at scrape time, for
// registration with CustomMustRegister.
func (m *Metrics) CustomCollectors() []metrics.StableCollector {
	return []metrics.StableCollector{m.scraped}
}

// Call implements discovery.Observer.
func (m *Metrics) Call(vcenter, operation string, d time.Duration, err error) {
	m.requestDuration.WithLabelValues(vcenter, operation).Observe(d.Seconds())
	if err != nil {
		m.requestErrors.WithLabelValues(vcenter, operation, instances.ErrorReason(err)).Inc()
	}
}

// BreakerState implements discovery.Observer.
func (m *Metrics) BreakerState(vcenter string, s gobreaker.State) {
	v := map[gobreaker.State]float64{gobreaker.StateClosed: 0, gobreaker.StateHalfOpen: 1, gobreaker.StateOpen: 2}[s]
	m.breakerState.WithLabelValues(vcenter).Set(v)
}

// Lookup implements discovery.Observer.
func (m *Metrics) Lookup(result string) { m.discoveries.WithLabelValues(result).Inc() }

// Cache implements discovery.Observer.
func (m *Metrics) Cache(hit bool) {
	m.cache.WithLabelValues(map[bool]string{true: "hit", false: "miss"}[hit]).Inc()
}
