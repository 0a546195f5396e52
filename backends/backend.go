// Package backends defines what the controller logic needs from one vCenter.
// Implementations: backends/vsphere (govmomi, SOAP + REST) and
// test/backendtest (a test double). Nothing above this package imports govmomi.
package backends

import (
	"context"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config"
)

// ErrNotFound is a vCenter's authoritative answer that an object does not
// exist. It is about the VM, never about the vCenter's health: a breaker must
// not count it as a failure.
var ErrNotFound = errors.New("not found")

// Backend is one vCenter. Every method must honour ctx's deadline.
type Backend interface {
	// Find returns every VM matching q. An empty result with a nil error is
	// the vCenter's answer that no such VM exists in q.Datacenters, unless
	// q.AllowCached: then it only means that none is known.
	Find(ctx context.Context, q Query) ([]VM, error)
	// Get re-reads the VM at ref, possibly from an up-to-date cache;
	// ErrNotFound, always asked of vCenter itself, when it no longer
	// exists there.
	Get(ctx context.Context, ref VMRef) (*VM, error)
	// Tags returns, per category name asked for, the name of the tag of that
	// category nearest to the VM: its host, the host's cluster and folders up
	// to the datacenter and beyond, then the VM's own folders. A
	// category with no such tag is absent from the map.
	Tags(ctx context.Context, vm *VM, categories []string) (map[string]string, error)
	// State is what a lookup reads of the backend: its connection, its
	// vCenter's identity, its inventory. From memory, never a call to
	// vCenter, and cheap: several reads per lookup.
	State() State
	// Status is all the backend knows of itself and its vCenter (its
	// State, session, refused credentials, budget, certificate), from
	// memory: what status pages, metrics and diagnose show; not read by
	// lookups.
	Status() Status
	// Probe connects and logs in if needed, then makes one cheap request,
	// under ctx: how a caller learns that a vCenter known down is back.
	// Its outcome updates State().Reachability.
	Probe(ctx context.Context) error
	// UUIDs lists the BIOS UUIDs of the VMs its inventory holds, and the
	// inventory's version, which changes whenever they may have; when the
	// version is unchangedSince, uuids is nil. ok is false without an
	// inventory in service. It feeds the cross-vCenter duplicate index, so
	// a twin of a VM is seen as soon as it appears.
	UUIDs(unchangedSince uint64) (uuids []string, version uint64, ok bool)
	// Datacenters lists every datacenter of the vCenter with its name,
	// managed object ID and inventory path: from the inventory while it
	// is in service, else asked of vCenter. It is how a configured
	// datacenter given by ID (config.DatacenterSpec) is told by name.
	Datacenters(ctx context.Context) ([]config.Datacenter, error)
	// Placement answers from memory only, never asking vCenter, where
	// the VMs of BIOS UUID uuid (lowercase) are, each with the tags of
	// categories on its ancestries as Tags would answer: how Nodes
	// follow their VMs as they move (vMotion, DRS, a failover) without
	// a request per Node. ok is false when the backend cannot answer
	// from memory (no inventory in service); an ok answer without
	// placements is "none known", never absence. VMs are in any
	// datacenter the inventory holds (SetDatacenters' only, when
	// given): the caller filters.
	Placement(uuid string, categories []string) (placements []Placement, ok bool)
	// MissingPrivileges reads, with the current session only, the
	// privileges its user holds on the datacenters the CCM searches (the
	// configured ones; every one when none is) and names those of the
	// required set it lacks. It never logs in, nor again after a lost
	// session: a refused login counts against vSphere SSO's lockout, and
	// a periodic check must not spend one. Without a current session it
	// fails with ErrNoSession: the answer is unknown, not "none missing".
	MissingPrivileges(ctx context.Context) (PrivilegeReport, error)
	// SetBudget changes the rate and the burst of the request budget its
	// direct calls to vCenter (those its inventory does not answer) draw
	// on, so that a config edit applies in place; calls waiting keep
	// their turn. A backend without a budget ignores it.
	SetBudget(perSecond float64, burst int)
	// SetDatacenters makes specs (empty: every datacenter) the
	// datacenters its inventory holds, so that a config edit of them,
	// which keeps the backend, applies in place; a datacenter kept keeps
	// what is held of it. Lookups are unchanged by it: a VM outside those
	// datacenters is not held, so a query searching its datacenter is
	// answered by vCenter directly. Without an inventory it does nothing.
	SetDatacenters(specs []config.DatacenterSpec)
	// RefreshCredentials re-reads its credentials; when they changed it
	// logs in with the new ones, swaps the session in and logs the old
	// one out after grace. rotated says whether it did. On error the
	// current session keeps serving. A backend without a login does
	// nothing.
	RefreshCredentials(ctx context.Context, grace time.Duration) (rotated bool, err error)
	// Start begins the backend's background work (an inventory watch),
	// which runs until Close; a backend built and never started talks to
	// vCenter only when called. Calls after the first, or after Close,
	// do nothing.
	Start()
	// Close releases sessions and stops and waits for the background
	// work. A closed backend never connects again: every later call
	// fails with ErrClosed.
	Close(ctx context.Context) error
}

