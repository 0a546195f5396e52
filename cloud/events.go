package cloud

// The Events this provider records, and the one way it records them.

import (
	v1 "k8s.io/api/core/v1"
)

// Event reasons this provider records on Nodes.
const (
	ReasonZoneTagMissing = "ZoneTagMissing"
	ReasonDuplicateUUID  = "DuplicateVMUUID"
	ReasonLookupFailed   = "VMLookupFailed"
	// ReasonNoNodeAddress: the VM's guest networking gives no address by
	// CPI's rules (no host name, no NICs, a listed IP family without an
	// address, the named VM networks absent); the Node stays tainted.
	ReasonNoNodeAddress = "NoSuitableNodeAddress"
)

// Event reasons about configuration and credentials.
const (
	ReasonConfigInvalid = "ConfigInvalid"
	ReasonConfigApplied = "ConfigApplied"
	// ReasonConfigUnknownKey: a key of the applied config that neither CPI
	// nor this CCM reads (a typo?); it is ignored, as CPI ignores it.
	ReasonConfigUnknownKey   = "ConfigUnknownKey"
	ReasonCredentialsFailed  = "CredentialsFailed"
	ReasonCredentialsRotated = "CredentialsRotated"
)

func (c *Cloud) event(obj *v1.ObjectReference, eventType, reason, msg string) {
	if c.recorder != nil && obj != nil {
		c.recorder.Event(obj, eventType, reason, msg)
	}
}
