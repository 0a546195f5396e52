package instances

import (
	"errors"
	"fmt"
	"testing"

	"github.com/hashicorp/go-multierror"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/backends"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/discovery"
)

// The cause of a failed lookup is which vCenters failed and how, not the
// text of their errors; a failure of no known kind is its text.
func TestLookupCause(t *testing.T) {
	lookup := func(errs ...error) error {
		var m *multierror.Error
		for _, e := range errs {
			m = multierror.Append(m, e)
		}
		return fmt.Errorf("discovery: %w", &discovery.LookupError{What: `uuid "x"`, Answered: []string{"vcA"}, Failed: m})
	}
	conn := func(vc string, port int) error {
		return &discovery.VCenterError{VCenter: vc, Err: fmt.Errorf("read tcp 10.0.0.1:%d: %w", port, backends.ErrUnreachable)}
	}
	other := func(vc, msg string) error { return &discovery.VCenterError{VCenter: vc, Err: errors.New(msg)} }
	same := [][2]error{
		{lookup(conn("vcB", 50001)), lookup(conn("vcB", 50002))},
		{lookup(other("vcB", "NoPermission")), lookup(other("vcB", "NoPermission"))},
		{errors.New("retired"), errors.New("retired")},
	}
	for _, p := range same {
		if a, b := lookupCause(p[0]), lookupCause(p[1]); a != b {
			t.Errorf("causes of %v and %v differ: %q, %q", p[0], p[1], a, b)
		}
	}
	differ := [][2]error{
		{lookup(conn("vcB", 50001)), lookup(conn("vcC", 50001))},
		{lookup(conn("vcB", 50001)), lookup(&discovery.VCenterError{VCenter: "vcB", Err: backends.ErrAuth})},
		{lookup(other("vcB", "NoPermission")), lookup(other("vcB", "InvalidLogin"))},
		{lookup(conn("vcB", 1)), lookup(conn("vcB", 1), conn("vcC", 1))},
	}
	for _, p := range differ {
		if a, b := lookupCause(p[0]), lookupCause(p[1]); a == b {
			t.Errorf("causes of %v and %v are the same: %q", p[0], p[1], a)
		}
	}
}
