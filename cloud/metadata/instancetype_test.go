package metadata_test

import (
	"testing"

	"github.com/vmware/govmomi/vim25/types"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/backends"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/cloud/metadata"
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
		{8, 32768, "rhel9_64Guest", "vsphere-vm.cpu-8.mem-32gb.os-rhel9"},
		{2, 2048, "windows2019srv_64Guest", "vsphere-vm.cpu-2.mem-2gb.os-unknown"}, // not in CPI's table
	}
	for _, tt := range tests {
		vm := &backends.VM{NumCPU: tt.numCPU, MemoryMB: tt.memoryMB, GuestID: tt.guestID}
		if got := metadata.InstanceType(vm); got != tt.want {
			t.Errorf("InstanceType(cpu %d, mem %d MB, %q) = %q, want %q", tt.numCPU, tt.memoryMB, tt.guestID, got, tt.want)
		}
	}
}

// cpiGuestOS is CPI's GuestOSLookup, entry for entry
// (kubernetes/cloud-provider-vsphere pkg/cloudprovider/vsphere/types.go,
// HEAD 60f6c5df, 151 guestIds).
var cpiGuestOS = map[string]string{
	"asianux3Guest":           "asianux3",
	"asianux3_64Guest":        "asianux3",
	"asianux4Guest":           "asianux4",
	"asianux4_64Guest":        "asianux4",
	"asianux5_64Guest":        "asianux5",
	"asianux7_64Guest":        "asianux7",
	"centos64Guest":           "centos64",
	"centos6Guest":            "centos6",
	"centos6_64Guest":         "centos6",
	"centos7Guest":            "centos7",
	"centos7_64Guest":         "centos7",
	"centosGuest":             "centos",
	"coreos64Guest":           "coreos",
	"darwin10Guest":           "darwin",
	"darwin10_64Guest":        "darwin",
	"darwin11Guest":           "darwin",
	"darwin11_64Guest":        "darwin",
	"darwin12_64Guest":        "darwin",
	"darwin13_64Guest":        "darwin",
	"darwin14_64Guest":        "darwin",
	"darwin15_64Guest":        "darwin",
	"darwin16_64Guest":        "darwin",
	"darwin64Guest":           "darwin",
	"darwinGuest":             "darwin",
	"debian10Guest":           "debian10",
	"debian10_64Guest":        "debian10",
	"debian4Guest":            "debian4",
	"debian4_64Guest":         "debian4",
	"debian5Guest":            "debian5",
	"debian5_64Guest":         "debian5",
	"debian6Guest":            "debian6",
	"debian6_64Guest":         "debian6",
	"debian7Guest":            "debian7",
	"debian7_64Guest":         "debian7",
	"debian8Guest":            "debian8",
	"debian8_64Guest":         "debian8",
	"debian9Guest":            "debian9",
	"debian9_64Guest":         "debian9",
	"dosGuest":                "dos",
	"eComStation2Guest":       "eComStation2",
	"eComStationGuest":        "eComStation",
	"fedora64Guest":           "fedora",
	"fedoraGuest":             "fedora",
	"freebsd64Guest":          "freebsd",
	"freebsdGuest":            "freebsd",
	"genericLinuxGuest":       "linux",
	"mandrakeGuest":           "mandrake",
	"mandriva64Guest":         "mandriva",
	"mandrivaGuest":           "mandriva",
	"netware4Guest":           "netware4",
	"netware5Guest":           "netware5",
	"netware6Guest":           "netware6",
	"nld9Guest":               "nld9",
	"oesGuest":                "oes",
	"openServer5Guest":        "openServer5",
	"openServer6Guest":        "openServer6",
	"opensuse64Guest":         "opensuse",
	"opensuseGuest":           "opensuse",
	"oracleLinux64Guest":      "oracleLinux",
	"oracleLinux6Guest":       "oracleLinux6",
	"oracleLinux6_64Guest":    "oracleLinux6",
	"oracleLinux7Guest":       "oracleLinux7",
	"oracleLinux7_64Guest":    "oracleLinux7",
	"oracleLinuxGuest":        "oracleLinux",
	"os2Guest":                "os2",
	"other24xLinux64Guest":    "linux",
	"other24xLinuxGuest":      "linux",
	"other26xLinux64Guest":    "linux",
	"other26xLinuxGuest":      "linux",
	"other3xLinux64Guest":     "linux",
	"other3xLinuxGuest":       "linux",
	"otherGuest":              "other",
	"otherGuest64":            "other",
	"otherLinux64Guest":       "linux",
	"otherLinuxGuest":         "linux",
	"redhatGuest":             "rhel",
	"rhel10_64Guest":          "rhel10",
	"rhel2Guest":              "rhel2",
	"rhel3Guest":              "rhel3",
	"rhel3_64Guest":           "rhel3",
	"rhel4Guest":              "rhel4",
	"rhel4_64Guest":           "rhel4",
	"rhel5Guest":              "rhel5",
	"rhel5_64Guest":           "rhel5",
	"rhel6Guest":              "rhel6",
	"rhel6_64Guest":           "rhel6",
	"rhel7Guest":              "rhel7",
	"rhel7_64Guest":           "rhel7",
	"rhel8_64Guest":           "rhel8",
	"rhel9_64Guest":           "rhel9",
	"sjdsGuest":               "sjds",
	"sles10Guest":             "sles10",
	"sles10_64Guest":          "sles10",
	"sles11Guest":             "sles11",
	"sles11_64Guest":          "sles11",
	"sles12Guest":             "sles12",
	"sles12_64Guest":          "sles12",
	"sles64Guest":             "sles64",
	"slesGuest":               "sles",
	"solaris10Guest":          "solaris10",
	"solaris10_64Guest":       "solaris10",
	"solaris11_64Guest":       "solaris11",
	"solaris6Guest":           "solaris6",
	"solaris7Guest":           "solaris7",
	"solaris8Guest":           "solaris8",
	"solaris9Guest":           "solaris9",
	"suse64Guest":             "suse",
	"suseGuest":               "suse",
	"turboLinux64Guest":       "turbolinux",
	"turboLinuxGuest":         "turbolinux",
	"ubuntu64Guest":           "ubuntu",
	"ubuntuGuest":             "ubuntu",
	"unixWare7Guest":          "unixware7",
	"vmkernel5Guest":          "vmkernel5",
	"vmkernel65Guest":         "vmkernel65",
	"vmkernel6Guest":          "vmkernel6",
	"vmkernelGuest":           "vmkernel",
	"vmwarePhoton64Guest":     "photon",
	"win2000AdvServGuest":     "win2000advserv",
	"win2000ProGuest":         "win2000pro",
	"win2000ServGuest":        "win2000serv",
	"win31Guest":              "win31",
	"win95Guest":              "win95",
	"win98Guest":              "win98",
	"winLonghorn64Guest":      "winlonghorn",
	"winLonghornGuest":        "winlonghorn",
	"winMeGuest":              "winme",
	"winNTGuest":              "winnt",
	"winNetBusinessGuest":     "winnetbusiness",
	"winNetDatacenter64Guest": "winnetdatacenter",
	"winNetDatacenterGuest":   "winnetdatacenter",
	"winNetEnterprise64Guest": "winnetenterprise",
	"winNetEnterpriseGuest":   "winnetenterprise",
	"winNetStandard64Guest":   "winnetstandard",
	"winNetStandardGuest":     "winnetstandard",
	"winNetWebGuest":          "winnetweb",
	"winVista64Guest":         "winvista",
	"winVistaGuest":           "winvista",
	"winXPHomeGuest":          "winxphome",
	"winXPPro64Guest":         "winxppro",
	"winXPProGuest":           "winxppro",
	"windows7Guest":           "win7",
	"windows7Server64Guest":   "win7server",
	"windows7_64Guest":        "win7",
	"windows8Guest":           "win8",
	"windows8Server64Guest":   "win8server",
	"windows8_64Guest":        "win8",
	"windows9Guest":           "win10",
	"windows9Server64Guest":   "win10server",
	"windows9_64Guest":        "win10",
	"windowsHyperVGuest":      "windowshyperv",
}

