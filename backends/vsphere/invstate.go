package vsphere

// invState: what the inventory holds, its indexes, and what is resolved
// from it at read time.

import (
	"cmp"
	"hash/maphash"
	"slices"
	"strings"
	"unique"

	"github.com/vmware/govmomi/vim25/types"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/backends"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config"
)

// invState is one consistent copy of the inventory.
//
// A vCenter's every VM is held, tens of thousands in a federation: a
// record is kept compact. What repeats from VM to VM (a guest OS id, a
// host, a pool, a folder, a network's name) is interned, held once; what
// is a VM's own is its decoded string, nothing larger; the indexes hold
// a key's hash and its VMs, not the key (see vmIndex).
type invState struct {
	vms      map[string]*vmRecord // by managed object ID
	entities map[types.ManagedObjectReference]entity
	byUUID   *vmIndex // lowercase BIOS UUID
	byName   *vmIndex
	byIP     *vmIndex
	byDNS    *vmIndex // backends.DNSNameKey of guest.hostName
	// networks interns the NICs' network names, which backends.NIC holds
	// as strings (see nics).
	networks map[string]string
	// hostGroups are the DRS host groups of each cluster whose
	// configurationEx was read (an empty list: read, none), held apart
	// from the entities: only a backend that reads them (zones from host
	// groups) has any, and a cluster has a few. A VM's are resolved at
	// read time (placed), so a host moved between groups costs no VM
	// record a write.
	hostGroups map[types.ManagedObjectReference][]hostGroup
}

// hostGroup is one ClusterHostGroup: its name and its hosts' IDs.
type hostGroup struct {
	name  string
	hosts []string
}

type vmRecord struct {
	vm                 vmFields
	parent, parentVApp interned[types.ManagedObjectReference]
}

// interned is a value held once however many records hold it, through a
// unique.Handle: 8 bytes a record, and strings copied out of the decoded
// update (unique.Make clones them), so that no decoded value outlives its
// update. Its zero value is T's.
type interned[T comparable] struct{ h unique.Handle[T] }

func intern[T comparable](v T) interned[T] {
	var zero T
	if v == zero {
		return interned[T]{}
	}
	return interned[T]{unique.Make(v)}
}

func (i interned[T]) get() T {
	if i == (interned[T]{}) {
		var zero T
		return zero
	}
	return i.h.Value()
}

// vmFields is what a VM record holds of a backends.VM: the properties
// read, not what invState.placed resolves from the entities at read time
// (datacenter, host name, cluster, resource pool path), whose empty
// string headers would cost every VM held 96 bytes. A field added to both
// is copied by placed.
type vmFields struct {
	ID                        string
	Name, UUID                string
	PowerState                interned[backends.PowerState]
	ConnectionState           interned[string]
	NumCPU, MemoryMB          int32
	GuestID                   interned[string]
	GuestHostName             string
	NICs                      []backends.NIC
	GuestInfoMetadata         string
	GuestInfoMetadataEncoding interned[string]
	Host                      interned[string]
	// ResourcePool is backends.VM's ResourcePool (Value) and
	// ResourcePoolType (Type).
	ResourcePool    interned[types.ManagedObjectReference]
	DiskEnableUUID  interned[string]
	HardwareVersion interned[string]
}

type entity struct {
	name   string
	parent types.ManagedObjectReference // zero at the top of the view
}

func newInvState() *invState {
	s := &invState{
		vms:        map[string]*vmRecord{},
		entities:   map[types.ManagedObjectReference]entity{},
		hostGroups: map[types.ManagedObjectReference][]hostGroup{},
	}
	seed := maphash.MakeSeed()
	s.byUUID = newVMIndex(seed, func(r *vmRecord, k string) bool { return r.vm.UUID == k })
	s.byName = newVMIndex(seed, func(r *vmRecord, k string) bool { return r.vm.Name == k })
	s.byIP = newVMIndex(seed, func(r *vmRecord, k string) bool {
		return slices.ContainsFunc(r.vm.NICs, func(n backends.NIC) bool { return slices.Contains(n.IPs, k) })
	})
	s.byDNS = newVMIndex(seed, func(r *vmRecord, k string) bool { return backends.DNSNameKey(r.vm.GuestHostName) == k })
	return s
}

