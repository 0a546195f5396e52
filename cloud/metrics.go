package cloud

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/sony/gobreaker/v2"
	"k8s.io/component-base/metrics"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/backends"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/cloud/problems"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/discovery"
)

var _ discovery.Observer = (*Metrics)(nil)

// Metrics are the provider's Prometheus metrics. They are built per
// process and registered by the caller (cmd registers them in
// component-base's legacyregistry, which the CCM's /metrics serves).
type Metrics struct {
	requestDuration *metrics.HistogramVec
	requestErrors   *metrics.CounterVec
	breakerState    *metrics.GaugeVec
	discoveries     *metrics.CounterVec
	cache           *metrics.CounterVec
	configReloads   *metrics.CounterVec
	credentials     *metrics.CounterVec
	buildInfo       *buildInfoCollector
	inventory       *inventoryCollector
	health          *healthCollector  // metrics_health.go
	vcenters        *vcenterCollector // metrics_vcenter.go
	deletionHeld    *deletionHeldCollector
	nodes           *nodeMetrics
	problems        *problems.Metrics
}

// buildInfoCollector is the build-info gauge, a constant read at scrape
// time (so it needs no registration order).
type buildInfoCollector struct {
	metrics.BaseStableCollector
	desc  *metrics.Desc
	build BuildInfo
}

func (c *buildInfoCollector) DescribeWithStability(ch chan<- *metrics.Desc) { ch <- c.desc }

