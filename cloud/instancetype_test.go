package cloud_test

import (
	"testing"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/backends"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/cloud"
)

func TestInstanceType(t *testing.T) {
	tests := []struct {
		numCPU   int32
		memoryMB int32
		guestID  string
		want     string
	}{
		{4, 8192, "ubuntu64Guest", "vsphere-vm.cpu-4.mem-8gb.os-ubuntu"},
		{2, 4096, "someFutureGuest", "vsphere-vm.cpu-2.mem-4gb.os-unknown"},
		{2, 4096, "", "vsphere-vm.cpu-2.mem-4gb.os-unknown"},
		{1, 1536, "centos7_64Guest", "vsphere-vm.cpu-1.mem-1gb.os-centos7"},    // integer division, as CPI
		{1, 1023, "vmwarePhoton64Guest", "vsphere-vm.cpu-1.mem-0gb.os-photon"}, // under 1 GiB
		{16, 65536, "windows9Server64Guest", "vsphere-vm.cpu-16.mem-64gb.os-win10server"},
	}
	for _, tt := range tests {
		vm := &backends.VM{NumCPU: tt.numCPU, MemoryMB: tt.memoryMB, GuestID: tt.guestID}
		if got := cloud.InstanceType(vm); got != tt.want {
			t.Errorf("InstanceType(cpu %d, mem %d MB, %q) = %q, want %q", tt.numCPU, tt.memoryMB, tt.guestID, got, tt.want)
		}
	}
}

func TestGuestOSShortName(t *testing.T) {
	for id, want := range map[string]string{
		"windows9_64Guest":    "win10",
		"windows9Guest":       "win10",
		"redhatGuest":         "rhel",
		"rhel7_64Guest":       "rhel7",
		"centos64Guest":       "centos64",
		"centosGuest":         "centos",
		"vmwarePhoton64Guest": "photon",
		"otherGuest64":        "other",
		"otherGuest":          "other",
		"otherLinux64Guest":   "linux",
		"ubuntuGuest":         "ubuntu",
		"darwin16_64Guest":    "darwin",
		"winXPPro64Guest":     "winxppro",
		"":                    "unknown",
		"UBUNTU64GUEST":       "unknown", // guest ids are case-sensitive
		"ubuntu64Guest ":      "unknown",
		"rhel9_64Guest":       "unknown", // not in CPI's table
	} {
		if got := cloud.GuestOSShortName(id); got != want {
			t.Errorf("GuestOSShortName(%q) = %q, want %q", id, got, want)
		}
	}
}
