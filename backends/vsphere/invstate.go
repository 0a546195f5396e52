package vsphere

// invState: what the inventory holds, its indexes, and what is resolved
// from it at read time.

import (
	"cmp"
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
// is a VM's own is its decoded string, nothing larger; an index key one
// VM holds alone costs no slice of its own (see index).
type invState struct {
	vms      map[string]*vmRecord // by managed object ID
	entities map[types.ManagedObjectReference]entity
	// The indexes: a key's VM IDs, never written into (a key of one VM
	// is its vmFields.ID).
	byUUID map[string][]string // lowercase BIOS UUID -> VM IDs
	byName map[string][]string
	byIP   map[string][]string
	byDNS  map[string][]string // backends.DNSNameKey of guest.hostName
	// networks interns the NICs' network names, which backends.NIC holds
	// as strings (see nics).
	networks map[string]string
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
	// ID is an array of one: an index key that this VM alone holds is a
	// slice of it (see index).
	ID                        [1]string
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
	ResourcePool   interned[types.ManagedObjectReference]
	DiskEnableUUID interned[string]
}

type entity struct {
	name   string
	parent types.ManagedObjectReference // zero at the top of the view
}

func newInvState() *invState {
	return &invState{
		vms:      map[string]*vmRecord{},
		entities: map[types.ManagedObjectReference]entity{},
		byUUID:   map[string][]string{},
		byName:   map[string][]string{},
		byIP:     map[string][]string{},
		byDNS:    map[string][]string{},
	}
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
			s.unindex(id, &rec.vm)
		}
		if u.Kind == types.ObjectUpdateKindLeave {
			delete(s.vms, id)
			continue
		}
		if rec == nil {
			rec = &vmRecord{vm: vmFields{ID: [1]string{id}}}
			s.vms[id] = rec
		}
		for _, c := range u.ChangeSet {
			s.set(rec, c)
		}
		s.index(rec.vm.ID[0], &rec.vm)
	}
}

func (s *invState) applyEntity(u types.ObjectUpdate) {
	if u.Kind == types.ObjectUpdateKindLeave {
		delete(s.entities, u.Obj)
		return
	}
	e := s.entities[u.Obj]
	for _, c := range u.ChangeSet {
		v := c.Val
		if c.Op == types.PropertyChangeOpRemove || c.Op == types.PropertyChangeOpIndirectRemove {
			v = nil
		}
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
		}
	}
	s.entities[u.Obj] = e
}

// index adds the VM vm (of ID id) under its keys. A key held by this VM
// alone gets vm.ID as its slice, without an allocation: the usual case,
// a VM's UUID, name, DNS name and addresses being its own. A key that
// VMs share has an array of its own.
func (s *invState) index(id string, vm *vmFields) {
	add := func(m map[string][]string, k string) {
		if k == "" {
			return
		}
		ids, held := m[k]
		switch {
		case !held:
			m[k] = vm.ID[:]
		case !slices.Contains(ids, vm.ID[0]):
			m[k] = append(slices.Clip(ids), vm.ID[0]) // a new array: never written into another's
		}
	}
	add(s.byUUID, vm.UUID)
	add(s.byName, vm.Name)
	add(s.byDNS, backends.DNSNameKey(vm.GuestHostName))
	for _, n := range vm.NICs {
		for _, ip := range n.IPs {
			add(s.byIP, ip)
		}
	}
}

func (s *invState) unindex(id string, vm *vmFields) {
	del := func(m map[string][]string, k string) {
		ids := m[k]
		switch i := slices.Index(ids, id); {
		case i < 0:
		case len(ids) == 1:
			delete(m, k)
		case len(ids) == 2:
			// The VM left holds the key alone: its ID again (see index).
			if rec, ok := s.vms[ids[1-i]]; ok {
				m[k] = rec.vm.ID[:]
			} else {
				m[k] = []string{ids[1-i]}
			}
		default:
			m[k] = slices.Concat(ids[:i], ids[i+1:])
		}
	}
	del(s.byUUID, vm.UUID)
	del(s.byName, vm.Name)
	del(s.byDNS, backends.DNSNameKey(vm.GuestHostName))
	for _, n := range vm.NICs {
		for _, ip := range n.IPs {
			del(s.byIP, ip)
		}
	}
}

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
		Ref:  backends.VMRef{ID: f.ID[0]},
		Name: f.Name, UUID: f.UUID,
		PowerState: f.PowerState.get(), ConnectionState: f.ConnectionState.get(),
		NumCPU: f.NumCPU, MemoryMB: f.MemoryMB,
		GuestID: f.GuestID.get(), GuestHostName: f.GuestHostName,
		NICs:              f.NICs,
		GuestInfoMetadata: f.GuestInfoMetadata, GuestInfoMetadataEncoding: f.GuestInfoMetadataEncoding.get(),
		Host:         f.Host.get(),
		ResourcePool: pool.Value, ResourcePoolType: pool.Type,
		DiskEnableUUID: f.DiskEnableUUID.get(),
	}
	ref := rec.up()
	for range maxDepth {
		e, ok := s.entities[ref]
		if !ok {
			break
		}
		if ref.Type == "Datacenter" {
			dc := s.datacenter(ref)
			vm.Ref.Datacenter, vm.DatacenterID, vm.DatacenterPath = dc.Name, dc.ID, dc.Path
			break
		}
		ref = e.parent
	}
	if vm.Host != "" {
		if h, ok := s.entities[types.ManagedObjectReference{Type: "HostSystem", Value: vm.Host}]; ok {
			vm.HostName = h.name
			// A standalone host's parent is a plain ComputeResource.
			if h.parent.Type == "ClusterComputeResource" {
				vm.Cluster = s.entities[h.parent].name
			}
		}
	}
	if pool.Value != "" {
		vm.ResourcePoolPath = s.path(pool)
	}
	return vm
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
			folders := buf[start+1:]
			complete = complete && slices.ContainsFunc(folders, func(r types.ManagedObjectReference) bool { return r.Type == "Datacenter" })
		}
		// Capped: a later append never writes into an earlier ancestry.
		ancestries = append(ancestries, buf[start:len(buf):len(buf)])
	}
	return ancestries, complete
}
