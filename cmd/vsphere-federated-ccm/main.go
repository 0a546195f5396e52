// Command vsphere-federated-ccm is a Kubernetes cloud controller manager for
// Nodes spread over several vCenters. It takes every flag of
// k8s.io/cloud-provider's CCM; --cloud-provider must be "vsphere".
package main

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/cloud-provider/app"
	ccmconfig "k8s.io/cloud-provider/app/config"
	"k8s.io/cloud-provider/names"
	"k8s.io/cloud-provider/options"
	"k8s.io/component-base/cli"
	cliflag "k8s.io/component-base/cli/flag"
	_ "k8s.io/component-base/logs/json/register" // --logging-format=json
	"k8s.io/component-base/metrics/legacyregistry"
	_ "k8s.io/component-base/metrics/prometheus/clientgo" // client-go metrics on /metrics
	_ "k8s.io/component-base/metrics/prometheus/version"  // build info metric
	genericcontrollermanager "k8s.io/controller-manager/app"
	"k8s.io/controller-manager/controller"
	"k8s.io/klog/v2"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/backends"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/backends/vsphere"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/cloud"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/cloud/nodes"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/cloud/servingcert"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config/credentials"
)

// Set at build time: go build -ldflags "-X main.version=v0.1.0 -X
// main.commit=<sha>" (the image build does); when empty, the module's
// build information is used. Read once, by buildInfo.
var (
	version string
	commit  string
)

// buildInfo names this binary: the ldflags values, else what the Go
// toolchain recorded (module version, VCS revision, "-dirty" when modified).
func buildInfo() cloud.BuildInfo {
	b := cloud.BuildInfo{Version: version, Commit: commit, GoVersion: runtime.Version()}
	if info, ok := debug.ReadBuildInfo(); ok {
		if b.Version == "" && info.Main.Version != "(devel)" {
			b.Version = info.Main.Version
		}
		if b.Commit == "" {
			vcs := map[string]string{}
			for _, s := range info.Settings {
				vcs[s.Key] = s.Value
			}
			b.Commit = vcs["vcs.revision"]
			if b.Commit != "" && vcs["vcs.modified"] == "true" {
				b.Commit += "-dirty"
			}
		}
	}
	b.Version = cmp.Or(b.Version, "devel")
	b.Commit = cmp.Or(b.Commit, "unknown")
	return b
}

// versionRequested reports whether args ask for the version (the flag
// component-base registers would print Kubernetes' instead).
func versionRequested(args []string) bool {
	for _, a := range args {
		switch a {
		case "--version", "-version", "--version=true", "--version=raw":
			return true
		case "--":
			return false
		}
	}
	return false
}