// ErrNoSession is a call that needs a current session (MissingPrivileges)
// made while the backend holds none: nothing was asked of vCenter.
var ErrNoSession = errors.New("no current vCenter session")

// PrivilegeReport is what MissingPrivileges found: the session's user (a
// name, never a credential) and, per entity lacking some, the required
// privileges it lacks there; none: every one is held.
type PrivilegeReport struct {
	User    string
	Missing []MissingOn
}

// MissingOn names the privileges lacking on one entity ("datacenter DC0").
type MissingOn struct {
	Entity     string
	Privileges []string
}

// Status is a snapshot of what a backend knows of itself and its
// vCenter. Its JSON is what the /vcenters endpoint serves of it (a
// documented contract: the names do not change); the times it serves
// are UTC. What it leaves nil or empty the backend does not have (no
// session yet, no inventory, no TLS handshake yet).
type Status struct {
	State
	// Session is the current session; nil without one.
	Session *Session `json:"session,omitempty"`
	// Inventory is the state of the backend's inventory (State's
	// Inventoried); nil without one.
	Inventory *InventoryStatus `json:"inventory,omitempty"`
	// RefusedCredentials are the credential sources whose current
	// credentials vCenter refused: not sent again until they change or
	// their retry is due.
	RefusedCredentials []RefusedCredentials `json:"refusedCredentials,omitempty"`
	// Budget is the request budget its direct calls draw on; nil
	// without one.
	Budget *BudgetStatus `json:"budget,omitempty"`
	// Certificate is the leaf certificate of the last TLS handshake; nil
	// before the first one.
	Certificate *Certificate `json:"certificate,omitempty"`
}

// State is what lookups read of a backend (Backend.State), and the first
// part of its Status.
type State struct {
	// Reachability is what the backend knows of its vCenter's connection
	// apart from lookup answers: the outcome of the last connection-level
	// event (connect, TLS handshake, login, keep-alive, the inventory
	// watch's poll). A lookup may skip waiting for a vCenter that is not
	// Up when it found the VM elsewhere, and may fail at once for one
	// that is Down; it never concludes absence without an answer. Served
	// flat, beside the breaker (the endpoint's reachability, since and
	// lastError).
	Reachability Reachability `json:"-"`
	// Connect tells how the first connection attempt is going while
	// Reachability is ConnUnknown: across a WAN a TLS handshake and a
	// login take seconds, and a caller may wait for a vCenter that keeps
	// answering while it gives up soon on one that stays silent (a black
	// hole).
	Connect ConnectProgress `json:"-"`
	// InstanceUUID is the vCenter's instance UUID
	// (ServiceContent.About.InstanceUuid) as the current session read it;
	// "" while no session is current. With the server it identifies a
	// vCenter: the same address answering with another instance UUID is
	// another vCenter (a DNS name or an address moved to a new appliance).
	// It must never outlive its appliance: a session lost to another one
	// is not carried over (no answer of the new one under the old UUID).
	InstanceUUID string `json:"instanceUUID,omitempty"`
	// Inventoried is whether the backend has a watch-fed inventory of
	// its vCenter's VMs (in service or not: Status().Inventory). With
	// one, Find with AllowCached may answer from memory; a caller about
	// to conclude absence from such an answer asks again without
	// AllowCached. Other backends' answers are vCenter's.
	Inventoried bool `json:"-"`
}

