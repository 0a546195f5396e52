package vsphere

import (
	"errors"
	"fmt"

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

// sortFailure names *err, a Backend method's failure, after the method
// op (unless op is "") and gives it its kind (backends.ErrAuth,
// ErrUnreachable) when it has one and lacks it, so no caller needs
// govmomi or the text to tell. Deferred by every method that talks to
// vCenter.
func sortFailure(op string, err *error) {
	if *err == nil {
		return
	}
	if op != "" {
		*err = fmt.Errorf("%s: %w", op, *err)
	}
	if errors.Is(*err, backends.ErrAuth) || errors.Is(*err, backends.ErrUnreachable) {
		return
	}
	switch {
	case fault.Is(*err, &types.NotAuthenticated{}), fault.Is(*err, &types.InvalidLogin{}):
		*err = &kindedError{err: *err, kind: backends.ErrAuth}
	case noAnswer(*err):
		*err = &kindedError{err: *err, kind: backends.ErrUnreachable}
	}
}