func main() {
	build := buildInfo()
	// The operator commands share the binary (and so the image) and the
	// CCM's own code paths.
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case "validate":
			os.Exit(runValidate(os.Args[2:], os.Stdin, os.Stdout, os.Stderr, build))
		case "diagnose":
			os.Exit(runDiagnose(os.Args[2:], build, os.Stdout, os.Stderr))
		}
	}
	if versionRequested(os.Args[1:]) {
		fmt.Printf("vsphere-federated-ccm %s (commit %s, %s)\n", build.Version, build.Commit, build.GoVersion)
		return
	}
	switch limit, err := memoryLimit(os.Getenv); {
	case err != nil:
		klog.Background().Error(err, "No Go soft memory limit set")
	case limit > 0:
		debug.SetMemoryLimit(limit)
		klog.Background().V(1).Info("Go soft memory limit set", "bytes", limit, "from", memoryLimitEnv)
	}
	ccmOptions, err := options.NewCloudControllerManagerOptions()
	if err != nil {
		klog.Fatalf("unable to initialize command options: %v", err)
	}
	// As CPI: --cloud-provider defaults to vsphere, so a DaemonSet that
	// leaves it out runs unchanged (the flag's default is this value).
	ccmOptions.KubeCloudShared.CloudProvider.Name = cloud.ProviderName
	var nodeLabels map[string]string
	var vcentersPort int
	var unmanagedSelector string
	uninitializedAfter := nodes.DefaultUninitializedAfter
	refusedRetry := credentials.DefaultRetry.After
	problemInterval := cloud.DefaultProblemCheckInterval
	extra := cliflag.NamedFlagSets{}
	extra.FlagSet("cloud-node-controller").StringToStringVar(&nodeLabels, "node-labels", nil,
		"Labels to add to every Node at initialization (CPI's flag), e.g. --node-labels=node.example.com/site=vsphere,example.com/pool=")
	extra.FlagSet("cloud-node-controller").StringVar(&unmanagedSelector, unmanagedSelectorFlag, "",
		"Label selector of the Nodes this CCM leaves alone (bare-metal or another cloud's machines), besides those labelled "+nodes.LabelUnmanaged+"=true: "+
			"never looked up in vCenter, never written, never an error; reported present and running, never deleted. E.g. --"+unmanagedSelectorFlag+"=node.example.com/metal=true")
	extra.FlagSet("cloud-node-controller").DurationVar(&uninitializedAfter, "uninitialized-node-event-after", uninitializedAfter,
		"How long a Node may carry node.cloudprovider.kubernetes.io/uninitialized before a Warning Event "+nodes.ReasonNodeUninitialized+" says why (again when the reason changes)")
	extra.FlagSet("secure serving").IntVar(&vcentersPort, "vcenters-port", 0,
		"Port serving "+VCentersPath+" (each vCenter's reachability, breaker, session and inventory, as JSON) on --bind-address, with the secure port's certificate, authentication and authorization; 0 serves nothing")
	extra.FlagSet("vcenter").DurationVar(&problemInterval, "problem-check-interval", problemInterval,
		"How often the leader runs the periodic checks (configured datacenters missing, Nodes whose zone or region disagrees with the vSphere CSI driver's topology labels, more vCenters than the CSI driver serves, Nodes whose VM's virtual hardware is below the CSI driver's minimum, a vCenter login lacking privileges the CCM needs, read with its current session only): a gauge cloudprovider_vsphere_problems{check} and an Event when a finding appears or clears; 0 never")
	extra.FlagSet("vcenter").DurationVar(&refusedRetry, "refused-credentials-retry", refusedRetry,
		"How long after vCenter refused credentials they are sent again unchanged (changed ones are sent at once); the wait doubles with each refusal in a row, up to 8 times this. "+
			"Keep it well apart from vSphere SSO's lockout policy (default: 5 failed logins in 180 s); 0 never sends refused credentials again until they change. "+
			"Only the leader retries: a standby sends only credentials the leader logged in with")
	// Off by default: --controllers=*,kubelet-serving-cert-approver runs
	// it. The library reads this set when it parses --controllers.
	app.ControllersDisabledByDefault.Insert(servingcert.ControllerName)
	approverMetrics := servingcert.NewMetrics()
	legacyregistry.MustRegister(approverMetrics.Collectors()...)
	var provider *cloud.Cloud // set by the cloud initializer, before any controller starts
	command := app.NewCloudControllerManagerCommand(ccmOptions,
		func(c *ccmconfig.CompletedConfig) cloudprovider.Interface {
			provider = initCloud(c, nodeLabels, unmanagedSelector, uninitializedAfter, refusedRetry, problemInterval, build)
			prepare(c, provider)
			// Fatal, not logged: a port asked for and not served would
			// only show as a /vcenters that never answers.
			if err := serveVCenters(c, provider, vcentersPort, wait.NeverStop); err != nil {
				klog.Fatalf("Not serving %s: %v", VCentersPath, err)
			}
			return provider
		},
		controllers(func() servingcert.VMs { return provider }, approverMetrics), names.CCMControllerAliases(), extra, wait.NeverStop)
	os.Exit(cli.Run(command))
}