// apply folds a batch of object updates into s.
func (s *invState) apply(updates []types.ObjectUpdate) {
	for _, u := range updates {
		if u.Obj.Type != "VirtualMachine" {
			s.applyEntity(u)
			continue
		}
		id := u.Obj.Value
		rec := s.vms[id]
		if rec != nil {
			s.unindex(rec)
		}
		if u.Kind == types.ObjectUpdateKindLeave {
			delete(s.vms, id)
			continue
		}
		// An enter holds every property the VM has: what an earlier
		// record held (a snapshot's) and it leaves out is unset now.
		if rec == nil || u.Kind == types.ObjectUpdateKindEnter {
			rec = &vmRecord{vm: vmFields{ID: id}}
			s.vms[id] = rec
		}
		for _, c := range u.ChangeSet {
			if set, ok := vmSetters[c.Name]; ok {
				set(s, rec, changeVal(c))
			}
		}
		s.index(rec)
	}
}

func (s *invState) applyEntity(u types.ObjectUpdate) {
	if u.Kind == types.ObjectUpdateKindLeave {
		delete(s.entities, u.Obj)
		delete(s.hostGroups, u.Obj)
		return
	}
	var e entity // an enter holds every property, as for a VM
	if u.Kind != types.ObjectUpdateKindEnter {
		e = s.entities[u.Obj]
	} else {
		delete(s.hostGroups, u.Obj)
	}
	for _, c := range u.ChangeSet {
		v := changeVal(c)
		switch c.Name {
		case "name":
			e.name = stringVal(v)
		case "parent":
			e.parent = refVal(v)
		case "parentVApp":
			// A vApp nested in another has no parent but a parentVApp.
			if r := refVal(v); r.Value != "" {
				e.parent = r
			}
		case "configurationEx":
			s.hostGroups[u.Obj] = hostGroupsOf(v)
		}
	}
	s.entities[u.Obj] = e
}

// hostGroupsOf keeps of a cluster's configurationEx its host groups
// (names and hosts), sorted by name; the rest of the configuration (VM
// groups, rules, overrides: it may list every VM) is garbage once read.
// A value that is no cluster's configuration holds none.
func hostGroupsOf(v any) []hostGroup {
	var cfg *types.ClusterConfigInfoEx
	switch c := v.(type) {
	case *types.ClusterConfigInfoEx:
		cfg = c
	case types.ClusterConfigInfoEx:
		cfg = &c
	}
	out := []hostGroup{} // read: not nil
	if cfg == nil {
		return out
	}
	for _, g := range cfg.Group {
		hg, ok := g.(*types.ClusterHostGroup)
		if !ok {
			continue // a VM group
		}
		hosts := make([]string, 0, len(hg.Host))
		for _, h := range hg.Host {
			hosts = append(hosts, strings.Clone(h.Value))
		}
		slices.Sort(hosts)
		out = append(out, hostGroup{name: strings.Clone(hg.Name), hosts: slices.Compact(hosts)})
	}
	slices.SortFunc(out, func(a, b hostGroup) int { return strings.Compare(a.name, b.name) })
	return out
}

// applyContent folds a RetrievePropertiesEx page into s, each object as
// the enter a watch would send for it, and returns how many it held.
func (s *invState) applyContent(objs []types.ObjectContent) int {
	var u [1]types.ObjectUpdate
	var changes []types.PropertyChange // reused: the setters keep no change
	for _, oc := range objs {
		changes = changes[:0]
		for _, p := range oc.PropSet {
			changes = append(changes, types.PropertyChange{Name: p.Name, Op: types.PropertyChangeOpAssign, Val: p.Val})
		}
		u[0] = types.ObjectUpdate{Kind: types.ObjectUpdateKindEnter, Obj: oc.Obj, ChangeSet: changes}
		s.apply(u[:])
	}
	return len(objs)
}

// keepOnly drops every VM and entity seen does not hold: a watch's
// initial set, applied over a snapshot, drops what left between the two.
func (s *invState) keepOnly(seen map[types.ManagedObjectReference]struct{}) {
	for id, rec := range s.vms {
		if _, ok := seen[types.ManagedObjectReference{Type: "VirtualMachine", Value: id}]; !ok {
			s.unindex(rec)
			delete(s.vms, id)
		}
	}
	for ref := range s.entities {
		if _, ok := seen[ref]; !ok {
			delete(s.entities, ref)
			delete(s.hostGroups, ref)
		}
	}
}

// index adds rec under its keys.
func (s *invState) index(rec *vmRecord) { s.eachKey(rec, (*vmIndex).add) }

