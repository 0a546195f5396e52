package instances

// Unit tests of how instances.go words a kept Node's cause (the Event's
// deduplication key and message): each asserts what one branch decides.
// See test/mutation.sh.

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-multierror"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/backends"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/discovery"
)

func TestHeldMessageNamesTheGraceNotTheTime(t *testing.T) {
	since := time.Date(2026, 3, 1, 12, 0, 0, 0, time.FixedZone("x", 7200))
	e := &discovery.DeletionHeldError{What: "uuid u", Reason: discovery.HeldGrace, VCenters: []string{"a"}, Since: since, Absent: 3 * time.Second, MinAbsence: time.Minute}
	one := heldMessage(e)
	if want := "uuid u: its VM has been confirmed absent since 2026-03-01T10:00:00Z; reported absent once absent for 1m0s (nodeDeletion.minAbsence of vcenter a); not deleting yet"; one != want {
		t.Fatalf("heldMessage = %q, want %q", one, want)
	}
	e.Absent = 9 * time.Second
	if heldMessage(e) != one {
		t.Fatalf("the message changed with the time absent: %q", heldMessage(e))
	}
	e.VCenters = []string{"a", "b"}
	if got := heldMessage(e); !strings.Contains(got, "minAbsence of vcenters a, b)") {
		t.Fatalf("two vCenters: %q", got)
	}
	frozen := &discovery.DeletionHeldError{What: "uuid u", Reason: discovery.HeldFrozen, VCenters: []string{"a"}, Keys: []string{"global.nodeDeletion"}, Absent: time.Second}
	if got := heldMessage(frozen); got != frozen.Error() {
		t.Fatalf("frozen: heldMessage = %q, want the error's own %q", got, frozen.Error())
	}
}

func TestLookupCauseIsTheKindOfEachFailure(t *testing.T) {
	down := &discovery.VCenterError{VCenter: "vc2", Err: fmt.Errorf("%w since 10:00: refused", discovery.ErrVCenterDown)}
	odd := &discovery.VCenterError{VCenter: "vc3", Err: errors.New("odd fault 1")}
	le := &discovery.LookupError{What: "uuid u", Answered: []string{"vc1"}, Failed: multierror.Append(nil, down, odd)}
	got := lookupCause(le)
	if want := strings.Join([]string{"uuid u", "[vc1]", "vc2: vcenter_down", "vc3: " + odd.Error()}, "\x00"); got != want {
		t.Fatalf("lookupCause = %q, want %q", got, want)
	}
	// The down vCenter's text changes (its time), the cause does not.
	down.Err = fmt.Errorf("%w since 10:05: refused", discovery.ErrVCenterDown)
	if lookupCause(le) != got {
		t.Fatal("the cause changed with the text of a known kind of failure")
	}
	found := &discovery.Result{VCenter: "vc1", VM: backends.VM{Ref: backends.VMRef{Datacenter: "dc1", ID: "vm-1"}, Name: "n1"}}
	le.Found = found
	if c := lookupCause(le); !strings.Contains(c, "\x00"+found.String()+"\x00") {
		t.Fatalf("lookupCause with a VM found = %q, want it named", c)
	}
	// Not a lookup error: its text.
	if c := lookupCause(errors.New("plain")); c != "plain" {
		t.Fatalf("lookupCause(plain) = %q", c)
	}
	// A failure that names no vCenter.
	if c := lookupCause(&discovery.LookupError{What: "w", Failed: multierror.Append(nil, errors.New("bare"))}); !strings.HasSuffix(c, "\x00: bare") {
		t.Fatalf("lookupCause(bare failure) = %q", c)
	}
}
