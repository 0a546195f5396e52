package config_test

import (
	"fmt"
	"log"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config"
)

func ExampleParse() {
	cfg, err := config.Parse([]byte(`
global:
  user: k8s@vsphere.local
  password: secret
  requestTimeout: 15s
vcenter:
  west:
    server: vc-west.example.com
    datacenters: [dc-west]
  east:
    server: vc-east.example.com
    datacenters: "dc-east-1, dc-east-2"
    requestTimeout: 5s
`))
	if err != nil {
		log.Fatal(err)
	}
	for _, vc := range cfg.VCenters {
		fmt.Println(vc.Name, vc.Server, vc.Datacenters, vc.RequestTimeout)
	}
	// Output:
	// east vc-east.example.com [dc-east-1 dc-east-2] 5s
	// west vc-west.example.com [dc-west] 15s
}