// initCloud builds the provider from --cloud-provider and --cloud-config.
// It is called once, before the controllers start; a bad config stops the
// process here with the full list of problems. Later edits of the file are
// applied in place (an invalid edit is rejected and the last good config
// keeps serving).
func initCloud(c *ccmconfig.CompletedConfig, nodeLabels map[string]string, unmanagedSelector string, uninitializedAfter, refusedRetry, problemInterval time.Duration, build cloud.BuildInfo) *cloud.Cloud {
	shared := c.ComponentConfig.KubeCloudShared.CloudProvider
	if shared.Name != cloud.ProviderName {
		klog.Fatalf("--cloud-provider=%q: this CCM only serves %q", shared.Name, cloud.ProviderName)
	}
	if shared.CloudConfigFile == "" {
		klog.Fatalf("--cloud-config is required")
	}
	for k, v := range nodeLabels {
		if errs := append(validation.IsQualifiedName(k), validation.IsValidLabelValue(v)...); len(errs) > 0 {
			klog.Fatalf("--node-labels %s=%s: %s", k, v, strings.Join(errs, "; "))
		}
	}
	unmanaged, err := parseUnmanagedSelector(unmanagedSelector)
	if err != nil {
		klog.Fatal(err)
	}
	if uninitializedAfter <= 0 {
		klog.Fatalf("--uninitialized-node-event-after=%s: want more than 0", uninitializedAfter)
	}
	klog.Background().Info("Starting", "version", build.Version, "commit", build.Commit, "go", build.GoVersion)
	metrics := cloud.NewMetrics(build)
	legacyregistry.MustRegister(metrics.Collectors()...)
	legacyregistry.CustomMustRegister(metrics.CustomCollectors()...)
	if refusedRetry < 0 {
		klog.Fatalf("--refused-credentials-retry=%s: want 0 or more", refusedRetry)
	}
	opts := providerOptions(build, &credentials.Retry{After: refusedRetry, Max: 8 * refusedRetry})
	opts.Metrics, opts.NodeLabels, opts.UnmanagedNodeSelector = metrics, nodeLabels, unmanaged
	opts.UninitializedAfter = uninitializedAfter
	if problemInterval < 0 {
		klog.Fatalf("--problem-check-interval=%s: want 0 (never) or more", problemInterval)
	}
	opts.ProblemCheckInterval = cmp.Or(problemInterval, -1) // -1: never
	// Events about configuration and credentials name this replica's Pod
	// (the DaemonSet sets these downward API variables); outside a Pod,
	// the provider's default object.
	if name, ns := os.Getenv("POD_NAME"), os.Getenv("POD_NAMESPACE"); name != "" && ns != "" {
		opts.EventObject = &v1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: ns, Name: name}
	}
	// Standbys read whose logins the record holds from the Lease the
	// controllers elect their leader with.
	le := c.ComponentConfig.Generic.LeaderElection
	opts.LeaderLease = types.NamespacedName{Namespace: le.ResourceNamespace, Name: le.ResourceName}
	provider, err := cloud.NewFromFile(shared.CloudConfigFile, opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		klog.Fatalf("--cloud-config %s is invalid", shared.CloudConfigFile)
	}
	return provider
}

// prepare starts, before the leader election, what every replica may run
// (cloud.Cloud.Prepare): a standby keeps its vCenter sessions, inventories
// and tag caches loaded and current, so one that takes the lease serves
// at once instead of logging in and loading them then. It uses the
// identity Initialize will (the same client builder and name), so a
// standby reads with the leader's permissions.
func prepare(c *ccmconfig.CompletedConfig, provider *cloud.Cloud) {
	if !c.ComponentConfig.Generic.LeaderElection.LeaderElect {
		// No election: this process leads from the start, and a standby's
		// part (sending only what a leader logged in with) would hold its
		// first logins back until Initialize.
		return
	}
	client, err := c.ClientBuilder.Client(cloud.ClientName)
	if err != nil {
		// Not fatal: the leader's Initialize starts it all, as without.
		klog.Background().Error(err, "No Kubernetes client before the leader election; the vCenters are connected once this replica leads")
		return
	}
	provider.Prepare(client, wait.NeverStop)
}

// servingCertWorkers decide kubelet serving certificate requests: one
// lookup each, most answered from the inventories.
const servingCertWorkers = 2

