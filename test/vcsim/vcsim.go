// Package vcsim starts a federation of simulated vCenters (govmomi's
// simulator) for tests, benchmarks and the demo: several vCenters, each on
// its own loopback address with TLS and its own credentials, each with
// several datacenters, distinct VM names and BIOS UUIDs, guest networking,
// and zone/region tags (zone on each cluster or standalone host, region on
// each datacenter).
package vcsim

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"errors"
	"fmt"
	"net/url"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/vmware/govmomi"
	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/session"
	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vapi/rest"
	"github.com/vmware/govmomi/vapi/tags"
	"github.com/vmware/govmomi/vim25"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"

	_ "github.com/vmware/govmomi/vapi/simulator" // the vAPI (tagging) endpoints

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/discovery"
)

// Options shape a federation.
type Options struct {
	VCenters    int // default 3
	Datacenters int // per vCenter, default 2
	// Folders: the last Folders datacenters of each vCenter sit in a
	// folder below the root folder (govmomi's model names it F0), not in
	// the root folder itself.
	Folders int
	// MachinesPerPool: VMs in each cluster's resource pool and on each
	// standalone host; a datacenter has 2×MachinesPerPool VMs. Default 2.
	MachinesPerPool int
	// Addresses to listen on, one per vCenter; default 127.0.0.<i+2>.
	Addresses []string
	// User and Password for every vCenter; Password gets "-<vcenter>" appended.
	User, Password string
	// ZoneCategory and RegionCategory name the tag categories.
	ZoneCategory, RegionCategory string
}

// Federation is a set of running simulated vCenters.
type Federation struct {
	VCenters []*VCenter
}

// VCenter is one running simulator.
type VCenter struct {
	Name     string // vc1, vc2, …
	Host     string // listen address
	Port     int
	User     string
	Password string
	Model    *simulator.Model
	Server   *simulator.Server
	VMs      []*VM

	mu       sync.Mutex
	accepted string // the password logins must use; see SetPassword

	logins loginLog     // every login's outcome, by user name
	soap   methodCounts // every SOAP call the simulator handled
	faults faultRules   // InjectFault's
}

// methodCounts counts SOAP calls by method name. The simulator calls its
// Registry.Handler from concurrent requests, hence the lock.
type methodCounts struct {
	mu    sync.Mutex
	calls map[string]int64
	total int64
}

func (c *methodCounts) add(method string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.calls == nil {
		c.calls = map[string]int64{}
	}
	c.calls[method]++
	c.total++
}

// SOAPCalls returns a snapshot of the SOAP calls this vCenter has handled
// since it started, by method name (RetrieveProperties, FindAllByUuid, …),
// and their total. Every call to the vim25 endpoint (/sdk) counts, whoever
// made it (populate's own setup, fixtures, the CCM) and whatever its outcome
// (faults included); the vAPI REST endpoints (tags, sessions) are not SOAP
// and are not counted: a Proxy's Traffic sees both. Take a snapshot before
// and after a workload and subtract.
func (vc *VCenter) SOAPCalls() (byMethod map[string]int64, total int64) {
	vc.soap.mu.Lock()
	defer vc.soap.mu.Unlock()
	byMethod = make(map[string]int64, len(vc.soap.calls))
	for m, n := range vc.soap.calls {
		byMethod[m] = n
	}
	return byMethod, vc.soap.total
}

// loginLog records when each login was accepted or refused, by user name.
// ValidLogin is called from concurrent requests, hence the lock.
type loginLog struct {
	mu                sync.Mutex
	accepted, refused map[string][]time.Time
}

func (l *loginLog) add(user string, ok bool, at time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.accepted == nil {
		l.accepted, l.refused = map[string][]time.Time{}, map[string][]time.Time{}
	}
	if ok {
		l.accepted[user] = append(l.accepted[user], at)
	} else {
		l.refused[user] = append(l.refused[user], at)
	}
}

func (l *loginLog) times(m map[string][]time.Time, user string) []time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(m[user])
}

// Refusals returns when this vCenter refused a login as user (a wrong
// password, or a user it does not know), oldest first, since it started:
// what vSphere SSO counts toward an account's lockout (by default 5
// failures in 180 s). SOAP logins and vAPI REST session logins count
// alike; whoever sent them (fixtures too); a login through a Proxy is
// counted once it reaches the simulator. Safe for concurrent use.
func (vc *VCenter) Refusals(user string) []time.Time {
	return vc.logins.times(vc.logins.refused, user)
}

