package vsphere

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vmware/govmomi/vim25/types"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/backends"
)

// A VM read directly equals the same VM read through the inventory in
// every field of backends.VM, and the test VM sets every one of them: a
// field added to backends.VM that the property table (or invState.placed)
// does not fill fails here, whichever read forgot it. The test VM runs on
// a host in a cluster, in a resource pool, with disk.EnableUUID set.
func TestDirectAndInventoryReadsAgreeInEveryField(t *testing.T) {
	fx := newInvFixture(t, time.Minute, 5*time.Second, nil)
	ctx := ctxFor(t)
	want := fx.vc.VMs[0]
	if err := fx.vc.SetExtraConfig(ctx, want, "guestinfo.metadata", "aW5zdGFuY2UtaWQ6IHgK"); err != nil {
		t.Fatal(err)
	}
	if err := fx.vc.SetExtraConfig(ctx, want, "guestinfo.metadata.encoding", "base64"); err != nil {
		t.Fatal(err)
	}
	if err := fx.vc.SetExtraConfig(ctx, want, "disk.EnableUUID", "TRUE"); err != nil {
		t.Fatal(err)
	}
	if err := fx.vc.SetHostGroup(ctx, "DC0_C0", "site-a", want.Host); err != nil {
		t.Fatal(err)
	}
	ref := backends.VMRef{Datacenter: want.Datacenter, ID: want.Ref}
	direct, err := fx.direct.Get(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	var held *backends.VM
	fx.eventually("the inventory holds the VM as vCenter has it", func() bool {
		vm, ok := fx.b.inv.get(ref)
		held = vm
		return ok && vm.GuestInfoMetadataEncoding != "" && vm.DiskEnableUUID != "" && len(vm.HostGroups) > 0
	})
	if !direct.DiskUUIDEnabled() || direct.Cluster == "" || !strings.HasPrefix(direct.ResourcePoolPath, direct.DatacenterPath+"/host/"+direct.Cluster+"/") {
		t.Errorf("direct read: disk.EnableUUID %q, cluster %q, resource pool %q in datacenter %q; want TRUE, the pool in the cluster", direct.DiskEnableUUID, direct.Cluster, direct.ResourcePoolPath, direct.DatacenterPath)
	}
	compareEveryField(t, "VM", reflect.ValueOf(*direct), reflect.ValueOf(*held))
	t.Logf("placed: host %q, cluster %q, resource pool %q", direct.HostName, direct.Cluster, direct.ResourcePoolPath)

	// The direct read places the VM, its host's name included, in one
	// PropertyCollector call.
	before, _ := fx.vc.SOAPCalls()
	if _, err := fx.direct.Get(ctx, ref); err != nil {
		t.Fatal(err)
	}
	after, _ := fx.vc.SOAPCalls()
	if n := after["RetrieveProperties"] + after["RetrievePropertiesEx"] - before["RetrieveProperties"] - before["RetrievePropertiesEx"]; n != 1 {
		t.Errorf("a direct read made %d property collector calls, want 1", n)
	}
}

// compareEveryField fails for each field, down to the leaves of structs
// and slices, that is zero in the direct read or differs between the two.
func compareEveryField(t *testing.T, path string, direct, held reflect.Value) {
	t.Helper()
	switch direct.Kind() {
	case reflect.Struct:
		for i := range direct.NumField() {
			f := direct.Type().Field(i)
			compareEveryField(t, path+"."+f.Name, direct.Field(i), held.Field(i))
		}
		return
	case reflect.Slice:
		if direct.Len() == 0 {
			t.Errorf("%s is empty in the direct read: the property table does not fill it, or the test VM lacks it", path)
		}
		if direct.Len() != held.Len() {
			t.Errorf("%s: direct read has %d, the inventory %d", path, direct.Len(), held.Len())
			return
		}
		for i := range direct.Len() {
			compareEveryField(t, fmt.Sprintf("%s[%d]", path, i), direct.Index(i), held.Index(i))
		}
		return
	}
	if direct.IsZero() {
		t.Errorf("%s is zero in the direct read: the property table does not fill it, or the test VM lacks it", path)
	}
	if !reflect.DeepEqual(direct.Interface(), held.Interface()) {
		t.Errorf("%s: direct read %v, the inventory %v", path, direct.Interface(), held.Interface())
	}
}

// Every property of the table is requested by both reads, and nothing
// else is: a property read but not requested would stay zero in one.
func TestBothReadsRequestEveryTableProperty(t *testing.T) {
	vmPaths := func(spec types.PropertyFilterSpec) []string {
		for _, ps := range spec.PropSet {
			if ps.Type == "VirtualMachine" {
				return ps.PathSet
			}
		}
		return nil
	}
	specs := map[string]types.PropertyFilterSpec{
		"the watch":   filterSpec(types.ManagedObjectReference{Type: "ContainerView", Value: "session[1]view"}),
		"direct read": ancestrySpec([]types.ManagedObjectReference{vmRef("vm-1")}),
	}
	for name, spec := range specs {
		got := vmPaths(spec)
		for _, p := range vmPropertyTable {
			if !slices.Contains(got, p.path) {
				t.Errorf("%s does not request %q", name, p.path)
			}
		}
		for _, path := range got {
			if !slices.ContainsFunc(vmPropertyTable, func(p vmProperty) bool { return p.path == path }) {
				t.Errorf("%s requests %q, which the property table does not read", name, path)
			}
		}
	}
	seen := map[string]bool{}
	for _, p := range vmPropertyTable {
		if seen[p.path] {
			t.Errorf("%q is twice in the property table", p.path)
		}
		seen[p.path] = true
	}
}

// A VM record's every field (vmFields) reaches the VM placed hands out,
// under the same name: an interned reference as its Value, and its Type
// as the field named so followed by Type.
func TestPlacedCopiesEveryRecordField(t *testing.T) {
	var rec vmRecord
	f := reflect.ValueOf(&rec.vm).Elem()
	want := map[string]any{} // backends.VM's field -> its value
	for i := range f.NumField() {
		name := f.Type().Field(i).Name
		switch v := f.Field(i); v.Interface().(type) {
		case string:
			v.SetString(name)
			want[name] = name
		case int32:
			v.SetInt(int64(i + 1))
			want[name] = int32(i + 1)
		case []backends.NIC:
			v.Set(reflect.MakeSlice(v.Type(), 1, 1))
			want[name] = v.Interface()
		case interned[string]:
			v.Set(reflect.ValueOf(intern(name)))
			want[name] = name
		case interned[backends.PowerState]:
			v.Set(reflect.ValueOf(intern(backends.PowerState(name))))
			want[name] = backends.PowerState(name)
		case interned[types.ManagedObjectReference]:
			v.Set(reflect.ValueOf(intern(types.ManagedObjectReference{Type: "T" + name, Value: name})))
			want[name], want[name+"Type"] = name, "T"+name
		default:
			t.Fatalf("vmFields.%s: type %s not handled by this test", name, v.Type())
		}
	}
	vm := reflect.ValueOf(newInvState().placed(&rec))
	for name, w := range want {
		got := vm.FieldByName(name)
		if name == "ID" {
			got = vm.FieldByName("Ref").FieldByName("ID")
		}
		if !got.IsValid() || !reflect.DeepEqual(got.Interface(), w) {
			t.Errorf("vmFields.%s = %v is not copied to backends.VM.%s", name, w, name)
		}
	}
}

// A VM's hardware version (config.version) is read directly and followed
// by the inventory as it changes: the periodic check reads it from memory.
func TestHardwareVersionReadAndFollowed(t *testing.T) {
	fx := newInvFixture(t, time.Minute, 5*time.Second, nil)
	ctx := ctxFor(t)
	vm := fx.vc.VMs[0]
	ref := backends.VMRef{Datacenter: vm.Datacenter, ID: vm.Ref}
	for _, version := range []string{"vmx-13", "vmx-19"} {
		fx.vc.SetHardwareVersion(vm, version)
		if got, err := fx.direct.Get(ctx, ref); err != nil || got.HardwareVersion != version {
			t.Fatalf("direct read: %+v, %v; want hardware version %s", got, err, version)
		}
		fx.eventually("the inventory holds "+version, func() bool {
			held, ok := fx.b.inv.get(ref)
			return ok && held.HardwareVersion == version
		})
	}
}