// InventoryStatus is what an inventory shows of itself.
type InventoryStatus struct {
	// InService: answering lookups now (loaded, and its watch's last poll
	// answered in time); otherwise lookups go to vCenter directly.
	InService bool   `json:"inService"`
	VMs       int    `json:"vms"` // held, while in service
	Updates   uint64 `json:"updates"`
}

// Placement is a VM as an inventory holds it, and its tags.
type Placement struct {
	VM VM
	// Tags maps each category asked for to the name of its tag on the
	// VM's ancestries (Backend.Tags' rules); a category without one is
	// absent. TagsKnown is false when memory does not hold the tags of
	// every object of those ancestries (not read yet): Tags is nil then,
	// and nothing may be concluded about them.
	Tags      map[string]string
	TagsKnown bool
}

// RefusedCredentials is a credential source vCenter refused (its name,
// never a value).
type RefusedCredentials struct {
	Source string `json:"source"`
	// Refusals in a row of the same credentials.
	Refusals int `json:"refusals"`
	// Last is when vCenter refused them last.
	Last time.Time `json:"lastRefused"`
	// Retry is when they are sent again, unchanged; zero: never.
	Retry time.Time `json:"retry,omitzero"`
}

// Session is what a backend shows of its session: when it logged in and
// the name of the credentials' source (never a credential).
type Session struct {
	LoggedIn time.Time `json:"loggedIn"`
	// AgeSeconds is how long ago it logged in, as of the snapshot.
	AgeSeconds  float64 `json:"ageSeconds"`
	Credentials string  `json:"credentials"`
}

// ErrClosed is every call of a backend after Close.
var ErrClosed = errors.New("backend closed")

// ErrBudget is a call refused before it was sent: its vCenter's request
// budget (config requestsPerSecond, requestBurst) would have made it wait
// past its deadline. It is neither an answer about a VM nor a failure of
// the vCenter: a breaker must not count it.
var ErrBudget = errors.New("vCenter request budget exhausted")

// BudgetStatus is a backend's request budget.
type BudgetStatus struct {
	RequestsPerSecond float64 `json:"requestsPerSecond"`
	RequestBurst      int     `json:"requestBurst"`
	// Waits counts the calls that waited for a token; Rejections those
	// refused with ErrBudget.
	Waits      uint64 `json:"waits"`
	Rejections uint64 `json:"rejections"`
}

// Certificate is what a backend shows of its vCenter's certificate: all
// of it public.
type Certificate struct {
	NotAfter time.Time `json:"notAfter"`
	// ExpiresInSeconds is the time left to NotAfter as of the snapshot;
	// negative once expired.
	ExpiresInSeconds float64 `json:"expiresInSeconds"`
	Subject          string  `json:"subject"`
	Issuer           string  `json:"issuer"`
	// SHA256Thumbprint is its thumbprint as vSphere writes it
	// (colon-separated hex): what the thumbprint key pins.
	SHA256Thumbprint string `json:"sha256Thumbprint"`
}

// The kinds of failure a backend sorts its errors into, for callers to
// test with errors.Is (metrics, Events, diagnostics) without knowing the
// protocol. A deadline is context.DeadlineExceeded. Neither kind is ever
// an answer about a VM.
var (
	// ErrAuth: vCenter refused the login or the session (invalid login,
	// not authenticated even after logging in again).
	ErrAuth = errors.New("vCenter refused the login")
	// ErrUnreachable: no answer from vCenter (dial, TLS handshake,
	// connection reset, timeout).
	ErrUnreachable = errors.New("vCenter unreachable")
)

// ConnState is the outcome of a backend's last connection-level event.
type ConnState int

const (
	// ConnUnknown means no connection attempt has ended yet.
	ConnUnknown ConnState = iota
	// ConnUp means the last connection-level event succeeded.
	ConnUp
	// ConnDown means the last connection-level event failed.
	ConnDown
)

