// Package cloud is the router: a cloudprovider.Interface whose InstancesV2
// answers the cloud-node and cloud-node-lifecycle controllers for Nodes in
// any of several vCenters, through package discovery.
package cloud

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/klog/v2"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/backends"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/backends/credentials"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/backends/vsphere"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/discovery"
)

// ProviderName is CPI's, so this CCM is a drop-in replacement.
const ProviderName = "vsphere"

var (
	_ cloudprovider.Interface   = (*Cloud)(nil)
	_ cloudprovider.InstancesV2 = (*Cloud)(nil)
)

// BackendFactory builds the backend of one vCenter.
type BackendFactory func(vc config.VCenterConfig, creds credentials.Source) backends.Backend

// GovmomiBackend is the production BackendFactory.
func GovmomiBackend(vc config.VCenterConfig, creds credentials.Source) backends.Backend {
	return vsphere.New(vsphere.Options{Config: vc, Credentials: creds})
}

// Options tune a Cloud; zero values are production defaults.
type Options struct {
	NewBackend BackendFactory
	Discovery  discovery.Options
}

// Cloud is the vsphere cloud provider.
type Cloud struct {
	opts Options

	cfg       atomic.Pointer[config.Config]
	discovery *discovery.Discoverer

	mu       sync.Mutex
	started  bool
	secrets  *credentials.Secrets
	backends map[string]backends.Backend
	recorder record.EventRecorder
}

// New returns a provider for cfg; it talks to no vCenter until Start.
func New(cfg *config.Config, opts Options) *Cloud {
	if opts.NewBackend == nil {
		opts.NewBackend = GovmomiBackend
	}
	c := &Cloud{opts: opts, backends: map[string]backends.Backend{}, discovery: discovery.New(nil, opts.Discovery)}
	c.cfg.Store(cfg)
	return c
}

// Factory reads the --cloud-config file for cloudprovider.RegisterCloudProvider.
func Factory(r io.Reader) (cloudprovider.Interface, error) {
	if r == nil {
		return nil, errors.New("vsphere: --cloud-config is required")
	}
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("vsphere: reading cloud config: %w", err)
	}
	cfg, err := config.Parse(data)
	if err != nil {
		return nil, fmt.Errorf("vsphere: %w", err)
	}
	return New(cfg, Options{}), nil
}

// Initialize implements cloudprovider.Interface.
func (c *Cloud) Initialize(clientBuilder cloudprovider.ControllerClientBuilder, stop <-chan struct{}) {
	c.Start(clientBuilder.ClientOrDie("vsphere-federated-ccm"), stop)
}

// Start connects the provider to Kubernetes (Secrets, Events) and creates the
// vCenter backends. Sessions open lazily, in parallel, on first lookup.
func (c *Cloud) Start(client kubernetes.Interface, stop <-chan struct{}) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.started {
		return
	}
	c.started = true
	if client != nil {
		c.secrets = credentials.NewSecrets(client, stop)
		b := record.NewBroadcaster()
		b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events("")})
		c.recorder = b.NewRecorder(scheme.Scheme, v1.EventSource{Component: "vsphere-federated-ccm"})
		go func() { <-stop; b.Shutdown() }()
	}
	c.applyLocked(c.cfg.Load())
}

// applyLocked creates a backend per vCenter of cfg and hands them to discovery.
func (c *Cloud) applyLocked(cfg *config.Config) {
	vcs := make([]discovery.VCenter, 0, len(cfg.VCenters))
	for _, vc := range cfg.VCenters {
		b, ok := c.backends[vc.Name]
		if !ok {
			b = c.opts.NewBackend(vc, c.credentialSource(cfg, vc))
			c.backends[vc.Name] = b
		}
		vcs = append(vcs, discovery.VCenter{
			Name: vc.Name, Backend: b, Datacenters: vc.Datacenters, RequestTimeout: vc.RequestTimeout,
			ConsecutiveFailures: vc.Breaker.ConsecutiveFailures, OpenTimeout: vc.Breaker.OpenTimeout,
		})
	}
	c.discovery.SetVCenters(vcs)
}

// credentialSource picks, as CPI does: the Secret, else the secrets
// directory, else the user and password in the config file.
func (c *Cloud) credentialSource(cfg *config.Config, vc config.VCenterConfig) credentials.Source {
	switch {
	case vc.SecretName != "" && c.secrets != nil:
		return c.secrets.Source(vc.SecretNamespace, vc.SecretName, vc.Server)
	case cfg.SecretsDirectory != "":
		return credentials.Directory{Dir: cfg.SecretsDirectory, Server: vc.Server}
	default:
		return credentials.Static{User: vc.User, Password: vc.Password}
	}
}

// Stop logs every vCenter session out.
func (c *Cloud) Stop(ctx context.Context) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for name, b := range c.backends {
		if err := b.Close(ctx); err != nil {
			klog.FromContext(ctx).Info("Closing vCenter session failed", "vcenter", name, "err", err)
		}
	}
}

// LoadBalancer implements cloudprovider.Interface: not supported.
func (c *Cloud) LoadBalancer() (cloudprovider.LoadBalancer, bool) { return nil, false }

// Instances implements cloudprovider.Interface: InstancesV2 replaces it.
func (c *Cloud) Instances() (cloudprovider.Instances, bool) { return nil, false }

// InstancesV2 implements cloudprovider.Interface.
func (c *Cloud) InstancesV2() (cloudprovider.InstancesV2, bool) { return c, true }

// Zones implements cloudprovider.Interface: InstanceMetadata carries zones.
func (c *Cloud) Zones() (cloudprovider.Zones, bool) { return nil, false }

// Clusters implements cloudprovider.Interface: not supported.
func (c *Cloud) Clusters() (cloudprovider.Clusters, bool) { return nil, false }

// Routes implements cloudprovider.Interface: not supported.
func (c *Cloud) Routes() (cloudprovider.Routes, bool) { return nil, false }

// ProviderName implements cloudprovider.Interface.
func (c *Cloud) ProviderName() string { return ProviderName }

// HasClusterID implements cloudprovider.Interface.
func (c *Cloud) HasClusterID() bool { return true }
