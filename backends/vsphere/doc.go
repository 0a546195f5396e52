// Package vsphere is the govmomi implementation of backends.Backend: SOAP for
// VM lookups and properties, the vAPI REST tagging service for zones and
// regions, one long-lived session of each per vCenter.
package vsphere