// unindex removes rec from under its keys, as index added it: rec is
// unindexed before it changes.
func (s *invState) unindex(rec *vmRecord) { s.eachKey(rec, (*vmIndex).del) }

// eachKey calls fn with each index and key rec is held under.
func (s *invState) eachKey(rec *vmRecord, fn func(x *vmIndex, key string, rec *vmRecord)) {
	vm := &rec.vm
	fn(s.byUUID, vm.UUID, rec)
	fn(s.byName, vm.Name, rec)
	fn(s.byDNS, backends.DNSNameKey(vm.GuestHostName), rec)
	for _, n := range vm.NICs {
		for _, ip := range n.IPs {
			fn(s.byIP, ip, rec)
		}
	}
}

// appendUUIDs appends the BIOS UUIDs held to out, each once.
func (s *invState) appendUUIDs(out []string) []string {
	x := s.byUUID
	for _, r := range x.one {
		out = append(out, r.vm.UUID)
	}
	for _, recs := range x.many {
		start := len(out)
		for _, r := range recs {
			if !slices.Contains(out[start:], r.vm.UUID) {
				out = append(out, r.vm.UUID)
			}
		}
	}
	return out
}

// vmIndex finds the VMs holding a key (a UUID, a name, an address) among
// a vCenter's every VM. It holds a key's hash, not the key: the record
// holds that. A map slot is 16 bytes where a map[string][]string's was
// 40, with a slice per key. A lookup keeps the VMs that hold the key
// (holds), as two keys may share a hash. Two keys of one VM sharing a
// hash (odds of 2^-64 a pair) are indexed as one, and unindexed with the
// first: a lookup misses it until the VM changes, and the inventory's
// miss is never absence (the backend asks vCenter).
type vmIndex struct {
	seed  maphash.Seed
	holds func(rec *vmRecord, key string) bool
	one   map[uint64]*vmRecord   // a hash one VM holds
	many  map[uint64][]*vmRecord // a hash VMs share; never written into
}

func newVMIndex(seed maphash.Seed, holds func(*vmRecord, string) bool) *vmIndex {
	return &vmIndex{seed: seed, holds: holds, one: map[uint64]*vmRecord{}, many: map[uint64][]*vmRecord{}}
}

func (x *vmIndex) add(key string, rec *vmRecord) {
	if key == "" {
		return
	}
	h := maphash.String(x.seed, key)
	if r, ok := x.one[h]; ok {
		if r != rec {
			delete(x.one, h)
			x.many[h] = []*vmRecord{r, rec}
		}
		return
	}
	if recs, ok := x.many[h]; ok {
		if !slices.Contains(recs, rec) {
			x.many[h] = append(slices.Clip(recs), rec)
		}
		return
	}
	x.one[h] = rec
}

func (x *vmIndex) del(key string, rec *vmRecord) {
	if key == "" {
		return
	}
	h := maphash.String(x.seed, key)
	if x.one[h] == rec {
		delete(x.one, h)
		return
	}
	recs := x.many[h]
	switch i := slices.Index(recs, rec); {
	case i < 0:
	case len(recs) == 2:
		delete(x.many, h)
		x.one[h] = recs[1-i]
	default:
		x.many[h] = slices.Concat(recs[:i], recs[i+1:])
	}
}

// appendIDs appends to dst the IDs of the VMs holding key.
func (x *vmIndex) appendIDs(dst []string, key string) []string {
	h := maphash.String(x.seed, key)
	if r, ok := x.one[h]; ok {
		if x.holds(r, key) {
			dst = append(dst, r.vm.ID)
		}
		return dst
	}
	for _, r := range x.many[h] {
		if x.holds(r, key) {
			dst = append(dst, r.vm.ID)
		}
	}
	return dst
}

// len is the number of hashes held: of keys, but for a shared hash.
func (x *vmIndex) len() int { return len(x.one) + len(x.many) }

// vm copies a VM record with its datacenter; ok is false when the record
// is missing or its ancestry does not reach a datacenter.
func (s *invState) vm(id string) (backends.VM, bool) {
	rec, ok := s.vms[id]
	if !ok {
		return backends.VM{}, false
	}
	vm := s.placed(rec)
	return vm, vm.Ref.Datacenter != ""
}

