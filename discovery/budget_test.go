package discovery_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/backends"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/discovery"
)

// A call its vCenter's request budget refused was never sent: it says
// nothing of the vCenter's health, so 50 of them do not open a breaker
// that trips after 2 failures; and it is an error, never absence.
func TestBudgetRejectionsDoNotOpenTheBreaker(t *testing.T) {
	f := newFleet()
	d := f.discoverer(t, time.Second, 2, time.Minute)
	ctx := t.Context()
	missing := "42ffffff-ffff-4fff-8fff-ffffffffffff"
	f.backends["vc1"].Fail(fmt.Errorf("vcenter vc1: %w", backends.ErrBudget))
	for i := range 50 {
		res, err := d.Locate(ctx, byUUID(missing))
		if !errors.Is(err, backends.ErrBudget) || res != nil {
			t.Fatalf("lookup %d = %v, %v; want an error wrapping ErrBudget", i, res, err)
		}
		if errors.Is(err, discovery.ErrBreakerOpen) {
			t.Fatalf("lookup %d: the breaker opened on budget rejections: %v", i, err)
		}
	}
	for _, h := range d.Health() {
		if h.Breaker != "closed" {
			t.Fatalf("%s breaker %q after 50 budget rejections; want closed", h.Name, h.Breaker)
		}
	}
	// Real failures still open it.
	f.backends["vc1"].Fail(errors.New("connection refused"))
	for range 2 {
		_, _ = d.Locate(ctx, byUUID(missing))
	}
	if _, err := d.Locate(ctx, byUUID(missing)); !errors.Is(err, discovery.ErrBreakerOpen) {
		t.Fatalf("after 2 failures err = %v, want ErrBreakerOpen", err)
	}
}