func (c *buildInfoCollector) CollectWithStability(ch chan<- metrics.Metric) {
	ch <- metrics.NewLazyConstMetric(c.desc, metrics.GaugeValue, 1, c.build.Version, c.build.Commit, c.build.GoVersion)
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

// inventoryCollector reads each vCenter's inventory at scrape time.
type inventoryCollector struct {
	metrics.BaseStableCollector
	synced, vms, updates, up *metrics.Desc
	source                   atomic.Pointer[func() []vcenterStatus]
	health                   atomic.Pointer[func() []discovery.VCenterHealth]
}

func (c *inventoryCollector) DescribeWithStability(ch chan<- *metrics.Desc) {
	ch <- c.synced
	ch <- c.vms
	ch <- c.updates
	ch <- c.up
}

func (c *inventoryCollector) CollectWithStability(ch chan<- metrics.Metric) {
	if health := c.health.Load(); health != nil {
		for _, h := range (*health)() {
			v := 0.0
			if h.Reachability.State == backends.ConnUp {
				v = 1
			}
			ch <- metrics.NewLazyConstMetric(c.up, metrics.GaugeValue, v, h.Name)
		}
	}
	src := c.source.Load()
	if src == nil {
		return
	}
	for _, s := range (*src)() {
		inv := s.Inventory
		if inv == nil {
			continue
		}
		v := 0.0
		if inv.InService {
			v = 1
		}
		ch <- metrics.NewLazyConstMetric(c.synced, metrics.GaugeValue, v, s.VCenter)
		ch <- metrics.NewLazyConstMetric(c.vms, metrics.GaugeValue, float64(inv.VMs), s.VCenter)
		ch <- metrics.NewLazyConstMetric(c.updates, metrics.CounterValue, float64(inv.Updates), s.VCenter)
	}
}

// NewMetrics builds the metrics, unregistered; the build-info gauge
// carries build's labels.
func NewMetrics(build BuildInfo) *Metrics {
	const ns = "cloudprovider_vsphere"
	m := &Metrics{
		health: newHealthCollector(ns),
		buildInfo: &buildInfoCollector{build: build, desc: metrics.NewDesc(ns+"_build_info",
			"1, labelled with the running binary's version, commit and Go version.",
			[]string{"version", "commit", "go_version"}, nil, metrics.ALPHA, "")},
		requestDuration: metrics.NewHistogramVec(&metrics.HistogramOpts{
			Namespace: ns, Name: "api_request_duration_seconds",
			Help:           "Duration of vCenter calls, by vCenter and operation (find, get, tags).",
			Buckets:        []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
			StabilityLevel: metrics.ALPHA,
		}, []string{"vcenter", "operation"}),
		requestErrors: metrics.NewCounterVec(&metrics.CounterOpts{
			Namespace: ns, Name: "api_request_errors_total",
			Help:           "Failed vCenter calls, by vCenter, operation and reason (vcenter_down, connecting, deadline, breaker_open, auth, connection, other).",
			StabilityLevel: metrics.ALPHA,
		}, []string{"vcenter", "operation", "reason"}),
		breakerState: metrics.NewGaugeVec(&metrics.GaugeOpts{
			Namespace: ns, Name: "breaker_state",
			Help:           "Circuit breaker state per vCenter: 0 closed, 1 half-open, 2 open.",
			StabilityLevel: metrics.ALPHA,
		}, []string{"vcenter"}),
		discoveries: metrics.NewCounterVec(&metrics.CounterOpts{
			Namespace: ns, Name: "discovery_total",
			Help:           "VM lookups by result: found, not_found, duplicate, error.",
			StabilityLevel: metrics.ALPHA,
		}, []string{"result"}),
		cache: metrics.NewCounterVec(&metrics.CounterOpts{
			Namespace: ns, Name: "discovery_cache_total",
			Help:           "Location cache lookups by result: hit (re-read and confirmed) or miss (searched every vCenter).",
			StabilityLevel: metrics.ALPHA,
		}, []string{"result"}),
		configReloads: metrics.NewCounterVec(&metrics.CounterOpts{
			Namespace: ns, Name: "config_reload_total",
			Help:           "Configuration reloads by result: success, error (the last good configuration keeps serving).",
			StabilityLevel: metrics.ALPHA,
		}, []string{"result"}),
		inventory: &inventoryCollector{
			synced: metrics.NewDesc(ns+"_inventory_synced",
				"1 while the vCenter's watch-fed inventory answers lookups (loaded, and its vCenter heard from within heartbeat + requestTimeout); 0 while lookups go to vCenter directly.",
				[]string{"vcenter"}, nil, metrics.ALPHA, ""),
			vms: metrics.NewDesc(ns+"_inventory_vms",
				"VMs held in the vCenter's inventory while it is in sync.",
				[]string{"vcenter"}, nil, metrics.ALPHA, ""),
			up: metrics.NewDesc(ns+"_vcenter_up",
				"1 while the vCenter's last connection-level event (connect, TLS, login, keep-alive, the inventory watch's poll) succeeded; 0 while it is down or not yet connected (lookups then answer at once for it).",
				[]string{"vcenter"}, nil, metrics.ALPHA, ""),
			updates: metrics.NewDesc(ns+"_inventory_updates_total",
				"Object updates the vCenter's inventory watch has applied, initial loads included, since this backend started.",
				[]string{"vcenter"}, nil, metrics.ALPHA, ""),
		},
		credentials: metrics.NewCounterVec(&metrics.CounterOpts{
			Namespace: ns, Name: "credential_rotation_total",
			Help:           "Credential changes applied per vCenter, by result: rotated, error (the current session keeps serving).",
			StabilityLevel: metrics.ALPHA,
		}, []string{"vcenter", "result"}),
		deletionHeld: newDeletionHeldCollector(ns),
		nodes:        newNodeMetrics(ns),
		problems:     problems.NewMetrics(),
	}
	m.vcenters = newVCenterCollector(ns)
	return m
}

// Collectors lists the metrics for registration.
func (m *Metrics) Collectors() []metrics.Registerable {
	out := append([]metrics.Registerable{m.requestDuration, m.requestErrors, m.breakerState, m.discoveries, m.cache, m.configReloads, m.credentials}, m.nodes.collectors()...)
	return append(out, m.problems.Collectors()...)
}

// CustomCollectors lists the metrics computed at scrape time, for
// registration with CustomMustRegister.
func (m *Metrics) CustomCollectors() []metrics.StableCollector {
	return []metrics.StableCollector{m.inventory, m.buildInfo, m.health, m.vcenters, m.deletionHeld}
}

// setHealthSource tells the vcenter_up metric where to read from.
func (m *Metrics) setHealthSource(f func() []discovery.VCenterHealth) { m.inventory.health.Store(&f) }

// Call implements discovery.Observer.
func (m *Metrics) Call(vcenter, operation string, d time.Duration, err error) {
	m.requestDuration.WithLabelValues(vcenter, operation).Observe(d.Seconds())
	if err != nil {
		m.requestErrors.WithLabelValues(vcenter, operation, reason(err)).Inc()
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
	if hit {
		m.cache.WithLabelValues("hit").Inc()
	} else {
		m.cache.WithLabelValues("miss").Inc()
	}
}

// reason buckets an error for the errors metric; it never carries the
// error text, so nothing secret can reach a label.
func reason(err error) string {
	switch {
	case errors.Is(err, discovery.ErrVCenterDown):
		return "vcenter_down"
	case errors.Is(err, discovery.ErrVCenterConnecting):
		return "connecting"
	case errors.Is(err, discovery.ErrBreakerOpen):
		return "breaker_open"
	case errors.Is(err, context.DeadlineExceeded):
		return "deadline"
	case errors.Is(err, backends.ErrAuth):
		return "auth"
	case errors.Is(err, backends.ErrUnreachable):
		return "connection"
	}
	return "other"
}