// Logins returns when this vCenter accepted a login as user, oldest
// first, since it started (populate's and fixtures' own included), SOAP
// and vAPI REST alike. Safe for concurrent use.
func (vc *VCenter) Logins(user string) []time.Time {
	return vc.logins.times(vc.logins.accepted, user)
}

// OpenSessions lists the SOAP sessions open now as user (vAPI REST
// sessions are not in vCenter's session list), oldest login first, each
// with its login time, the client's user agent and address. Unlike
// Sessions it reads them in the process: it logs in nowhere, so it
// changes neither Logins nor the list. Safe for concurrent use.
func (vc *VCenter) OpenSessions(user string) []types.UserSession {
	r := vc.Model.Map()
	// A session's view of the SessionManager lists every session (as
	// the property sessionList does for a client).
	s := &simulator.Session{Registry: simulator.NewRegistry(), Map: r}
	sm, ok := s.Get(r.SessionManager().Reference()).(*simulator.SessionManager)
	if !ok {
		return nil
	}
	var out []types.UserSession
	for _, us := range sm.SessionList {
		if us.UserName == user {
			out = append(out, us)
		}
	}
	slices.SortFunc(out, func(a, b types.UserSession) int { return a.LoginTime.Compare(b.LoginTime) })
	return out
}

// VM describes one simulated VM as the tests expect to see it.
type VM struct {
	VCenter, Datacenter, Name, UUID, Ref string
	// DatacenterID and DatacenterPath are the managed object ID and the
	// inventory path ("/F0/DC1") of Datacenter.
	DatacenterID, DatacenterPath string
	// Host is the ESXi host's name; Zone and Region its tags.
	Host, Zone, Region string
	IP, HostName       string
}

// SystemUUID is the VM's UUID as a kubelet on vSphere reports it.
func (vm *VM) SystemUUID() string { return discovery.SwapByteOrder(vm.UUID) }

// UUIDFor is the BIOS UUID the federation gives VM number vm of datacenter
// dc of vCenter vc (all counted from 0).
func UUIDFor(vc, dc, vm int) string {
	return fmt.Sprintf("42%02x%02x%02x-%04x-4%03x-8%03x-%012x", vc, dc, vm&0xff, vm, vc, dc, vc<<32|dc<<16|vm)
}