// Every guestId CPI maps gives CPI's short name.
func TestGuestOSShortNameCPITable(t *testing.T) {
	if len(cpiGuestOS) != 151 {
		t.Fatalf("%d entries, CPI's table has 151", len(cpiGuestOS))
	}
	for id, want := range cpiGuestOS {
		if got := metadata.GuestOSShortName(id); got != want {
			t.Errorf("GuestOSShortName(%q) = %q, CPI: %q", id, got, want)
		}
	}
}

// Every other guestId vSphere defines is "unknown", as in CPI: a name CPI
// lacks (windows2019srv_64Guest, debian11_64Guest…) must not change the
// instance type.
func TestGuestOSShortNameOnlyCPIs(t *testing.T) {
	ids := types.VirtualMachineGuestOsIdentifier("").Strings()
	if len(ids) < 200 {
		t.Fatalf("only %d guestIds in govmomi's enum", len(ids))
	}
	for _, id := range ids {
		want, ok := cpiGuestOS[id]
		if !ok {
			want = "unknown"
		}
		if got := metadata.GuestOSShortName(id); got != want {
			t.Errorf("GuestOSShortName(%q) = %q, CPI: %q", id, got, want)
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
		"ubuntu64Guest ":      "unknown", //nolint:gocritic // mapKey: the trailing space is the case under test
		"rhel9_64Guest":       "rhel9",
		"rhel10_64Guest":      "rhel10",
		"rhel8Guest":          "unknown", // CPI lists only the 64-bit id
		"rhel11_64Guest":      "unknown", // not in CPI's table
	} {
		if got := metadata.GuestOSShortName(id); got != want {
			t.Errorf("GuestOSShortName(%q) = %q, want %q", id, got, want)
		}
	}
}
