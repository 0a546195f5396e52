// Package config reads the CCM's YAML configuration: a superset of the YAML
// form of kubernetes/cloud-provider-vsphere's vsphere.conf, so a CPI config
// loads unchanged.
package config

import (
	"cmp"
	"fmt"
	"net/netip"
	"time"
)

// fileSchema is the configuration exactly as written. Unset fields stay empty (or
// nil) so that a vCenter section can inherit them from global.
type fileSchema struct {
	Global  globalSection              `yaml:"global"`
	VCenter map[string]*vcenterSection `yaml:"vcenter"`
	Labels  labelsSection              `yaml:"labels"`
	Nodes   Nodes                      `yaml:"nodes"`

	// defaultSecretsDirectory is CPI's default directory when it exists
	// and the file names none (Env.apply). Unlike global.secretsDirectory
	// it does not count when CPI decides whether global names a source.
	defaultSecretsDirectory string
}

// vcenterSection holds the keys a vcenter.<name> section takes; global takes them too
// and passes unset ones down.
type vcenterSection struct {
	Server             string     `yaml:"server"`
	Port               string     `yaml:"port"`
	User               string     `yaml:"user"`
	Password           Password   `yaml:"password"`
	InsecureFlag       *bool      `yaml:"insecureFlag"`
	Datacenters        StringList `yaml:"datacenters"`
	CAFile             string     `yaml:"caFile"`
	Thumbprint         StringList `yaml:"thumbprint"` // one or several: old and new while a certificate is replaced
	SecretName         string     `yaml:"secretName"`
	SecretNamespace    string     `yaml:"secretNamespace"`
	IPFamily           StringList `yaml:"ipFamily"`
	SoapRoundtripCount *uint      `yaml:"soapRoundtripCount"`
	// RequestTimeout is the deadline of one vCenter call (Go duration).
	RequestTimeout string          `yaml:"requestTimeout"`
	Breaker        *breakerSection `yaml:"breaker"`
	// Inventory keeps the vCenter's VMs in memory, fed by a watch (default
	// true); false sends every lookup to vCenter.
	Inventory *bool `yaml:"inventory"`
	// RequestsPerSecond and RequestBurst are the budget of the requests
	// sent to vCenter directly (not answered from the inventory).
	RequestsPerSecond *float64 `yaml:"requestsPerSecond"`
	RequestBurst      *int     `yaml:"requestBurst"`
	// NodeDeletion is the deletion policy of the Nodes whose VMs this
	// vCenter could hold: a mapping, or the scalar frozen (nodedeletion.go).
	NodeDeletion *nodeDeletionSection `yaml:"nodeDeletion"`
	// Labels (a vcenter section's only) takes the host-group keys for
	// this vCenter instead of the top-level labels' (hostgroups.go).
	Labels *hostGroupsSection `yaml:"labels"`
}

// globalSection is the global section: every vCenter key plus the process-wide ones.
type globalSection struct {
	vcenterSection `yaml:",inline"`
	// SecretsDirectory holds credential files named like Secret keys.
	SecretsDirectory string `yaml:"secretsDirectory"`
	// RetiredVCenterRetention is how long a vCenter or datacenter removed
	// from the config keeps the Nodes of VMs not found elsewhere (Go
	// duration; default 168h).
	RetiredVCenterRetention string `yaml:"retiredVCenterRetention"`
}

// breakerSection tunes the circuit breaker in front of one vCenter.
type breakerSection struct {
	ConsecutiveFailures *uint32 `yaml:"consecutiveFailures"`
	OpenTimeout         string  `yaml:"openTimeout"`
}

// Labels name the vSphere tag categories whose tags become zone and region.
type Labels struct {
	Zone   string `yaml:"zone"`
	Region string `yaml:"region"`
}

// Nodes are CPI's node-address selection rules; CIDR lists are comma-separated.
type Nodes struct {
	InternalNetworkSubnetCIDR        string `yaml:"internalNetworkSubnetCidr"`
	ExternalNetworkSubnetCIDR        string `yaml:"externalNetworkSubnetCidr"`
	InternalVMNetworkName            string `yaml:"internalVmNetworkName"`
	ExternalVMNetworkName            string `yaml:"externalVmNetworkName"`
	ExcludeInternalNetworkSubnetCIDR string `yaml:"excludeInternalNetworkSubnetCidr"`
	ExcludeExternalNetworkSubnetCIDR string `yaml:"excludeExternalNetworkSubnetCidr"`
	// ReconcileTopology (ours) rewrites a Node's zone and region labels
	// when its VM moves to another zone or region; off by default (a
	// volume with zonal node affinity stays where it was created).
	ReconcileTopology *bool `yaml:"reconcileTopology"`
	// PlacementLabels (ours) are the labels below the zone a Node
	// carries: any of host, cluster, resourcePool.
	PlacementLabels StringList `yaml:"placementLabels"`
	// TagLabels (ours) turn a tag category into a Node label: category
	// name → label key (outside kubernetes.io and k8s.io).
	TagLabels map[string]string `yaml:"tagLabels"`
}

