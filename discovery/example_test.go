package discovery_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/backends"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/discovery"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/test/backendtest"
)

// The cloud provider locates a Node's VM by the keys it reads off the Node
// (cloud/instances/instances.go): its providerID once set, before that its system
// UUID, then CPI's searches by its name. A lookup is found, found nothing
// (nil, nil: every vCenter answered without it, which alone is no grounds
// to delete the Node; Exists decides that), or an error that names the
// vCenters that could not answer: absence is never inferred from them.
func ExampleDiscoverer_Locate() {
	east, west := backendtest.New(), backendtest.New()
	east.Add(backends.VM{
		Ref:  backends.VMRef{Datacenter: "dc-a", ID: "vm-42"},
		Name: "worker-1", UUID: "422e4956-ad22-1139-1234-567890abcdef",
	}, nil)
	d := discovery.New([]discovery.Target{
		{Name: "east", Server: "east.example.com:443", Backend: east, RequestTimeout: time.Second, ConsecutiveFailures: 5, OpenTimeout: time.Minute},
		{Name: "west", Server: "west.example.com:443", Backend: west, RequestTimeout: time.Second, ConsecutiveFailures: 5, OpenTimeout: time.Minute},
	}, discovery.Options{})
	d.ScanDuplicates() // the caller (package cloud) runs this every second
	ctx := context.Background()

	// A new Node: the kubelet reports the system UUID with its first groups
	// byte-swapped.
	res, err := d.Locate(ctx, discovery.NodeKeys{Name: "worker-1", SystemUUID: "56492e42-22ad-3911-1234-567890abcdef"})
	fmt.Println(res, err)

	// A Node initialized before, whose VM is gone.
	gone := discovery.NodeKeys{Name: "worker-2", ProviderID: "vsphere://42ffffff-ffff-ffff-8fff-ffffffffffff"}
	res, err = d.Locate(ctx, gone)
	fmt.Println(res == nil && err == nil, "(found nothing)")

	west.Fail(errors.New("connection refused"))
	_, err = d.Locate(ctx, gone)
	fmt.Println(err)
	// Output:
	// vcenter east datacenter dc-a vm "worker-1" (vm-42) <nil>
	// true (found nothing)
	// uuid "42ffffff-ffff-ffff-8fff-ffffffffffff": not found in the vCenters that answered [east], and 1 could not be asked: vcenter west: connection refused
}
