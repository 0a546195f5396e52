package discovery_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/backends"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/backends/backendtest"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/discovery"
)

// A lookup is found, confirmed absent (nil, nil), or an error that names
// the vCenters that could not answer: absence is never inferred from them.
func ExampleDiscoverer_FindByUUID() {
	east, west := backendtest.New(), backendtest.New()
	east.Add(backends.VM{
		Ref:  backends.VMRef{Datacenter: "dc-a", ID: "vm-42"},
		Name: "worker-1", UUID: "422e4956-ad22-1139-1234-567890abcdef",
	}, nil)
	d := discovery.New([]discovery.Target{
		{Name: "east", Server: "east.example.com:443", Backend: east, RequestTimeout: time.Second, ConsecutiveFailures: 5, OpenTimeout: time.Minute},
		{Name: "west", Server: "west.example.com:443", Backend: west, RequestTimeout: time.Second, ConsecutiveFailures: 5, OpenTimeout: time.Minute},
	}, discovery.Options{})
	d.Start()
	ctx := context.Background()

	// The kubelet reports the system UUID with its first groups byte-swapped.
	res, err := d.FindByUUID(ctx, "56492e42-22ad-3911-1234-567890abcdef")
	fmt.Println(res, err)

	res, err = d.FindByUUID(ctx, "42ffffff-ffff-ffff-8fff-ffffffffffff")
	fmt.Println(res == nil && err == nil, "(confirmed absent)")

	west.Fail(errors.New("connection refused"))
	_, err = d.FindByUUID(ctx, "42ffffff-ffff-ffff-8fff-ffffffffffff")
	fmt.Println(err)
	// Output:
	// vcenter east datacenter dc-a vm "worker-1" (vm-42) <nil>
	// true (confirmed absent)
	// uuid "42ffffff-ffff-ffff-8fff-ffffffffffff": not found in the vCenters that answered [east], and 1 could not be asked: vcenter west: connection refused
}
