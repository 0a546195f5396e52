module github.com/vsphere-federated-ccm/vsphere-federated-ccm/test/cpiconfig

go 1.26.8

require (
	github.com/go-logr/logr v1.4.3
	k8s.io/cloud-provider-vsphere v1.36.0
	k8s.io/klog/v2 v2.140.0
	sigs.k8s.io/yaml v1.6.0
)

require (
	go.yaml.in/yaml/v2 v2.4.3 // indirect
	gopkg.in/gcfg.v1 v1.2.3 // indirect
	gopkg.in/warnings.v0 v0.1.2 // indirect
	gopkg.in/yaml.v2 v2.4.0 // indirect
)
