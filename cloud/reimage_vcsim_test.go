package cloud_test

import (
	"fmt"
	"strings"
	"testing"
)

// A vCenter re-imaged in place while the CCM runs — another appliance at
// the same address, every session ended — and then a VM destroyed on the
// new one: its Node is not gone, since the old appliance that held the VM
// cannot be asked. Found by TestRule1ModelVCsim in CI: the re-login kept
// the old appliance's instance UUID, so nothing retired it and the new
// appliance's "not found" deleted the Node.
func TestReimagedVCenterKeepsItsNodes(t *testing.T) {
	for _, inventory := range []bool{false, true} {
		t.Run(fmt.Sprintf("inventory=%t", inventory), func(t *testing.T) {
			w := newWorldWith(t, nil, inventory)
			ctx := t.Context()
			vc := w.fed.VCenter("vc2")
			vm := vc.VMs[0]
			node := initialized(kubeletNode(vm.Name, vm.SystemUUID()))
			eventually(t, "the Node's VM found", func() bool {
				ok, _ := w.cloud.InstanceExists(ctx, node)
				return ok
			})
			w.cloud.Reload(ctx) // the history holds the appliance that answered
			old := strings.ToLower(vc.InstanceUUID())
			vc.SetInstanceUUID("5f0a7c1e-0000-4000-8000-00000000a1b2")
			if err := vc.TerminateSessions(ctx); err != nil {
				t.Fatal(err)
			}
			if err := vc.Destroy(ctx, vm); err != nil {
				t.Fatal(err)
			}
			// Kept, and not by chance: the old appliance is remembered.
			eventuallyError(t, "InstanceExists after the re-image", old, func() (bool, error) {
				return w.cloud.InstanceExists(ctx, node)
			})
		})
	}
}