// Config is a validated configuration with every inheritance resolved.
type Config struct {
	// VCenters sorted by name.
	VCenters         []VCenter
	SecretsDirectory string
	Labels           Labels
	Nodes            AddressRules
	// ReconcileTopology and PlacementLabels: see Nodes (the file's
	// nodes.reconcileTopology and nodes.placementLabels).
	ReconcileTopology bool
	PlacementLabels   []PlacementLabel
	// TagLabels: see Nodes (nodes.tagLabels), by label key, sorted.
	TagLabels []TagLabel
	// RetiredRetention: see Global.RetiredVCenterRetention.
	RetiredRetention time.Duration
	// Notices are the keys that have no effect, or not the one they seem
	// to have, and the values the environment set: each to be logged, and
	// the unknown ones reported, but none fatal (CPI's configs must load).
	Notices []Notice
}

// NoticeKind says why a Notice was raised.
type NoticeKind int

const (
	// NoticeIgnored is a key CPI reads (or its templates carry) that this
	// CCM does not implement.
	NoticeIgnored NoticeKind = iota
	// NoticeUnknown is a key neither CPI nor this CCM knows; a typo?
	NoticeUnknown
	// NoticeDiffers is a key that means something other than it seems to,
	// by CPI's rules, which apply.
	NoticeDiffers
	// NoticeEnv is a value set by one of CPI's environment variables.
	NoticeEnv
)

func (k NoticeKind) String() string {
	switch k {
	case NoticeIgnored:
		return "ignored key"
	case NoticeUnknown:
		return "unknown key"
	case NoticeDiffers:
		return "read by CPI's rule"
	case NoticeEnv:
		return "from the environment"
	}
	return "notice"
}

// Notice is one remark on a config that loaded. It names keys by path and
// never quotes a value.
type Notice struct {
	Kind NoticeKind
	// Path names the key ("global.serviceAccount", "vcenter.a.caFile"),
	// the INI section, or the environment variable.
	Path string
	// Line in the file; 0 when not from the file.
	Line   int
	Reason string
}

func (n Notice) String() string {
	if n.Line > 0 {
		return fmt.Sprintf("%s: %s (line %d): %s", n.Path, n.Kind, n.Line, n.Reason)
	}
	return fmt.Sprintf("%s: %s: %s", n.Path, n.Kind, n.Reason)
}

// CredentialsFrom says where a vCenter's login comes from, by CPI's rules.
type CredentialsFrom int

const (
	// FromConfig means User and Password in the file.
	FromConfig CredentialsFrom = iota
	// FromSecret means the Secret SecretNamespace/SecretName (the vCenter's
	// own, or global's, shared by every vCenter without one).
	FromSecret
	// FromDirectory means files in Config.SecretsDirectory.
	FromDirectory
)

func (f CredentialsFrom) String() string {
	switch f {
	case FromSecret:
		return "secret"
	case FromDirectory:
		return "secrets directory"
	}
	return "config file"
}

// VCenter is everything needed to talk to one vCenter.
type VCenter struct {
	// Name is the key under vcenter: (or the server, for a global-only config).
	Name   string
	Server string
	Port   int
	// Datacenters are the datacenters searched, as written: each a name,
	// a managed object reference or an inventory path (DatacenterSpecs
	// parses them: what lookups match); empty: every datacenter of the
	// vCenter.
	Datacenters  []string
	InsecureFlag bool
	CAFile       string
	// Thumbprints pin the certificate: it must match one of them
	// (SHA-256 or SHA-1, colon-separated hex); several while a
	// certificate is replaced.
	Thumbprints []string
	// CredentialsFrom picks the login's source as CPI does; User and
	// Password are what CPI would try first (in Secret and directory mode
	// only the vCenter section's own).
	CredentialsFrom CredentialsFrom
	SecretName      string
	SecretNamespace string
	User            string
	Password        Password
	IPFamily        []string // "ipv4", "ipv6", in order of preference
	RoundTripCount  uint
	RequestTimeout  time.Duration
	Breaker         Breaker
	Inventory       bool
	// RequestsPerSecond and RequestBurst are the request budget of the
	// lookups sent to vCenter directly: a token bucket refilled at
	// RequestsPerSecond, holding RequestBurst.
	RequestsPerSecond float64
	RequestBurst      int
	// NodeDeletion is the policy for Nodes whose VMs this vCenter could
	// hold (nodedeletion.go). WithDefaults leaves it as it is: its zero
	// (no grace, not frozen) is a value of its own; Parse sets
	// DefaultMinAbsence when no key gives one.
	NodeDeletion NodeDeletion
	// ZoneHostGroups, when not nil, gives this vCenter's VMs their zone
	// from the DRS host group of the host each runs on, in place of the
	// zone tag category (labels.zoneHostGroups, or the vcenter section's
	// own); the region is still read from labels.region's tags.
	ZoneHostGroups *HostGroupZones
}

