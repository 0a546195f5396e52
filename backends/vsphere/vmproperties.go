package vsphere

import (
	"strings"

	"github.com/vmware/govmomi/vim25/types"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/backends"
)

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

// vmProperties are the paths of vmPropertyTable: what both reads request.
var vmProperties = func() []string {
	out := make([]string, len(vmPropertyTable))
	for i, p := range vmPropertyTable {
		out[i] = p.path
	}
	return out
}()

// vmSetters are vmPropertyTable's setters by path.
var vmSetters = func() map[string]func(*invState, *vmRecord, any) {
	out := make(map[string]func(*invState, *vmRecord, any), len(vmPropertyTable))
	for _, p := range vmPropertyTable {
		out[p.path] = p.set
	}
	return out
}()

// set applies one property change, as read or as watched, to a VM record.
func (s *invState) set(r *vmRecord, c types.PropertyChange) {
	if set, ok := vmSetters[c.Name]; ok {
		set(s, r, changeVal(c))
	}
}

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