// placed copies a VM record with what is resolved from the entities above
// it: its datacenter (name, ID and path; "" when its ancestry, as held,
// does not reach one), its host's name and cluster, and its resource
// pool's path. The one place these are resolved, for the inventory and
// direct reads alike; resolved at read time, so a VM costs no memory for
// names its host or pool already holds, and a move or a rename is seen at
// once.
func (s *invState) placed(rec *vmRecord) backends.VM {
	f := &rec.vm
	pool := f.ResourcePool.get()
	vm := backends.VM{
		Ref:  backends.VMRef{ID: f.ID},
		Name: f.Name, UUID: f.UUID,
		PowerState: f.PowerState.get(), ConnectionState: f.ConnectionState.get(),
		NumCPU: f.NumCPU, MemoryMB: f.MemoryMB,
		GuestID: f.GuestID.get(), GuestHostName: f.GuestHostName,
		NICs:              f.NICs,
		GuestInfoMetadata: f.GuestInfoMetadata, GuestInfoMetadataEncoding: f.GuestInfoMetadataEncoding.get(),
		Host:         f.Host.get(),
		ResourcePool: pool.Value, ResourcePoolType: pool.Type,
		DiskEnableUUID: f.DiskEnableUUID.get(), HardwareVersion: f.HardwareVersion.get(),
	}
	var up [16]types.ManagedObjectReference // deeper: appendAncestors grows it
	if i := slices.IndexFunc(s.appendAncestors(up[:0], rec.up()), isDatacenter); i >= 0 {
		dc := s.datacenter(up[i])
		vm.Ref.Datacenter, vm.DatacenterID, vm.DatacenterPath = dc.Name, dc.ID, dc.Path
	}
	if vm.Host != "" {
		if h, ok := s.entities[types.ManagedObjectReference{Type: "HostSystem", Value: vm.Host}]; ok {
			vm.HostName = h.name
			// A standalone host's parent is a plain ComputeResource: in
			// no host group, known without reading one.
			vm.HostGroupsKnown = h.parent.Type == "ComputeResource"
			if h.parent.Type == "ClusterComputeResource" {
				vm.Cluster = s.entities[h.parent].name
				vm.HostGroups, vm.HostGroupsKnown = s.groupsOf(h.parent, vm.Host)
			}
		}
	}
	if pool.Value != "" {
		vm.ResourcePoolPath = s.path(pool)
	}
	return vm
}

// groupsOf lists the names of cluster's host groups that hold host;
// known is false when the cluster's configuration was not read (a backend
// that does not read host groups).
func (s *invState) groupsOf(cluster types.ManagedObjectReference, host string) (names []string, known bool) {
	groups, known := s.hostGroups[cluster]
	for _, g := range groups {
		if _, found := slices.BinarySearch(g.hosts, host); found {
			names = append(names, g.name)
		}
	}
	return names, known
}

// path is ref's inventory path ("/folder/dc-east/host/cluster/Resources",
// as govmomi's finder writes it) when its ancestors are held up to the
// root folder, "" otherwise.
func (s *invState) path(ref types.ManagedObjectReference) string {
	// Names are gathered on the stack, nearest first, then written from
	// the top: one allocation, the path's.
	var names [maxDepth]string
	n, size := 0, 0
	for r := ref; ; {
		e, ok := s.entities[r]
		if !ok || n == maxDepth {
			return "" // the root folder, the one entity without a parent, is not reached
		}
		if e.parent.Value == "" {
			break // the root folder is no part of the path
		}
		names[n], size, n = e.name, size+1+len(e.name), n+1
		r = e.parent
	}
	var b strings.Builder
	b.Grow(size)
	for i := n - 1; i >= 0; i-- {
		b.WriteByte('/')
		b.WriteString(names[i])
	}
	return b.String()
}

// datacenter is the datacenter ref as held: its name, its ID, and its
// inventory path ("/folder/dc-east", see path).
func (s *invState) datacenter(ref types.ManagedObjectReference) config.Datacenter {
	return config.Datacenter{Name: s.entities[ref].name, ID: ref.Value, Path: s.path(ref)}
}

// datacenters lists the datacenters held, by name, then ID.
func (s *invState) datacenters() []config.Datacenter {
	var out []config.Datacenter
	for r := range s.entities {
		if r.Type == "Datacenter" {
			out = append(out, s.datacenter(r))
		}
	}
	slices.SortFunc(out, func(a, b config.Datacenter) int { return cmp.Or(cmp.Compare(a.Name, b.Name), cmp.Compare(a.ID, b.ID)) })
	return out
}

