// Package vsphere is the govmomi implementation of backends.Backend: SOAP for
// VM lookups and properties, the vAPI REST tagging service for zones and
// regions, one long-lived session of each per vCenter. Beyond the
// interface, a few read-only methods serve the operator tools (the
// validate command, cmd/vsphere-federated-ccm/check; operator.go): they
// return data, never verdicts, so the judgement lives with the tool.
package vsphere