// Start builds and starts the federation. Each model's inventory but its
// VMs (datacenters, clusters, hosts, datastores, networks: a few dozen
// objects) is built one vCenter at a time: govmomi's Model.Create goes
// through the simulator's in-process client, whose session is
// package-level. The VMs, nearly all of the work, are then built for every
// vCenter at once, at most GOMAXPROCS at a time, in each simulator's own
// registry (createVMs).
func Start(opts Options) (*Federation, error) {
	if opts.VCenters == 0 {
		opts.VCenters = 3
	}
	if opts.Datacenters == 0 {
		opts.Datacenters = 2
	}
	if opts.MachinesPerPool == 0 {
		opts.MachinesPerPool = 2
	}
	if opts.User == "" {
		opts.User = "ccm@vsphere.local"
	}
	if opts.Password == "" {
		opts.Password = "s3cret"
	}
	if opts.ZoneCategory == "" {
		opts.ZoneCategory = "k8s-zone"
	}
	if opts.RegionCategory == "" {
		opts.RegionCategory = "k8s-region"
	}
	// Addresses grow with every index: the last VM of the last datacenter
	// of the last vCenter is the first to run out.
	if _, _, err := guestAddress(opts.VCenters-1, opts.Datacenters-1, 2*opts.MachinesPerPool-1); err != nil {
		return nil, fmt.Errorf("%d vCenters × %d datacenters × %d VMs: %w", opts.VCenters, opts.Datacenters, 2*opts.MachinesPerPool, err)
	}
	f := &Federation{}
	for i := range opts.VCenters {
		addr := "127.0.0." + strconv.Itoa(i+2)
		if i < len(opts.Addresses) {
			addr = opts.Addresses[i]
		}
		vc, err := startVCenter(i, addr, opts)
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("vcenter %d: %w", i+1, err)
		}
		f.VCenters = append(f.VCenters, vc)
	}
	errs := make([]error, len(f.VCenters))
	slots := make(chan struct{}, runtime.GOMAXPROCS(0))
	var wg sync.WaitGroup
	for i, vc := range f.VCenters {
		wg.Go(func() {
			slots <- struct{}{}
			defer func() { <-slots }()
			if err := vc.populate(i, opts); err != nil {
				errs[i] = fmt.Errorf("vcenter %d: %w", i+1, err)
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

func startVCenter(i int, addr string, opts Options) (*VCenter, error) {
	m := simulator.VPX()
	m.Datacenter = opts.Datacenters
	m.Folder = opts.Folders
	m.Cluster = 1
	m.ClusterHost = 1
	m.Host = 1
	m.Machine = 0 // populate makes them, faster (createVMs)
	if err := m.Create(); err != nil {
		return nil, err
	}
	vc := &VCenter{
		Name: fmt.Sprintf("vc%d", i+1), Host: addr, Model: m,
		User: opts.User, Password: opts.Password + "-" + fmt.Sprintf("vc%d", i+1),
	}
	vc.accepted = vc.Password
	// Set before the server starts (the simulator reads it unlocked); the
	// password it accepts changes through SetPassword.
	// Every login asks it, SOAP (SessionManager.Login) and vAPI REST
	// (a session created with basic authentication) alike: it records
	// each outcome (Refusals, Logins).
	m.Map().SessionManager().ValidLogin = func(req *types.Login) bool {
		vc.mu.Lock()
		ok := req.UserName == vc.User && req.Password == vc.accepted
		vc.mu.Unlock()
		vc.logins.add(req.UserName, ok, time.Now())
		return ok
	}
	// Count every SOAP call, and answer InjectFault's: the simulator calls
	// Registry.Handler (which it never sets itself in v0.56.0) before
	// dispatching each method; nil, nil leaves the call to the normal
	// handler. Set before the server starts, like ValidLogin.
	m.Map().Handler = func(ctx *simulator.Context, method *simulator.Method) (mo.Reference, types.BaseMethodFault) {
		vc.soap.add(method.Name)
		return nil, vc.faults.match(ctx, method)
	}
	m.Service.RegisterEndpoints = true
	m.Service.TLS = new(tls.Config)
	m.Service.Listen = &url.URL{Host: addr + ":0", User: url.UserPassword(vc.User, vc.Password)}
	vc.Server = m.Service.NewServer()
	vc.Port, _ = strconv.Atoi(vc.Server.URL.Port())
	// The simulator gives every vCenter the About of one package-level
	// ServiceContent: without this, all would share one instance UUID.
	// Nothing has its address yet, so nothing reads it meanwhile.
	vc.SetInstanceUUID(instanceUUIDFor(vc.Name, vc.Server.URL.Host))
	return vc, nil
}

// instanceUUIDFor is the instance UUID of the vCenter named name listening
// on hostPort: the same for the same both, distinct for two simulators
// running at once (two federations may both have a vc1).
func instanceUUIDFor(name, hostPort string) string {
	b := sha256.Sum256([]byte("vcsim instance " + name + " " + hostPort))
	b[6] = b[6]&0x0f | 0x80 // version 8: custom
	b[8] = b[8]&0x3f | 0x80 // RFC 9562 variant
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// serviceInstance is the simulator's ServiceInstance, whose Content
// RetrieveServiceContent answers, under the object's lock.
func (vc *VCenter) serviceInstance() *simulator.ServiceInstance {
	return vc.Model.Map().Get(vim25.ServiceInstance).(*simulator.ServiceInstance)
}

// InstanceUUID is the vCenter's instance UUID
// (ServiceContent.About.InstanceUuid): each simulator of a federation has
// its own.
func (vc *VCenter) InstanceUUID() string {
	return vc.serviceInstance().Content.About.InstanceUuid
}

// SetInstanceUUID changes the vCenter's instance UUID, as if its address
// now led to another appliance; clients read it when they connect. The
// ServiceInstance is replaced by a changed copy, never changed in place:
// the simulator reads its content without a lock on every request.
func (vc *VCenter) SetInstanceUUID(id string) {
	si := *vc.serviceInstance()
	si.Content.About.InstanceUuid = id
	vc.Model.Map().Put(&si)
}

// Client logs in to the simulator (for test fixtures).
func (vc *VCenter) Client(ctx context.Context) (*govmomi.Client, error) {
	u := *vc.Server.URL
	u.User = url.UserPassword(vc.User, vc.currentPassword())
	return govmomi.NewClient(ctx, &u, true)
}

// SetPassword makes the vCenter accept only password from now on, as a
// password rotation does; sessions already open stay valid until
// TerminateSessions.
func (vc *VCenter) SetPassword(password string) {
	vc.mu.Lock()
	defer vc.mu.Unlock()
	vc.accepted = password
}

func (vc *VCenter) currentPassword() string {
	vc.mu.Lock()
	defer vc.mu.Unlock()
	return vc.accepted
}

// populate creates the VMs, with unique names, BIOS UUIDs and guest
// networking, and tags the inventory.
func (vc *VCenter) populate(vcIndex int, opts Options) error {
	dcs, err := vc.tagInventory(opts)
	if err != nil {
		return err
	}
	registry := vc.Model.Map()
	for dcIndex, d := range dcs {
		dc := d.dc
		name := func(vmIndex int) string { return fmt.Sprintf("%s-%s-vm%d", vc.Name, strings.ToLower(dc.Name), vmIndex) }
		uuid := func(vmIndex int) string { return UUIDFor(vcIndex, dcIndex, vmIndex) }
		vms, err := vc.createVMs(dc, d.placements, opts.MachinesPerPool, name, uuid)
		if err != nil {
			return fmt.Errorf("datacenter %s: %w", dc.Name, err)
		}
		dcPath := inventoryPath(registry, dc.Self)
		for vmIndex, vm := range vms {
			host := registry.Get(*vm.Runtime.Host).(*simulator.HostSystem)
			v := &VM{
				VCenter: vc.Name, Datacenter: dc.Name, DatacenterID: dc.Self.Value, DatacenterPath: dcPath,
				Name: vm.Name, UUID: vm.Config.Uuid, Ref: vm.Self.Value,
				Host: host.Name, Zone: d.zones[*host.Parent], Region: d.region,
			}
			ip, mac, err := guestAddress(vcIndex, dcIndex, vmIndex)
			if err != nil {
				return err
			}
			v.IP, v.HostName = ip, v.Name+".cluster.local"
			// Set before anyone but populate has a session.
			vm.Guest = &types.GuestInfo{
				HostName:  v.HostName,
				IpAddress: v.IP,
				Net: []types.GuestNicInfo{{
					Network: "VM Network", IpAddress: []string{v.IP, "fe80::1"}, Connected: true,
					MacAddress: mac, DeviceConfigId: 4000,
				}},
			}
			vc.VMs = append(vc.VMs, v)
		}
	}
	return nil
}

// plannedDC is one datacenter of a vCenter: where its VMs go, their zones
// (by compute resource) and region.
type plannedDC struct {
	dc         *simulator.Datacenter
	placements []computeResource
	zones      map[types.ManagedObjectReference]string
	region     string
}

// tagInventory tags each datacenter with its region and each cluster and
// standalone host with its zone, through the vAPI, and returns the
// datacenters by name, the order their indexes in VM names and UUIDs
// follow. A VM's index in its datacenter runs through the compute
// resources by name, each with its own zone.
func (vc *VCenter) tagInventory(opts Options) ([]plannedDC, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := vc.Client(ctx)
	if err != nil {
		return nil, err
	}
	defer func() { _ = c.Logout(context.WithoutCancel(ctx)) }()
	rc := rest.NewClient(c.Client)
	if err := rc.Login(ctx, url.UserPassword(vc.User, vc.currentPassword())); err != nil {
		return nil, fmt.Errorf("rest login: %w", err)
	}
	tm := tags.NewManager(rc)
	zoneCat, err := tm.CreateCategory(ctx, &tags.Category{Name: opts.ZoneCategory, Cardinality: "SINGLE"})
	if err != nil {
		return nil, err
	}
	regionCat, err := tm.CreateCategory(ctx, &tags.Category{Name: opts.RegionCategory, Cardinality: "SINGLE"})
	if err != nil {
		return nil, err
	}
	tag := func(cat, name string, obj types.ManagedObjectReference) error {
		id, err := tm.CreateTag(ctx, &tags.Tag{Name: name, CategoryID: cat})
		if err != nil {
			return err
		}
		return tm.AttachTag(ctx, id, obj)
	}

	registry := vc.Model.Map()
	dcs := registry.All("Datacenter")
	slices.SortFunc(dcs, func(a, b mo.Entity) int { return strings.Compare(a.Entity().Name, b.Entity().Name) })
	out := make([]plannedDC, 0, len(dcs))
	for _, dcObj := range dcs {
		dc := dcObj.(*simulator.Datacenter)
		d := plannedDC{
			dc: dc, placements: computeResources(registry, dc.Self),
			zones:  map[types.ManagedObjectReference]string{},
			region: fmt.Sprintf("region-%s-%s", vc.Name, strings.ToLower(dc.Name)),
		}
		if err := tag(regionCat, d.region, dc.Self); err != nil {
			return nil, err
		}
		for i, cr := range d.placements {
			d.zones[cr.Ref] = fmt.Sprintf("zone-%s-%s-%d", vc.Name, strings.ToLower(dc.Name), i)
			if err := tag(zoneCat, d.zones[cr.Ref], cr.Ref); err != nil {
				return nil, err
			}
		}
		out = append(out, d)
	}
	return out, nil
}

// inventoryPath is ref's path from the root folder, "/F0/DC1".
func inventoryPath(r *simulator.Registry, ref types.ManagedObjectReference) string {
	var names []string
	for range 32 {
		e, ok := r.Get(ref).(mo.Entity)
		if !ok || e.Entity().Parent == nil { // the root folder is no part of it
			break
		}
		names = append([]string{e.Entity().Name}, names...)
		ref = *e.Entity().Parent
	}
	return "/" + strings.Join(names, "/")
}

func inDatacenter(r *simulator.Registry, ref, dc types.ManagedObjectReference) bool {
	for range 32 {
		e, ok := r.Get(ref).(mo.Entity)
		if !ok {
			return false
		}
		p := e.Entity().Parent
		if p == nil {
			return false
		}
		if *p == dc {
			return true
		}
		ref = *p
	}
	return false
}

// AllVMs lists every VM of the federation.
func (f *Federation) AllVMs() []*VM {
	var out []*VM
	for _, vc := range f.VCenters {
		out = append(out, vc.VMs...)
	}
	return out
}

// VCenter returns the vCenter named name.
func (f *Federation) VCenter(name string) *VCenter {
	for _, vc := range f.VCenters {
		if vc.Name == name {
			return vc
		}
	}
	return nil
}

// Close stops every simulator.
func (f *Federation) Close() {
	for _, vc := range f.VCenters {
		vc.Close()
	}
}

// Close stops the simulator and removes its model.
func (vc *VCenter) Close() {
	if vc.Server != nil {
		vc.Server.Close()
		vc.Server = nil
	}
	if vc.Model != nil {
		vc.Model.Remove()
		vc.Model = nil
	}
}

// Stop closes the listener but keeps the model, like a vCenter going down;
// Restart is not supported by the simulator on the same port, so tests that
// need the vCenter back use fault injection instead.
func (vc *VCenter) Stop() {
	if vc.Server != nil {
		vc.Server.Close()
		vc.Server = nil
	}
}

// Object returns the simulator object for a VM (for direct fixture edits).
func (vc *VCenter) Object(vm *VM) *simulator.VirtualMachine {
	return vc.Model.Map().Get(types.ManagedObjectReference{Type: "VirtualMachine", Value: vm.Ref}).(*simulator.VirtualMachine)
}

// PowerOff powers a VM off through the API.
func (vc *VCenter) PowerOff(ctx context.Context, vm *VM) error {
	return vc.vmTask(ctx, vm, func(o *object.VirtualMachine) (*object.Task, error) { return o.PowerOff(ctx) })
}

// Suspend suspends a VM through the API.
func (vc *VCenter) Suspend(ctx context.Context, vm *VM) error {
	return vc.vmTask(ctx, vm, func(o *object.VirtualMachine) (*object.Task, error) { return o.Suspend(ctx) })
}

// PowerOn powers a VM on through the API.
func (vc *VCenter) PowerOn(ctx context.Context, vm *VM) error {
	return vc.vmTask(ctx, vm, func(o *object.VirtualMachine) (*object.Task, error) { return o.PowerOn(ctx) })
}

// Destroy powers a VM off and deletes it through the API.
func (vc *VCenter) Destroy(ctx context.Context, vm *VM) error {
	_ = vc.PowerOff(ctx, vm)
	return vc.vmTask(ctx, vm, func(o *object.VirtualMachine) (*object.Task, error) { return o.Destroy(ctx) })
}

// SetExtraConfig sets one extraConfig option of a VM, as cloud-init's
// guestinfo datasource is configured (guestinfo.metadata and its encoding).
func (vc *VCenter) SetExtraConfig(ctx context.Context, vm *VM, key, value string) error {
	return vc.vmTask(ctx, vm, func(o *object.VirtualMachine) (*object.Task, error) {
		return o.Reconfigure(ctx, types.VirtualMachineConfigSpec{ExtraConfig: []types.BaseOptionValue{&types.OptionValue{Key: key, Value: value}}})
	})
}

func (vc *VCenter) vmTask(ctx context.Context, vm *VM, fn func(*object.VirtualMachine) (*object.Task, error)) error {
	c, err := vc.Client(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = c.Logout(context.WithoutCancel(ctx)) }()
	o := object.NewVirtualMachine(c.Client, types.ManagedObjectReference{Type: "VirtualMachine", Value: vm.Ref})
	task, err := fn(o)
	if err != nil {
		return err
	}
	return task.Wait(ctx)
}

// TerminateSessions ends every client session, as an administrator (or a
// vCenter restart) would; clients see NotAuthenticated on their next call.
func (vc *VCenter) TerminateSessions(ctx context.Context) error {
	c, err := vc.Client(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = c.Logout(context.WithoutCancel(ctx)) }()
	var sm mo.SessionManager
	if err := c.RetrieveOne(ctx, *c.ServiceContent.SessionManager, []string{"sessionList", "currentSession"}, &sm); err != nil {
		return err
	}
	var ids []string
	for _, s := range sm.SessionList {
		if sm.CurrentSession == nil || s.Key != sm.CurrentSession.Key {
			ids = append(ids, s.Key)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	return session.NewManager(c.Client).TerminateSession(ctx, ids)
}

// update changes properties of a VM under the simulator's object lock, as
// its own handlers do, and notifies property collectors.
func (vc *VCenter) update(vm *VM, changes ...types.PropertyChange) {
	obj := vc.Object(vm)
	vc.Model.Map().AtomicUpdate(vc.Model.Service.Context, obj, changes)
}

// SetUUID gives a VM another BIOS UUID (to make duplicates).
func (vc *VCenter) SetUUID(vm *VM, uuid string) {
	vc.update(vm,
		types.PropertyChange{Name: "config.uuid", Val: uuid},
		types.PropertyChange{Name: "summary.config.uuid", Val: uuid})
}

// SetHardwareVersion sets a VM's virtual hardware version
// (config.version, "vmx-13"), higher or lower, as an upgrade
// (UpgradeVM_Task) or a VM restored from an old template makes it. Set
// in the model: the simulator's reconfiguration applies a version without
// telling property collectors, so a watch would never see it.
func (vc *VCenter) SetHardwareVersion(vm *VM, version string) {
	vc.update(vm,
		types.PropertyChange{Name: "config.version", Val: version},
		types.PropertyChange{Name: "summary.config.hwVersion", Val: version})
}

// SetGuestHostName changes the host name a VM's VMware Tools report
// (guest.hostName), as a guest renamed or rebooted with another name does.
func (vc *VCenter) SetGuestHostName(vm *VM, name string) {
	vc.update(vm, types.PropertyChange{Name: "guest.hostName", Val: name})
	vm.HostName = name
}

// MakeInaccessible puts a VM in the state vCenter shows when its files are
// unreachable: connection state inaccessible, configuration (and so its
// UUID) unreadable.
func (vc *VCenter) MakeInaccessible(vm *VM) {
	vc.update(vm,
		types.PropertyChange{Name: "runtime.connectionState", Val: types.VirtualMachineConnectionStateInaccessible},
		types.PropertyChange{Name: "config.uuid", Val: ""},
		types.PropertyChange{Name: "summary.config.uuid", Val: ""})
}

// AddGuestNIC adds a network adapter with the given IPs to what a VM's
// VMware Tools report (guest.net), as a VM with a second NIC on a
// storage, management or pod network shows it; the first NIC keeps its
// place. network names the VM network the adapter is on. The adapter's
// MAC and device key follow the VM's others, so it is a virtual device
// (DeviceConfigId != -1) that CPI's selection considers.
func (vc *VCenter) AddGuestNIC(vm *VM, network string, ips ...string) {
	obj := vc.Object(vm)
	ctx := vc.Model.Service.Context
	vc.Model.Map().WithLock(ctx, obj.Reference(), func() {
		nics := append([]types.GuestNicInfo(nil), obj.Guest.Net...)
		key := int32(4000)
		for _, n := range nics {
			key = max(key, n.DeviceConfigId+1)
		}
		mac := fmt.Sprintf("00:50:56:fe:%02x:%02x", (key-4000)>>8&0xff, (key-4000)&0xff)
		nics = append(nics, types.GuestNicInfo{
			Network: network, IpAddress: append([]string(nil), ips...), Connected: true,
			MacAddress: mac, DeviceConfigId: key,
		})
		ctx.Update(obj, []types.PropertyChange{{Name: "guest.net", Val: nics}})
	})
}