func (s ConnState) String() string {
	switch s {
	case ConnUp:
		return "up"
	case ConnDown:
		return "down"
	}
	return "unknown"
}

// Reachability is a backend's view of its vCenter's connection.
type Reachability struct {
	State ConnState
	// Err is the failure that made the vCenter Down (nil otherwise). It
	// names what failed, never a credential.
	Err error
	// Since is when State last changed; for ConnUnknown, when the backend
	// was made (how long it has been connecting).
	Since time.Time
}

// ConnectProgress is the state of a backend's first connection attempt.
type ConnectProgress struct {
	// Phase is the last step it reached: "dialing", "tcp connected",
	// "tls done", "answering" (an HTTP answer, a login's included);
	// "" before the attempt starts, or when the backend does not tell
	// its steps (a test double).
	Phase string
	// Last is when the attempt started or last progressed: reached a
	// step further than any before (a TCP connect, a TLS handshake) or
	// got an answer (an HTTP response); zero before the attempt starts.
	// A step repeated is no progress: a new dial, TCP connect or TLS
	// handshake after one that timed out (a retry against a vCenter that
	// accepts TCP and never answers TLS) leaves Phase, Last and
	// RoundTrip as they were.
	Last time.Time
	// RoundTrip is the longest the attempt has waited for a step of
	// progress: at least one network round trip, plus the vCenter's own
	// time. How long a silence may last before it is a stall scales with
	// it.
	RoundTrip time.Duration
}

// By says which VM attribute a Query matches.
type By int

// The attributes a Query matches: BIOS UUID (lowercase; several values are OR-ed),
// VM name, guest IP, guest host name.
const (
	ByUUID By = iota
	ByName
	ByIP
	// ByDNSName matches the guest host name VMware Tools reports
	// (guest.hostName), as vCenter's SearchIndex.FindAllByDnsName does:
	// the whole name ignoring case (a lowercase search finds a VM that
	// reports WIN-HFFA4M36JVL: kubernetes/cloud-provider-vsphere#484),
	// never a short name against an FQDN (puppetlabs/vmpooler#141).
	ByDNSName
)

func (b By) String() string {
	switch b {
	case ByUUID:
		return "uuid"
	case ByName:
		return "name"
	case ByIP:
		return "ip"
	case ByDNSName:
		return "dnsname"
	}
	return "unknown"
}

// Query asks a vCenter for VMs.
type Query struct {
	By     By
	Values []string
	// Datacenters restricts the search; empty means every datacenter.
	Datacenters []config.DatacenterSpec
	// AllowCached lets the backend answer from an in-memory inventory that
	// follows vCenter's changes. VMs found there exist (as of a moment
	// ago), but an empty answer is not vCenter's word that none exists: a
	// caller about to conclude absence must ask again without it.
	AllowCached bool
}

// InDatacenters reports whether vm's datacenter is one of specs, or specs
// is empty (every datacenter).
func InDatacenters(specs []config.DatacenterSpec, vm *VM) bool {
	return Searched(specs, vm.Datacenter())
}

// Searched reports whether dc is one of specs, or specs is empty (every
// datacenter).
func Searched(specs []config.DatacenterSpec, dc config.Datacenter) bool {
	return len(specs) == 0 || slices.ContainsFunc(specs, func(s config.DatacenterSpec) bool { return s.Matches(dc) })
}

// VMRef locates a VM inside one vCenter.
type VMRef struct {
	// Datacenter is the name of the VM's datacenter: its canonical
	// identity (labels, messages, the config's history).
	Datacenter string
	// ID is the managed object reference value, e.g. "vm-42".
	ID string
}

// PowerState of a VM, with vSphere's values.
type PowerState string

// The power states vSphere reports.
const (
	PoweredOn  PowerState = "poweredOn"
	PoweredOff PowerState = "poweredOff"
	Suspended  PowerState = "suspended"
)