func isDatacenter(r types.ManagedObjectReference) bool { return r.Type == "Datacenter" }

// up is where a VM's ancestry starts: its folder, or its vApp.
func (r *vmRecord) up() types.ManagedObjectReference {
	if p := r.parent.get(); p.Value != "" {
		return p
	}
	return r.parentVApp.get()
}

// maxDepth bounds a walk up the inventory, whose depth is bounded: it
// guards against a cycle.
const maxDepth = 64

// appendAncestors appends ref and its ancestors held to buf, nearest
// first; it stops at the first one not held.
func (s *invState) appendAncestors(buf []types.ManagedObjectReference, ref types.ManagedObjectReference) []types.ManagedObjectReference {
	for range maxDepth {
		e, ok := s.entities[ref]
		if !ok {
			break
		}
		buf = append(buf, ref)
		if e.parent.Value == "" {
			break
		}
		ref = e.parent
	}
	return buf
}

// tagAncestries lists, in CPI's order, the ancestries whose tags place vm, each
// nearest first (see tagRoots): its host and what holds the host, its
// resource pool and what holds that, the VM and its folders; each as far
// as s holds it. complete is false when s lacks one of those roots or the
// VM's folders do not reach a datacenter. The ancestries share one array:
// a drift check per Node per pass walks them (see Backend.Placement).
func (s *invState) tagAncestries(vm *backends.VM) (ancestries [][]types.ManagedObjectReference, complete bool) {
	roots := tagRoots(vm)
	buf := make([]types.ManagedObjectReference, 0, 8*len(roots))
	ancestries = make([][]types.ManagedObjectReference, 0, len(roots))
	complete = true
	for _, root := range roots {
		start := len(buf)
		if root.Type != "VirtualMachine" {
			_, held := s.entities[root]
			complete = complete && held
			buf = s.appendAncestors(buf, root)
		} else {
			rec, held := s.vms[root.Value]
			if !held {
				complete = false
				ancestries = append(ancestries, nil)
				continue
			}
			buf = s.appendAncestors(append(buf, root), rec.up())
			complete = complete && slices.ContainsFunc(buf[start+1:], isDatacenter) // its folders reach one
		}
		// Capped: a later append never writes into an earlier ancestry.
		ancestries = append(ancestries, buf[start:len(buf):len(buf)])
	}
	return ancestries, complete
}

// vmProperty is one VM property the CCM reads: its path, and how its
// value sets a VM record (val is nil when the property is unset or was
// removed). A setter replaces a slice, never writes into one: VMs handed
// out share the record's. A setter keeps no decoded value larger than
// the string it needs: the decoded update is garbage once applied. The
// one table below drives both ways a VM is read, a direct
// RetrieveProperties and the inventory's watch, as govmomi's
// mo/retrieve.go drives both from its types: a property added here is
// requested, read and followed alike.
type vmProperty struct {
	path string
	set  func(s *invState, r *vmRecord, val any)
}

