package instances

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/backends"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/discovery"
)

// The errors metric's reason comes from the kinds the backends and
// discovery sort failures into, never from an error's text: a message
// that merely mentions a kind is "other".
func TestReasonFollowsErrorKinds(t *testing.T) {
	for _, c := range []struct {
		err  error
		want string
	}{
		{fmt.Errorf("vcenter vc1: %w", discovery.ErrVCenterDown), "vcenter_down"},
		{fmt.Errorf("x: %w", discovery.ErrVCenterConnecting), "connecting"},
		{fmt.Errorf("x: %w", discovery.ErrBreakerOpen), "breaker_open"},
		{fmt.Errorf("vsphere.Find: %w", errors.Join(context.DeadlineExceeded, backends.ErrUnreachable)), "deadline"},
		{fmt.Errorf("vsphere.Find: login as %q: %w", "ccm", backends.ErrAuth), "auth"},
		{fmt.Errorf("vsphere.Find: dial: %w", backends.ErrUnreachable), "connection"},
		{errors.New("login as ccm: connection refused"), "other"},
		{fmt.Errorf("vm-1: %w", backends.ErrNotFound), "other"},
	} {
		if got := ErrorReason(c.err); got != c.want {
			t.Errorf("ErrorReason(%v) = %q, want %q", c.err, got, c.want)
		}
	}
}
