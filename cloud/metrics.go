package cloud

import (
	"context"
	"errors"
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
	breakerState    *metrics.GaugeVec
	requestErrors   *metrics.CounterVec
	discoveries     *metrics.CounterVec
	cache           *metrics.CounterVec
	configReloads   *metrics.CounterVec
	credentials     *metrics.CounterVec
	scraped         *scrapedMetrics // metrics_scraped.go
	health          *nodeHealth     // the periodic checks' counts, which scraped reads
	nodes           *nodeMetrics
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

// counterVec and gaugeVec build an ALPHA vector named metricsNamespace_name.
func counterVec(name, help string, labels ...string) *metrics.CounterVec {
	opts := metrics.CounterOpts{Namespace: metricsNamespace, Name: name, Help: help, StabilityLevel: metrics.ALPHA}
	return metrics.NewCounterVec(&opts, labels)
}

func gaugeVec(name, help string, labels ...string) *metrics.GaugeVec {
	opts := metrics.GaugeOpts{Namespace: metricsNamespace, Name: name, Help: help, StabilityLevel: metrics.ALPHA}
	return metrics.NewGaugeVec(&opts, labels)
}

// NewMetrics builds the metrics, unregistered; the build-info gauge
// carries build's labels.
func NewMetrics(build BuildInfo) *Metrics {
	health := &nodeHealth{}
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
		breakerState: gaugeVec("breaker_state",
			"Circuit breaker state per vCenter: 0 closed, 1 half-open, 2 open.", "vcenter"),
		discoveries: counterVec("discovery_total",
			"VM lookups by result: found, not_found, duplicate, error.", "result"),
		cache: counterVec("discovery_cache_total",
			"Location cache lookups by result: hit (re-read and confirmed) or miss (searched every vCenter).", "result"),
		configReloads: counterVec("config_reload_total",
			"Configuration reloads by result: success, error (the last good configuration keeps serving).", "result"),
		credentials: counterVec("credential_rotation_total",
			"Credential changes applied per vCenter, by result: rotated, error (the current session keeps serving).",
			"vcenter", "result"),
		scraped:  newScrapedMetrics(build, health),
		health:   health,
		nodes:    newNodeMetrics(),
		problems: problems.NewMetrics(),
	}
}

// Collectors lists the metrics for registration.
func (m *Metrics) Collectors() []metrics.Registerable {
	n := m.nodes
	out := []metrics.Registerable{m.requestDuration, m.requestErrors, m.breakerState, m.discoveries, m.cache,
		m.configReloads, m.credentials, n.drift, n.moves, n.labelUpdates, n.diskUUID, n.tagMissing, n.hostGroupZone,
		n.identityConflicts}
	return append(out, m.problems.Collectors()...)
}

// CustomCollectors lists the metrics computed at scrape time, for
// registration with CustomMustRegister.
func (m *Metrics) CustomCollectors() []metrics.StableCollector {
	return []metrics.StableCollector{m.scraped}
}

// nodeMetrics are what the nodes owner's pass sees of the Nodes and their
// VMs (drift.go): all from the inventories, no vCenter request.
type nodeMetrics struct {
	drift        *metrics.GaugeVec
	moves        *metrics.CounterVec
	labelUpdates *metrics.CounterVec
	diskUUID     *metrics.Gauge
	tagMissing   *metrics.GaugeVec
	// hostGroupZone counts the Nodes whose VM's host groups give no zone
	// (labels.zoneHostGroups), by Event reason.
	hostGroupZone *metrics.GaugeVec
	// identityConflicts counts the claims on a VM another Node holds
	// (claims.go), once each.
	identityConflicts *metrics.CounterVec
}

func newNodeMetrics() *nodeMetrics {
	return &nodeMetrics{
		drift: gaugeVec("nodes_topology_drift",
			"Initialized Nodes whose zone or region label differs from their VM's tag now, by kind (zone, region); 0 again once they match (the VM back, or the labels rewritten: nodes.reconcileTopology).",
			"kind"),
		moves: counterVec("nodes_moves_total",
			"Moves of Nodes' VMs to another vCenter or datacenter seen in the inventories, by kind (vcenter, datacenter); the location labels follow at once.",
			"kind"),
		labelUpdates: counterVec("node_label_updates_total",
			"Node labels rewritten to follow their VMs, by label (location, zone, region, host, cluster, resource-pool).", "label"),
		diskUUID: metrics.NewGauge(&metrics.GaugeOpts{
			Namespace: metricsNamespace, Name: "nodes_disk_uuid_disabled",
			Help:           "Initialized Nodes whose VM has no disk.EnableUUID=TRUE (vSphere CSI needs it).",
			StabilityLevel: metrics.ALPHA,
		}),
		tagMissing: gaugeVec("nodes_zone_tag_missing",
			"Initialized Nodes whose VM has no tag of the configured zone or region category on its ancestries, by category (zone, region).",
			"category"),
		hostGroupZone: gaugeVec("nodes_zone_host_group_unresolved",
			"Initialized Nodes whose VM's host is in no DRS host group that labels.zoneHostGroups maps (ZoneHostGroupMissing) or in groups of different zones (ZoneHostGroupAmbiguous), by reason.",
			"reason"),
		identityConflicts: counterVec("node_identity_conflicts_total",
			"Nodes claiming (by providerID, system UUID or name) the VM another Node holds, once per pair of Nodes, by outcome: refused (the claimant stays uninitialized while the holder lives), replaced (the holder NotReady for 5m and the VM's guest host name the claimant's: the claimant initialized, the holder kept).",
			"outcome"),
	}
}

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
