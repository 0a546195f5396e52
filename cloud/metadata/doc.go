// Package metadata is what a VM says of its Node, as pure functions of
// the VM, the Node and the config, with no state: its addresses
// (addresses.go, nodeip.go for the kubelet's --node-ip), its instance type
// (instancetype.go), its zone from DRS host groups and where its zone and
// region are read (hostgroups.go), its labels below the zone
// (placement.go) and label values from tags (taglabels.go).
//
// It is a room of its own so that both owners that need these answers,
// the read-only instances (what InstanceMetadata answers) and nodes (what
// the drift pass rewrites), read them from one place and answer alike,
// without either reaching into the other.
package metadata