// VM holds the properties the CCM reads.
type VM struct {
	Ref VMRef
	// DatacenterID and DatacenterPath are the managed object ID and the
	// inventory path of Ref.Datacenter ("" when not known), so that a
	// datacenter configured by either is told apart (see Datacenter).
	DatacenterID, DatacenterPath string
	Name                         string
	// UUID is the BIOS UUID (config.uuid), lowercase.
	UUID       string
	PowerState PowerState
	// ConnectionState is vSphere's runtime.connectionState: connected,
	// disconnected, orphaned, inaccessible or invalid.
	ConnectionState string
	NumCPU          int32
	MemoryMB        int32
	GuestID         string
	GuestHostName   string
	NICs            []NIC
	// GuestInfoMetadata and GuestInfoMetadataEncoding are the raw values of
	// the extraConfig keys guestinfo.metadata and guestinfo.metadata.encoding
	// (cloud-init's network config; CPI prefers its static addresses);
	// empty when absent.
	GuestInfoMetadata         string
	GuestInfoMetadataEncoding string
	// Host is the ID of the ESXi host running the VM, where the zone and
	// region walk starts; empty when unknown.
	Host string
	// HostName is that host's inventory name, and Cluster the name of
	// the compute cluster holding it ("" for a standalone host); both ""
	// when not known. Labels below the zone (a spread key per host).
	HostName, Cluster string
	// HostGroups are the names of the DRS host groups (ClusterHostGroup)
	// of Cluster that hold Host, sorted; none when in none.
	// HostGroupsKnown is false when they were not read: the backend does
	// not read host groups (a vCenter without zones from host groups),
	// or the host or its cluster is not known. A standalone host is in
	// none, known.
	HostGroups      []string
	HostGroupsKnown bool
	// ResourcePool is the ID of the VM's resource pool, and
	// ResourcePoolType its kind (ResourcePool or VirtualApp): the second
	// place zone and region are looked for; empty for a template.
	ResourcePool, ResourcePoolType string
	// ResourcePoolPath is the resource pool's inventory path
	// ("/dc/host/cluster/Resources/pool"); "" when not known.
	ResourcePoolPath string
	// DiskEnableUUID is the raw value of the extraConfig key
	// disk.EnableUUID ("" when absent): vSphere CSI needs it TRUE to see
	// the disks' UUIDs (see DiskUUIDEnabled).
	DiskEnableUUID string
	// HardwareVersion is the VM's virtual hardware version as vSphere
	// writes it (config.version, "vmx-15"); "" when not known. The
	// vSphere CSI driver needs a minimum (cloud/problems).
	HardwareVersion string
}

// DiskUUIDEnabled reports whether vm's disk.EnableUUID is set true, as
// ESXi reads the value (TRUE/true/1; anything else or absent is off).
func (vm *VM) DiskUUIDEnabled() bool {
	switch strings.ToLower(strings.TrimSpace(vm.DiskEnableUUID)) {
	case "true", "1":
		return true
	}
	return false
}

// Datacenter is the datacenter holding vm, as a configured datacenter
// (config.DatacenterSpec) matches it.
func (vm *VM) Datacenter() config.Datacenter {
	return config.Datacenter{Name: vm.Ref.Datacenter, ID: vm.DatacenterID, Path: vm.DatacenterPath}
}

// NIC is one guest network adapter as VMware Tools reports it.
type NIC struct {
	Network string
	MAC     string
	IPs     []string
	// DeviceConfigID is -1 for adapters not backed by a virtual device.
	DeviceConfigID int32
}

// Matches reports whether vm answers q (datacenters aside).
func (q Query) Matches(vm *VM) bool {
	for _, v := range q.Values {
		switch q.By {
		case ByUUID:
			if strings.EqualFold(vm.UUID, v) {
				return true
			}
		case ByName:
			if vm.Name == v {
				return true
			}
		case ByIP:
			for _, n := range vm.NICs {
				if slices.Contains(n.IPs, v) {
					return true
				}
			}
		case ByDNSName:
			// A VM whose tools report no host name has none to match.
			if v != "" && DNSNameKey(vm.GuestHostName) == DNSNameKey(v) {
				return true
			}
		}
	}
	return false
}

// DNSNameKey is how guest host names compare (see ByDNSName): every
// matcher (Query.Matches, the vsphere inventory's index) uses it, so they
// agree with one another.
func DNSNameKey(name string) string { return strings.ToLower(name) }
