package discovery

// The errors of a lookup, in one file: a vCenter that could not answer, a
// lookup that could not conclude, a match that is not one VM, and the
// sentinels callers test with errors.Is.

import (
	"errors"
	"fmt"
	"strings"

	"github.com/hashicorp/go-multierror"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/discovery/vcenter"
)

// VCenterError is one vCenter that could not answer.
type VCenterError struct {
	VCenter string
	Err     error
}

func (e *VCenterError) Error() string { return "vcenter " + e.VCenter + ": " + e.Err.Error() }

func (e *VCenterError) Unwrap() error { return e.Err }

// A vCenter not asked or not waited for (package vcenter's errors): its
// breaker is open, or it is known down (a background probe tells when it
// is back), both answered without a network call; or its first connect
// made no progress within its stall window, or took half the lookup's
// deadline.
var (
	ErrBreakerOpen       = vcenter.ErrBreakerOpen
	ErrVCenterDown       = vcenter.ErrVCenterDown
	ErrVCenterConnecting = vcenter.ErrVCenterConnecting
)

// LookupError is a lookup that neither found the VM nor could confirm its
// absence, because some vCenters did not answer; or one by a key other
// VMs may share (a guest host name or IP) that found one, while a vCenter
// that did not answer could hold another (Found).
type LookupError struct {
	What     string // e.g. `uuid "…"`
	Answered []string
	Failed   *multierror.Error // of *VCenterError
	Found    *Result
}

func (e *LookupError) Error() string {
	failed := join(e.Failed.Errors, "; ")
	if e.Found != nil {
		return fmt.Sprintf("%s: found %s, but %d vCenters could not be asked, and another VM there could match too: %s",
			e.What, e.Found, len(e.Failed.Errors), failed)
	}
	return fmt.Sprintf("%s: not found in the vCenters that answered %v, and %d could not be asked: %s",
		e.What, e.Answered, len(e.Failed.Errors), failed)
}

// Unwrap exposes each vCenter's failure to errors.Is/As (a deadline, an
// open breaker). None of them is ever backends.ErrNotFound: answers about
// the VM are not failures.
func (e *LookupError) Unwrap() []error { return e.Failed.Errors }

// DuplicateError is a lookup that matched more than one VM: never a guess.
type DuplicateError struct {
	What    string
	Matches []*Result
}

func (e *DuplicateError) Error() string {
	return fmt.Sprintf("%s matches %d VMs, refusing to choose: %s", e.What, len(e.Matches), join(e.Matches, " and "))
}

// join names each of xs (an error, or a Stringer: a VM matched, a retired
// place, a datacenter as configured), separated by sep.
func join[T any](xs []T, sep string) string {
	out := make([]string, len(xs))
	for i, x := range xs {
		out[i] = fmt.Sprint(x)
	}
	return strings.Join(out, sep)
}

// OutsideError is a lookup whose VM exists only in datacenters that are
// not configured: it is neither served nor reported deleted.
type OutsideError struct {
	What    string
	Matches []*Result
}

func (e *OutsideError) Error() string {
	return fmt.Sprintf("%s exists only outside the configured datacenters: %s", e.What, join(e.Matches, " and "))
}

// ErrNameOnly refuses to judge existence by VM name alone: a Node name
// that differs from its VM's name must never get the Node deleted.
var ErrNameOnly = errors.New("node has neither spec.providerID nor status.nodeInfo.systemUUID; existence is not judged by name")

// ErrNoProviderID keeps a Node without providerID whose VM no search
// found: it may be a machine that never was a VM (bare metal or another
// cloud's beside the VMs), and only a Node this CCM or CPI gave a
// vsphere:// providerID is ever reported gone (CPI answers an error too).
var ErrNoProviderID = errors.New("node has no spec.providerID and no VM matches its system UUID or name; a Node that is not known as a vSphere VM is never reported deleted")

// RetiredError is a lookup that found nothing while a vCenter or
// datacenter that left the config could hold the VM: it cannot be asked,
// so the VM is not gone.
type RetiredError struct {
	What string
	// LastSeen, when set, is where this process last saw the VM.
	LastSeen *Result
	// Remembered are the retired places that could hold it.
	Remembered []Retired
}

func (e *RetiredError) Error() string {
	if e.LastSeen != nil {
		return fmt.Sprintf("%s: last seen in vcenter %s (%s) datacenter %s, which is no longer configured as it was; not found elsewhere", e.What, e.LastSeen.VCenter, e.LastSeen.Where, e.LastSeen.VM.Ref.Datacenter)
	}
	return fmt.Sprintf("%s: not found in any configured vCenter, but %s could hold it; not deleting",
		e.What, join(e.Remembered, " and "))
}