// vmPropertyTable is every VM property read. Values that repeat from VM
// to VM are interned (see interned).
var vmPropertyTable = []vmProperty{
	{"name", func(_ *invState, r *vmRecord, v any) { r.vm.Name = stringVal(v) }},
	// Where its ancestry starts (see vmRecord.up): the datacenter and the
	// zone/region walks.
	{"parent", func(_ *invState, r *vmRecord, v any) { r.parent = intern(refVal(v)) }},
	{"parentVApp", func(_ *invState, r *vmRecord, v any) { r.parentVApp = intern(refVal(v)) }},
	{"config.uuid", func(_ *invState, r *vmRecord, v any) { r.vm.UUID = strings.ToLower(stringVal(v)) }},
	{"config.hardware.numCPU", func(_ *invState, r *vmRecord, v any) { r.vm.NumCPU, _ = v.(int32) }},
	{"config.hardware.memoryMB", func(_ *invState, r *vmRecord, v any) { r.vm.MemoryMB, _ = v.(int32) }},
	// The virtual hardware version ("vmx-19"): the vSphere CSI driver
	// needs a minimum (cloud/problems); a few values shared by every VM.
	{"config.version", func(_ *invState, r *vmRecord, v any) { r.vm.HardwareVersion = intern(stringVal(v)) }},
	{"config.guestId", func(_ *invState, r *vmRecord, v any) { r.vm.GuestID = intern(stringVal(v)) }},
	{"runtime.powerState", func(_ *invState, r *vmRecord, v any) {
		s, _ := v.(types.VirtualMachinePowerState)
		r.vm.PowerState = intern(backends.PowerState(s))
	}},
	{"runtime.connectionState", func(_ *invState, r *vmRecord, v any) {
		s, _ := v.(types.VirtualMachineConnectionState)
		r.vm.ConnectionState = intern(string(s))
	}},
	{"runtime.host", func(_ *invState, r *vmRecord, v any) { r.vm.Host = intern(refVal(v).Value) }},
	{"resourcePool", func(_ *invState, r *vmRecord, v any) {
		p := refVal(v)
		r.vm.ResourcePool = intern(types.ManagedObjectReference{Type: p.Type, Value: p.Value})
	}},
	{"guest.hostName", func(_ *invState, r *vmRecord, v any) { r.vm.GuestHostName = stringVal(v) }},
	{"guest.net", func(s *invState, r *vmRecord, v any) {
		a, _ := v.(types.ArrayOfGuestNicInfo)
		r.vm.NICs = s.nics(a.GuestNicInfo)
	}},
	// By keyed path: the whole extraConfig can be large (cloud-init user
	// data).
	{`config.extraConfig["guestinfo.metadata"]`, func(_ *invState, r *vmRecord, v any) { r.vm.GuestInfoMetadata = extraConfigString(v) }},
	{`config.extraConfig["guestinfo.metadata.encoding"]`, func(_ *invState, r *vmRecord, v any) {
		r.vm.GuestInfoMetadataEncoding = intern(extraConfigString(v))
	}},
	{`config.extraConfig["disk.EnableUUID"]`, func(_ *invState, r *vmRecord, v any) { r.vm.DiskEnableUUID = intern(extraConfigString(v)) }},
}

// vmProperties are the paths of vmPropertyTable, what both reads request;
// vmSetters its setters by path.
var vmProperties, vmSetters = func() ([]string, map[string]func(*invState, *vmRecord, any)) {
	paths := make([]string, len(vmPropertyTable))
	setters := make(map[string]func(*invState, *vmRecord, any), len(vmPropertyTable))
	for i, p := range vmPropertyTable {
		paths[i], setters[p.path] = p.path, p.set
	}
	return paths, setters
}()

// changeVal is c's new value: nil when the property was removed.
func changeVal(c types.PropertyChange) any {
	if c.Op == types.PropertyChangeOpRemove || c.Op == types.PropertyChangeOpIndirectRemove {
		return nil
	}
	return c.Val
}

func stringVal(v any) string {
	s, _ := v.(string)
	return s
}

func refVal(v any) types.ManagedObjectReference {
	r, _ := v.(types.ManagedObjectReference)
	return r
}

// extraConfigString is the string value of an extraConfig option, "" for
// any other value (CPI ignores them too).
func extraConfigString(v any) string {
	var o *types.OptionValue
	switch x := v.(type) {
	case types.OptionValue:
		o = &x
	case *types.OptionValue:
		o = x
	default:
		return ""
	}
	s, _ := o.Value.(string)
	return s
}

// nics converts the guest's NICs: one array for the NICs and one for
// all their addresses (each NIC's capped: VMs handed out share them), the
// network names interned; the decoded NICs, with the guest's IP, DNS and
// routing configuration, are not kept.
func (s *invState) nics(net []types.GuestNicInfo) []backends.NIC {
	if len(net) == 0 {
		return nil
	}
	n := 0
	for _, x := range net {
		n += len(x.IpAddress)
	}
	ips := make([]string, 0, n)
	out := make([]backends.NIC, len(net))
	for i, x := range net {
		nic := backends.NIC{Network: s.network(x.Network), MAC: x.MacAddress, DeviceConfigID: x.DeviceConfigId}
		if x.IpAddress != nil {
			start := len(ips)
			ips = append(ips, x.IpAddress...)
			nic.IPs = ips[start:len(ips):len(ips)]
		}
		out[i] = nic
	}
	return out
}

// network is name as s holds it: one copy per name however many NICs are
// on it.
func (s *invState) network(name string) string {
	if held, ok := s.networks[name]; ok || name == "" {
		return held
	}
	if s.networks == nil {
		s.networks = map[string]string{}
	}
	name = strings.Clone(name)
	s.networks[name] = name
	return name
}
