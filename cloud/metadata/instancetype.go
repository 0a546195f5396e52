package metadata

import (
	"fmt"
	"strings"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/backends"
)

// InstanceType formats a VM's size as CPI does:
// vsphere-vm.cpu-<numCPU>.mem-<memGiB>gb.os-<short guest OS name>.
func InstanceType(vm *backends.VM) string {
	return fmt.Sprintf("vsphere-vm.cpu-%d.mem-%dgb.os-%s", vm.NumCPU, vm.MemoryMB/1024, guestOSShortName(vm.GuestID))
}

// guestOSShortName maps a vSphere guestId to the short name CPI puts in the
// instance type; "unknown" for ids CPI does not list, so the label a Node
// gets is the same under either CCM.
func guestOSShortName(guestID string) string {
	for _, g := range guestOSGroups {
		for id := range strings.FieldsSeq(g[1]) {
			if id == guestID {
				return g[0]
			}
		}
	}
	return "unknown"
}

// guestOSGroups are each short name, then the guestIds that map to it
// (space-separated). It is CPI's GuestOSLookup
// (pkg/cloudprovider/vsphere/types.go), no more and no less: an id CPI does
// not know is "unknown" there, so it must be here.
var guestOSGroups = [][2]string{
	{"asianux3", "asianux3_64Guest asianux3Guest"},
	{"asianux4", "asianux4_64Guest asianux4Guest"},
	{"asianux5", "asianux5_64Guest"},
	{"asianux7", "asianux7_64Guest"},
	{"centos", "centosGuest"},
	{"centos6", "centos6_64Guest centos6Guest"},
	{"centos64", "centos64Guest"},
	{"centos7", "centos7_64Guest centos7Guest"},
	{"coreos", "coreos64Guest"},
	{"darwin", "darwinGuest darwin64Guest darwin10Guest darwin10_64Guest darwin11Guest darwin11_64Guest darwin12_64Guest darwin13_64Guest darwin14_64Guest darwin15_64Guest darwin16_64Guest"},
	{"debian4", "debian4_64Guest debian4Guest"},
	{"debian5", "debian5_64Guest debian5Guest"},
	{"debian6", "debian6_64Guest debian6Guest"},
	{"debian7", "debian7_64Guest debian7Guest"},
	{"debian8", "debian8_64Guest debian8Guest"},
	{"debian9", "debian9_64Guest debian9Guest"},
	{"debian10", "debian10_64Guest debian10Guest"},
	{"dos", "dosGuest"},
	{"eComStation", "eComStationGuest"},
	{"eComStation2", "eComStation2Guest"},
	{"fedora", "fedoraGuest fedora64Guest"},
	{"freebsd", "freebsdGuest freebsd64Guest"},
	{"linux", "genericLinuxGuest otherLinuxGuest otherLinux64Guest other24xLinuxGuest other24xLinux64Guest other26xLinuxGuest other26xLinux64Guest other3xLinuxGuest other3xLinux64Guest"},
	{"mandrake", "mandrakeGuest"},
	{"mandriva", "mandrivaGuest mandriva64Guest"},
	{"netware4", "netware4Guest"},
	{"netware5", "netware5Guest"},
	{"netware6", "netware6Guest"},
	{"nld9", "nld9Guest"},
	{"oes", "oesGuest"},
	{"openServer5", "openServer5Guest"},
	{"openServer6", "openServer6Guest"},
	{"opensuse", "opensuseGuest opensuse64Guest"},
	{"oracleLinux", "oracleLinuxGuest oracleLinux64Guest"},
	{"oracleLinux6", "oracleLinux6Guest oracleLinux6_64Guest"},
	{"oracleLinux7", "oracleLinux7Guest oracleLinux7_64Guest"},
	{"os2", "os2Guest"},
	{"other", "otherGuest otherGuest64"},
	{"photon", "vmwarePhoton64Guest"},
	{"rhel", "redhatGuest"},
	{"rhel2", "rhel2Guest"},
	{"rhel3", "rhel3Guest rhel3_64Guest"},
	{"rhel4", "rhel4Guest rhel4_64Guest"},
	{"rhel5", "rhel5Guest rhel5_64Guest"},
	{"rhel6", "rhel6Guest rhel6_64Guest"},
	{"rhel7", "rhel7Guest rhel7_64Guest"},
	{"rhel8", "rhel8_64Guest"},
	{"rhel9", "rhel9_64Guest"},
	{"rhel10", "rhel10_64Guest"},
	{"sjds", "sjdsGuest"},
	{"sles", "slesGuest"},
	{"sles64", "sles64Guest"},
	{"sles10", "sles10Guest sles10_64Guest"},
	{"sles11", "sles11Guest sles11_64Guest"},
	{"sles12", "sles12Guest sles12_64Guest"},
	{"solaris6", "solaris6Guest"},
	{"solaris7", "solaris7Guest"},
	{"solaris8", "solaris8Guest"},
	{"solaris9", "solaris9Guest"},
	{"solaris10", "solaris10Guest solaris10_64Guest"},
	{"solaris11", "solaris11_64Guest"},
	{"suse", "suseGuest suse64Guest"},
	{"turbolinux", "turboLinuxGuest turboLinux64Guest"},
	{"ubuntu", "ubuntuGuest ubuntu64Guest"},
	{"unixware7", "unixWare7Guest"},
	{"vmkernel", "vmkernelGuest"},
	{"vmkernel5", "vmkernel5Guest"},
	{"vmkernel6", "vmkernel6Guest"},
	{"vmkernel65", "vmkernel65Guest"},
	{"win2000advserv", "win2000AdvServGuest"},
	{"win2000pro", "win2000ProGuest"},
	{"win2000serv", "win2000ServGuest"},
	{"win31", "win31Guest"},
	{"win95", "win95Guest"},
	{"win98", "win98Guest"},
	{"win7", "windows7Guest windows7_64Guest"},
	{"win7server", "windows7Server64Guest"},
	{"win8", "windows8Guest windows8_64Guest"},
	{"win8server", "windows8Server64Guest"},
	{"win10", "windows9Guest windows9_64Guest"},
	{"win10server", "windows9Server64Guest"},
	{"windowshyperv", "windowsHyperVGuest"},
	{"winlonghorn", "winLonghornGuest winLonghorn64Guest"},
	{"winme", "winMeGuest"},
	{"winnetbusiness", "winNetBusinessGuest"},
	{"winnetdatacenter", "winNetDatacenterGuest winNetDatacenter64Guest"},
	{"winnetenterprise", "winNetEnterpriseGuest winNetEnterprise64Guest"},
	{"winnetstandard", "winNetStandardGuest winNetStandard64Guest"},
	{"winnetweb", "winNetWebGuest"},
	{"winnt", "winNTGuest"},
	{"winvista", "winVistaGuest winVista64Guest"},
	{"winxphome", "winXPHomeGuest"},
	{"winxppro", "winXPProGuest winXPPro64Guest"},
}
