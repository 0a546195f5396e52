package vsphere

import (
	"errors"

	"github.com/vmware/govmomi/fault"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/backends"
)

// kindedError is a failure with the kind it was sorted into; its text is
// the failure's own.
type kindedError struct {
	err, kind error
}

func (e *kindedError) Error() string   { return e.err.Error() }
func (e *kindedError) Unwrap() []error { return []error{e.err, e.kind} }

// sortFailure gives *err, a Backend method's failure, its kind
// (backends.ErrAuth, ErrUnreachable) when it has one and lacks it, so no
// caller needs govmomi or the text to tell. Deferred by every method that
// talks to vCenter.
func sortFailure(err *error) {
	if *err == nil || errors.Is(*err, backends.ErrAuth) || errors.Is(*err, backends.ErrUnreachable) {
		return
	}
	switch {
	case fault.Is(*err, &types.NotAuthenticated{}), fault.Is(*err, &types.InvalidLogin{}):
		*err = &kindedError{err: *err, kind: backends.ErrAuth}
	case noAnswer(*err):
		*err = &kindedError{err: *err, kind: backends.ErrUnreachable}
	}
}