// Breaker is a resolved Breaker.
type Breaker struct {
	ConsecutiveFailures uint32
	OpenTimeout         time.Duration
}

// PlacementLabel names one of the labels below the zone
// (nodes.placementLabels).
type PlacementLabel string

// The placement labels a config may ask for.
const (
	PlacementHost         PlacementLabel = "host"
	PlacementCluster      PlacementLabel = "cluster"
	PlacementResourcePool PlacementLabel = "resourcePool"
)

// AllPlacementLabels lists every placement label, in the order they are
// documented.
func AllPlacementLabels() []PlacementLabel {
	return []PlacementLabel{PlacementHost, PlacementCluster, PlacementResourcePool}
}

// AddressRules are the parsed Nodes rules.
type AddressRules struct {
	InternalSubnets        []netip.Prefix
	ExternalSubnets        []netip.Prefix
	ExcludeInternalSubnets []netip.Prefix
	ExcludeExternalSubnets []netip.Prefix
	InternalNetworkName    string
	ExternalNetworkName    string
}

// Defaults applied when neither global nor the vCenter sets a value.
const (
	DefaultPort                = 443
	DefaultRequestTimeout      = 10 * time.Second
	DefaultConsecutiveFailures = 5
	DefaultOpenTimeout         = 30 * time.Second
	DefaultRoundTripCount      = 3
	DefaultRetiredRetention    = 7 * 24 * time.Hour
	// DefaultMinAbsence: see NodeDeletion.MinAbsence for why 30s.
	DefaultMinAbsence = 30 * time.Second
	IPv4              = "ipv4"
	IPv6              = "ipv6"
)

// The request budget's defaults (RequestsPerSecond, RequestBurst): a
// direct lookup is a read (a SearchIndex search, a property read, a tag
// list) that costs vCenter milliseconds; 20 a second is the load of a
// few vSphere Client users, which a vCenter bears even when loaded, and
// still initializes a thousand Nodes (a few reads each) in a few minutes
// with no inventory. A burst of 100 lets an idle vCenter answer a
// reload's or a status pass's first lookups unslowed.
const (
	DefaultRequestsPerSecond = 20.0
	DefaultRequestBurst      = 100
)

// WithDefaults is v with each field whose zero means "not set" given its
// default, as Parse does for every vCenter, so a VCenter built by hand (a
// test's) carries the same defaults; consumers use the values as given.
// RoundTripCount, Inventory and NodeDeletion, whose zero is a value of its
// own, are left as they are.
func (v VCenter) WithDefaults() VCenter {
	v.Port = cmp.Or(v.Port, DefaultPort)
	v.RequestTimeout = cmp.Or(v.RequestTimeout, DefaultRequestTimeout)
	v.Breaker.ConsecutiveFailures = cmp.Or(v.Breaker.ConsecutiveFailures, DefaultConsecutiveFailures)
	v.Breaker.OpenTimeout = cmp.Or(v.Breaker.OpenTimeout, DefaultOpenTimeout)
	if len(v.IPFamily) == 0 {
		v.IPFamily = []string{IPv4}
	}
	v.RequestsPerSecond = cmp.Or(v.RequestsPerSecond, DefaultRequestsPerSecond)
	v.RequestBurst = cmp.Or(v.RequestBurst, DefaultRequestBurst)
	return v
}

// Password is a credential; it never prints.
type Password string

// String redacts it in %v and %s.
func (Password) String() string { return "<redacted>" }

// GoString redacts it in %#v.
func (Password) GoString() string { return `"<redacted>"` }

// Reveal returns the password for a login call; nothing else should call it.
func (p Password) Reveal() string { return string(p) }