// controllers are the cloud-provider's controllers and the kubelet serving
// certificate approver, which runs only when --controllers names it (like
// every controller, on the leader alone). provider is the one Initialize
// is called on: read when the controllers start, after it is set.
func controllers(provider func() servingcert.VMs, m *servingcert.Metrics) map[string]app.ControllerInitFuncConstructor {
	out := maps.Clone(app.DefaultInitFuncConstructors)
	out[servingcert.ControllerName] = app.ControllerInitFuncConstructor{
		// With --use-service-account-credentials, its own ServiceAccount
		// (the chart binds the approval rights to it only when enabled).
		InitContext: app.ControllerInitContext{ClientName: servingcert.ControllerName},
		Constructor: func(initContext app.ControllerInitContext, cc *ccmconfig.CompletedConfig, _ cloudprovider.Interface) app.InitFunc {
			return func(ctx context.Context, _ genericcontrollermanager.ControllerContext) (controller.Interface, bool, error) {
				client := cc.ClientBuilder.ClientOrDie(initContext.ClientName)
				broadcaster := record.NewBroadcaster(record.WithContext(ctx))
				broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events("")})
				recorder := broadcaster.NewRecorder(scheme.Scheme, v1.EventSource{Component: servingcert.ControllerName})
				a, err := servingcert.New(client, cc.SharedInformers.Certificates().V1().CertificateSigningRequests(),
					cc.SharedInformers.Core().V1().Nodes(), provider(), recorder, m, servingcert.Options{})
				if err != nil {
					broadcaster.Shutdown()
					return nil, false, err
				}
				go func() {
					defer broadcaster.Shutdown()
					a.Run(ctx, servingCertWorkers)
				}()
				return nil, true, nil
			}
		},
	}
	return out
}

// memoryLimitEnv names the container's memory limit in bytes (the chart
// sets it from the downward API, resourceFieldRef limits.memory): the Go
// runtime's soft limit is set to memoryLimitShare of it, so the heap is
// collected harder as it nears the limit instead of the container being
// OOM-killed. GOMEMLIMIT, when set, wins.
const memoryLimitEnv = "MEMORY_LIMIT"

// memoryLimitShare is the share of the container's limit the heap may
// reach: the rest is the runtime's own (stacks, fragmentation) and the
// kernel's.
const memoryLimitShare = 0.9

// memoryLimit is the Go soft memory limit memoryLimitEnv asks for: 0
// (none) when it is unset, or when GOMEMLIMIT is set (the runtime read
// it).
func memoryLimit(getenv func(string) string) (int64, error) {
	raw := getenv(memoryLimitEnv)
	if raw == "" || getenv("GOMEMLIMIT") != "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(strings.TrimSpace(raw), 10, 64)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("%s=%q: want the container's memory limit in bytes (resourceFieldRef limits.memory)", memoryLimitEnv, raw)
	}
	return int64(float64(n) * memoryLimitShare), nil
}

const unmanagedSelectorFlag = "unmanaged-node-selector"

// parseUnmanagedSelector parses --unmanaged-node-selector; empty: nil
// (only the label nodes.LabelUnmanaged marks Nodes unmanaged).
func parseUnmanagedSelector(s string) (labels.Selector, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	sel, err := labels.Parse(s)
	if err != nil {
		return nil, fmt.Errorf("--%s=%q: %w", unmanagedSelectorFlag, s, err)
	}
	return sel, nil
}

// providerOptions are the provider's options from the process's
// environment, as both the CCM and `diagnose` build it; refusedRetry is
// as vsphereBackends takes it.
func providerOptions(build cloud.BuildInfo, refusedRetry *credentials.Retry) cloud.Options {
	opts := cloud.Options{NewBackend: vsphereBackends(build.UserAgent(), refusedRetry), ConfigEnv: config.ProcessEnv()}
	// CPI's switch: set at all (any value) means no Node is deleted.
	_, opts.SkipNodeDeletion = os.LookupEnv("SKIP_NODE_DELETION")
	// The record of the vCenters served lives beside the Pod.
	opts.HistoryObject.Namespace = os.Getenv("POD_NAMESPACE")
	return opts
}

// vsphereBackends builds each vCenter's backend with backends/vsphere:
// its watch-fed inventory and bulk tag cache unless the config turns them
// off, userAgent on every request, so vCenter's session list shows who is
// logged in, and refused credentials sent again as refusedRetry says (nil:
// credentials.DefaultRetry).
func vsphereBackends(userAgent string, refusedRetry *credentials.Retry) cloud.BackendFactory {
	return func(vc config.VCenter, creds credentials.Source) backends.Backend {
		return vsphere.New(vsphere.Options{Config: vc, Credentials: creds, Inventory: vc.Inventory, UserAgent: userAgent, RefusedRetry: refusedRetry})
	}
}
