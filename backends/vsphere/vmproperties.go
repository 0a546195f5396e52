package vsphere

import (
	"strings"

	"github.com/vmware/govmomi/vim25/soap"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/backends"
)

// vmProperty is one VM property the CCM reads: its path, and how its
// value sets a VM record (val is nil when the property is unset or was
// removed). A setter replaces a slice, never writes into one: VMs handed
// out share the record's. The one table below drives both ways a VM is read, a direct
// RetrieveProperties and the inventory's watch, as govmomi's
// mo/retrieve.go drives both from its types: a property added here is
// requested, read and followed alike.
type vmProperty struct {
	path string
	set  func(r *vmRecord, val any)
}

// vmPropertyTable is every VM property read.
var vmPropertyTable = []vmProperty{
	{"name", func(r *vmRecord, v any) { r.vm.Name = stringVal(v) }},
	// Where its ancestry starts (see vmRecord.up): the datacenter and the
	// zone/region walks.
	{"parent", func(r *vmRecord, v any) { r.parent = refVal(v) }},
	{"parentVApp", func(r *vmRecord, v any) { r.parentVApp = refVal(v) }},
	{"config.uuid", func(r *vmRecord, v any) { r.vm.UUID = strings.ToLower(stringVal(v)) }},
	{"config.hardware.numCPU", func(r *vmRecord, v any) { r.vm.NumCPU, _ = v.(int32) }},
	{"config.hardware.memoryMB", func(r *vmRecord, v any) { r.vm.MemoryMB, _ = v.(int32) }},
	{"config.guestId", func(r *vmRecord, v any) { r.vm.GuestID = stringVal(v) }},
	{"runtime.powerState", func(r *vmRecord, v any) {
		s, _ := v.(types.VirtualMachinePowerState)
		r.vm.PowerState = backends.PowerState(s)
	}},
	{"runtime.connectionState", func(r *vmRecord, v any) {
		s, _ := v.(types.VirtualMachineConnectionState)
		r.vm.ConnectionState = string(s)
	}},
	{"runtime.host", func(r *vmRecord, v any) { r.vm.Host = refVal(v).Value }},
	{"resourcePool", func(r *vmRecord, v any) {
		p := refVal(v)
		r.vm.ResourcePool, r.vm.ResourcePoolType = p.Value, p.Type
	}},
	{"guest.hostName", func(r *vmRecord, v any) { r.vm.GuestHostName = stringVal(v) }},
	{"guest.net", func(r *vmRecord, v any) {
		a, _ := v.(types.ArrayOfGuestNicInfo)
		r.vm.NICs = nicsOf(a.GuestNicInfo)
	}},
	// By keyed path: the whole extraConfig can be large (cloud-init user
	// data).
	{`config.extraConfig["guestinfo.metadata"]`, func(r *vmRecord, v any) { r.vm.GuestInfoMetadata = extraConfigString(v) }},
	{`config.extraConfig["guestinfo.metadata.encoding"]`, func(r *vmRecord, v any) { r.vm.GuestInfoMetadataEncoding = extraConfigString(v) }},
	// Interned: one of a few values on every VM, held per VM otherwise.
	{`config.extraConfig["disk.EnableUUID"]`, func(r *vmRecord, v any) { r.vm.DiskEnableUUID = internFlag(extraConfigString(v)) }},
}

// vmProperties are the paths of vmPropertyTable: what both reads request.
var vmProperties = func() []string {
	out := make([]string, len(vmPropertyTable))
	for i, p := range vmPropertyTable {
		out[i] = p.path
	}
	return out
}()

// vmSetters are vmPropertyTable's setters by path.
var vmSetters = func() map[string]func(*vmRecord, any) {
	out := make(map[string]func(*vmRecord, any), len(vmPropertyTable))
	for _, p := range vmPropertyTable {
		out[p.path] = p.set
	}
	return out
}()

// set applies one property change, as read or as watched, to a VM record.
func (r *vmRecord) set(c types.PropertyChange) {
	set, ok := vmSetters[c.Name]
	if !ok {
		return
	}
	v := c.Val
	if c.Op == types.PropertyChangeOpRemove || c.Op == types.PropertyChangeOpIndirectRemove {
		v = nil
	}
	set(r, v)
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

// internFlag returns the literal of a usual boolean option value, so that
// every VM's copy shares it; anything else as is.
func internFlag(s string) string {
	for _, v := range [...]string{"TRUE", "true", "FALSE", "false", "1", "0", "True", "False"} {
		if s == v {
			return v
		}
	}
	return s
}

// nicsOf converts the guest's NICs.
func nicsOf(net []types.GuestNicInfo) []backends.NIC {
	var out []backends.NIC
	for _, n := range net {
		out = append(out, backends.NIC{Network: n.Network, MAC: n.MacAddress, IPs: n.IpAddress, DeviceConfigID: n.DeviceConfigId})
	}
	return out
}

// asUpdate is an object read directly as the watch would see it enter,
// so that one code path (invState.apply) reads both. A property vCenter
// could not read is an error, as govmomi's ObjectContentToType makes it.
func asUpdate(c types.ObjectContent) (types.ObjectUpdate, error) {
	for _, p := range c.MissingSet {
		return types.ObjectUpdate{}, soap.WrapVimFault(p.Fault.Fault)
	}
	u := types.ObjectUpdate{Kind: types.ObjectUpdateKindEnter, Obj: c.Obj, ChangeSet: make([]types.PropertyChange, len(c.PropSet))}
	for i, p := range c.PropSet {
		u.ChangeSet[i] = types.PropertyChange{Name: p.Name, Op: types.PropertyChangeOpAssign, Val: p.Val}
	}
	return u, nil
}
