package discovery_test

import "github.com/vsphere-federated-ccm/vsphere-federated-ccm/discovery"

// The keys of a Node known by one key alone, for Locate: what production
// code calls (cloud/instances/instances.go). Without a name there are no fallback
// searches, so byUUID and byProviderID search that UUID alone, in both
// byte orders; byName searches the VM name, then, when it finds nothing,
// CPI's fallbacks (guest host name, guest IP).

func byUUID(uuid string) discovery.NodeKeys { return discovery.NodeKeys{SystemUUID: uuid} }

func byProviderID(providerID string) discovery.NodeKeys {
	return discovery.NodeKeys{ProviderID: providerID}
}

func byName(name string) discovery.NodeKeys { return discovery.NodeKeys{Name: name} }
