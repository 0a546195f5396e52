package vcsim

import "fmt"

// Guest IPs and MACs come in two ranges.
//
// Narrow, the first narrowVMs VMs of each of the first narrowDCs
// datacenters (what the e2e tests were written against): IP
// 10.<vc+1>.<dc+16·b>.<i+10> and MAC 00:50:56:<vc>:<dc+16·b>:<i>, where
// b = vm/vmsPerBlock and i = vm%vmsPerBlock (host octets 10..249).
//
// Wide, every further VM: the upper half of 10/8, where each vCenter owns
// 8 second octets and each of its datacenters half of one, 128 /24s:
// IP 10.<128+8·vc+dc/2>.<128·(dc%2)+w>.<i+10> with w the VM's block counted
// from the first block past the narrow range, and MAC 00:50:56 followed by
// the IP's last three octets.
//
// The ranges cannot meet: the narrow range's second IP octet and fourth
// MAC byte stay below 128 (vc < narrowVCenters), the wide range's start at
// 128. Within each range the octets are a one-to-one function of
// (vc, dc, vm).
const (
	vmsPerBlock = 240 // host octets 10..249
	blockStride = 16  // third octet step between blocks of the narrow range

	narrowDCs      = blockStride
	narrowBlocks   = 256 / blockStride
	narrowVMs      = narrowBlocks * vmsPerBlock // 3,840
	narrowVCenters = 127                        // second octet vc+1 < 128

	wideVCenters  = 16  // 8 second octets each, from 128
	wideDCs       = 16  // half a second octet each
	wideBlocks    = 128 // /24s per datacenter
	wideFirstOct2 = 128
)

// MaxVMsPerDatacenter is how many VMs a datacenter can have: guest IPs
// and MACs are unique up to it (for up to 16 vCenters with up to 16
// datacenters each).
const MaxVMsPerDatacenter = narrowVMs + wideBlocks*vmsPerBlock // 34,560

// guestAddress is the guest IP and MAC of VM vm of datacenter dc of vCenter
// vc (all counted from 0); see the ranges above.
func guestAddress(vc, dc, vm int) (ip, mac string, err error) {
	if vc < 0 || dc < 0 || vm < 0 {
		return "", "", fmt.Errorf("vm %d of datacenter %d of vCenter %d: negative index", vm, dc, vc)
	}
	block, inBlock := vm/vmsPerBlock, vm%vmsPerBlock
	if dc < narrowDCs && block < narrowBlocks && vc < narrowVCenters {
		octet3 := dc + blockStride*block
		return fmt.Sprintf("10.%d.%d.%d", vc+1, octet3, inBlock+10),
			fmt.Sprintf("00:50:56:%02x:%02x:%02x", vc, octet3, inBlock), nil
	}
	wide := block
	if dc < narrowDCs {
		wide -= narrowBlocks
	}
	if vc >= wideVCenters || dc >= wideDCs || wide >= wideBlocks {
		return "", "", fmt.Errorf("vm %d of datacenter %d of vCenter %d: beyond what the guest IP and MAC scheme can number (%d VMs per datacenter for up to %d datacenters of up to %d vCenters)",
			vm, dc, vc, MaxVMsPerDatacenter, wideDCs, wideVCenters)
	}
	o2, o3, o4 := wideFirstOct2+8*vc+dc/2, 128*(dc%2)+wide, inBlock+10
	return fmt.Sprintf("10.%d.%d.%d", o2, o3, o4), fmt.Sprintf("00:50:56:%02x:%02x:%02x", o2, o3, o4), nil
}
