package harness

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config/credentials"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/test/vcsim"
)

// vcsimMu serialises vcsim.Start across Envs (parallel tests).
var vcsimMu sync.Mutex

// Options shape an Env. Zero values are the defaults noted.
type Options struct {
	// Dir receives the cloud config, kubeconfigs and every log; required.
	Dir string
	// ControlPlane to use; nil starts one owned (and stopped) by the Env.
	// A shared control plane needs callers to keep Nodes of different Envs
	// apart: a CCM acts on every Node of its cluster.
	ControlPlane *ControlPlane
	// AssetsDir for a control plane the Env starts; default Provision().
	AssetsDir string
	// Federation shape (vcsim.Options): 3 vCenters × 2 datacenters × 2
	// VMs per pool (4 VMs per datacenter) by default.
	VCenters, Datacenters, MachinesPerPool int
	// RequestTimeout, ConsecutiveFailures and OpenTimeout go to every
	// vCenter section of the cloud config; defaults 2s, 3 and 5s.
	RequestTimeout      string
	ConsecutiveFailures int
	OpenTimeout         string
	// MinAbsence is global.nodeDeletion.minAbsence; default 0s: a
	// destroyed VM's Node goes at its first confirmed absence, as the
	// scenarios that are not about the grace expect (the CCM's own
	// default is 30s).
	MinAbsence string
	// RealNodes: Nodes are registered by real kubelets (StartKubelet, one
	// process each) and watched by a real kube-controller-manager's
	// node-lifecycle controller, started with the Env. CreateNode starts
	// the VM's kubelet; SetReady(false) kills it and waits until the
	// controller marks the Node Unknown, SetReady(true) restarts it. Off,
	// the harness plays both: CreateNode posts the Node as a kubelet would
	// and SetReady edits its Ready condition (the scale bench, and the
	// older Kubernetes minors, whose apiserver a 1.37 kubelet may not be
	// newer than).
	RealNodes bool
	// ControllerManager shapes the RealNodes kube-controller-manager (Dir
	// and AssetsDir are filled in).
	ControllerManager ControllerManagerOptions
	// Logf, when set, narrates what the Env does.
	Logf func(format string, args ...any)
}

// Env is everything a CCM needs, wired as in a cluster: a control plane with
// the manifests of <repo>/manifests applied, a federation of simulated
// vCenters each behind a loopback Proxy, the cloud config (one vcenter.<name>
// section per simulator, credentials in the manifests' Secret), and a
// kubeconfig holding a token of the manifests' ServiceAccount, never the
// administrator's.
type Env struct {
	Opts         Options
	ControlPlane *ControlPlane
	// Client is the administrator, for fixtures (Nodes, the Secret).
	Client    kubernetes.Interface
	Manifests *Manifests
	Fed       *vcsim.Federation
	// Proxies by vCenter name; the cloud config points at them, so a test
	// can make a vCenter refuse connections or black-hole requests.
	Proxies map[string]*vcsim.Proxy
	// CloudConfig is the path of the cloud config file, CloudConfigYAML its text.
	CloudConfig     string
	CloudConfigYAML string
	// CCMKubeconfig authenticates as the ServiceAccount; CCMToken is its token.
	CCMKubeconfig string
	CCMToken      string
	CCMConfig     *rest.Config

	// ControllerManager runs with RealNodes.
	ControllerManager *CCMProcess

	mu       sync.Mutex
	ccms     []*CCMProcess
	kubelets map[string]*Kubelet // by Node name, RealNodes
	stopped  map[string]bool     // kubelets SetNodesReady killed
	closers  []func()
	untrack  func()
	closed   bool
}

// Start builds an Env. On error everything already started is stopped.
func Start(ctx context.Context, opts Options) (_ *Env, err error) {
	if opts.Dir == "" {
		return nil, errors.New("harness: Options.Dir is required")
	}
	if opts.RequestTimeout == "" {
		opts.RequestTimeout = "2s"
	}
	if opts.ConsecutiveFailures == 0 {
		opts.ConsecutiveFailures = 3
	}
	if opts.OpenTimeout == "" {
		opts.OpenTimeout = "5s"
	}
	if opts.MinAbsence == "" {
		opts.MinAbsence = "0s"
	}
	if opts.Logf == nil {
		opts.Logf = func(string, ...any) {}
	}
	if err := os.MkdirAll(opts.Dir, 0o755); err != nil {
		return nil, err
	}
	e := &Env{Opts: opts, Proxies: map[string]*vcsim.Proxy{}}
	e.untrack = track(e.Close)
	defer func() {
		if err != nil {
			e.Close()
		}
	}()

	start := time.Now()
	e.ControlPlane = opts.ControlPlane
	if e.ControlPlane == nil {
		cp, err := StartControlPlane(ControlPlaneOptions{AssetsDir: opts.AssetsDir, Dir: filepath.Join(opts.Dir, "controlplane")})
		if err != nil {
			return nil, err
		}
		e.ControlPlane = cp
		e.closers = append(e.closers, func() { _ = cp.Stop() })
		opts.Logf("control plane up at %s in %s", cp.Config.Host, time.Since(start).Round(time.Millisecond))
	}
	e.Client = e.ControlPlane.Client
	if opts.RealNodes {
		o := opts.ControllerManager
		o.Dir = filepath.Join(opts.Dir, "kube-controller-manager")
		if o.AssetsDir == "" {
			o.AssetsDir = e.ControlPlane.Env.BinaryAssetsDirectory
		}
		kcm, err := StartControllerManager(e.ControlPlane, o)
		if err != nil {
			return nil, err
		}
		e.ControllerManager = kcm
		e.closers = append(e.closers, func() { _ = kcm.Kill() })
	}

	dir, err := ManifestsDir()
	if err != nil {
		return nil, err
	}
	if e.Manifests, err = LoadManifests(dir); err != nil {
		return nil, err
	}
	if err := e.ControlPlane.Apply(ctx, e.Manifests.Objects); err != nil {
		return nil, err
	}
	opts.Logf("applied %d objects from %s (%s)", len(e.Manifests.Objects), dir, strings.Join(e.Manifests.Kustomization.Resources, ", "))

	fstart := time.Now()
	// Building simulator models concurrently races inside govmomi's
	// simulator (a package-level variable): one federation at a time.
	vcsimMu.Lock()
	e.Fed, err = vcsim.Start(vcsim.Options{VCenters: opts.VCenters, Datacenters: opts.Datacenters, MachinesPerPool: opts.MachinesPerPool})
	vcsimMu.Unlock()
	if err != nil {
		return nil, fmt.Errorf("harness: vcsim federation: %w", err)
	}
	fed := e.Fed
	e.closers = append(e.closers, fed.Close)
	for _, vc := range fed.VCenters {
		p, err := vcsim.NewProxy(vc.Host, fmt.Sprintf("%s:%d", vc.Host, vc.Port))
		if err != nil {
			return nil, fmt.Errorf("harness: proxy for %s: %w", vc.Name, err)
		}
		e.Proxies[vc.Name] = p
		e.closers = append(e.closers, p.Close)
	}
	opts.Logf("%d simulated vCenters with %d VMs in %s", len(fed.VCenters), len(fed.AllVMs()), time.Since(fstart).Round(time.Millisecond))

	if err := e.writeSecret(ctx); err != nil {
		return nil, err
	}
	e.CloudConfigYAML = e.cloudConfig()
	e.CloudConfig = filepath.Join(opts.Dir, "vsphere.conf")
	if err := os.WriteFile(e.CloudConfig, []byte(e.CloudConfigYAML), 0o600); err != nil {
		return nil, err
	}

	e.CCMToken, err = e.ControlPlane.ServiceAccountToken(ctx, Namespace, ServiceAccount, 2*time.Hour)
	if err != nil {
		return nil, err
	}
	e.CCMConfig = e.ControlPlane.ServiceAccountConfig(e.CCMToken)
	e.CCMKubeconfig = filepath.Join(opts.Dir, "ccm.kubeconfig")
	if err := WriteKubeconfig(e.CCMKubeconfig, e.CCMConfig, "system:serviceaccount:"+Namespace+":"+ServiceAccount); err != nil {
		return nil, err
	}
	return e, nil
}

// writeSecret fills the manifests' Secret with every vCenter's login under
// CPI's keys "<server>.username" and "<server>.password" (the placeholder
// keys of the example go).
func (e *Env) writeSecret(ctx context.Context) error {
	data := map[string][]byte{}
	for _, vc := range e.Fed.VCenters {
		data[credentials.UsernameKey(vc.Host)] = []byte(vc.User)
		data[credentials.PasswordKey(vc.Host)] = []byte(vc.Password)
	}
	secrets := e.Client.CoreV1().Secrets(Namespace)
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		s, err := secrets.Get(ctx, SecretName, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("harness: the manifests' Secret: %w", err)
		}
		s.Data, s.StringData = data, nil
		_, err = secrets.Update(ctx, s, metav1.UpdateOptions{})
		return err
	})
}

// cloudConfig is the config an operator would write for the federation.
func (e *Env) cloudConfig() string {
	var b strings.Builder
	b.WriteString("# Written by test/harness: one section per simulated vCenter, reached through its proxy.\n")
	fmt.Fprintf(&b, "global:\n  nodeDeletion: {minAbsence: %s}\n", e.Opts.MinAbsence)
	b.WriteString("labels:\n  zone: k8s-zone\n  region: k8s-region\nvcenter:\n")
	for _, vc := range e.Fed.VCenters {
		fmt.Fprintf(&b, "  %s:\n", vc.Name)
		fmt.Fprintf(&b, "    server: %s\n    port: %d\n    insecureFlag: true\n", vc.Host, e.Proxies[vc.Name].Port())
		fmt.Fprintf(&b, "    secretName: %s\n    secretNamespace: %s\n", SecretName, Namespace)
		fmt.Fprintf(&b, "    requestTimeout: %s\n    breaker:\n      consecutiveFailures: %d\n      openTimeout: %s\n",
			e.Opts.RequestTimeout, e.Opts.ConsecutiveFailures, e.Opts.OpenTimeout)
	}
	return b.String()
}

// CCMOptions are the per-process settings of a CCM.
type CCMOptions struct {
	// LeaderElect turns on leader election with short timings (lease 4s,
	// renew deadline 3s, retry 500ms) so a successor takes over in seconds.
	LeaderElect bool
	// LeaseName is --leader-elect-resource-name; default the DaemonSet's
	// (cloud-controller-manager).
	LeaseName string
	// ConcurrentNodeSyncs is --concurrent-node-syncs; default 4.
	ConcurrentNodeSyncs int
	// Flags override or extend the arguments (name without dashes → value).
	Flags map[string]string
	// Race runs the binary built with the race detector (BuildCCMRace);
	// check CCMProcess.RaceReports.
	Race bool
	// Image, an OCI archive of the CCM's image (test/image.sh), runs the
	// CCM from it instead of the binary built here: its entrypoint, as its
	// user, Dir mounted read-only (made readable as a kubelet mounts a
	// ConfigMap: see Image). Not with Race.
	Image string
	// Args, when set, replace the DaemonSet's arguments (e.g. CPI's own
	// DaemonSet's): only --cloud-config's path and what a process on this
	// host needs to reach the API server and serve its port are set, plus
	// Flags; no test timings.
	Args []string
}

// CCMArgs are the arguments the DaemonSet in the manifests gives the CCM,
// with the in-cluster paths and ports replaced for a process on this host,
// the ServiceAccount kubeconfig for the API and for delegated authentication
// of the secure port, and test timings.
func (e *Env) CCMArgs(o CCMOptions) ([]string, error) {
	base, err := DaemonSetArgs(e.Manifests)
	if err != nil {
		return nil, err
	}
	port, err := FreePort("127.0.0.1")
	if err != nil {
		return nil, err
	}
	if o.ConcurrentNodeSyncs == 0 {
		o.ConcurrentNodeSyncs = 4
	}
	set := map[string]string{
		"cloud-config":              e.CloudConfig,
		"kubeconfig":                e.CCMKubeconfig,
		"authentication-kubeconfig": e.CCMKubeconfig,
		"authorization-kubeconfig":  e.CCMKubeconfig,
		"bind-address":              "127.0.0.1",
		"secure-port":               strconv.Itoa(port),
	}
	if o.Args != nil {
		base = o.Args
	} else {
		set["leader-elect"] = strconv.FormatBool(o.LeaderElect)
		set["node-monitor-period"] = "1s"
		set["node-status-update-frequency"] = "20s"
		set["concurrent-node-syncs"] = strconv.Itoa(o.ConcurrentNodeSyncs)
		set["v"] = "2"
	}
	if o.LeaderElect {
		set["leader-elect-lease-duration"] = "4s"
		set["leader-elect-renew-deadline"] = "3s"
		set["leader-elect-retry-period"] = "500ms"
		if o.LeaseName != "" {
			set["leader-elect-resource-name"] = o.LeaseName
		}
	}
	for k, v := range o.Flags {
		set[k] = v
	}
	var args []string
	for _, a := range base {
		name, _, _ := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		if v, ok := set[name]; ok {
			args = append(args, "--"+name+"="+v)
			delete(set, name)
			continue
		}
		args = append(args, a)
	}
	var extra []string
	for k := range set {
		extra = append(extra, k)
	}
	slices.Sort(extra)
	for _, k := range extra {
		args = append(args, "--"+k+"="+set[k])
	}
	return args, nil
}

// DaemonSetArgs returns the CCM container's args of the manifests'
// DaemonSet; every one must have the --name=value form.
func DaemonSetArgs(m *Manifests) ([]string, error) {
	c, err := daemonSetContainer(m)
	if err != nil {
		return nil, err
	}
	args, _, err := unstructured.NestedStringSlice(c, "args")
	if err != nil {
		return nil, fmt.Errorf("harness: DaemonSet %s args: %w", DaemonSetName, err)
	}
	for _, a := range args {
		if !strings.HasPrefix(a, "--") || !strings.Contains(a, "=") {
			return nil, fmt.Errorf("harness: DaemonSet %s arg %q: want --name=value", DaemonSetName, a)
		}
	}
	return args, nil
}

// daemonSetContainer is the CCM's container of the DaemonSet in m.
func daemonSetContainer(m *Manifests) (map[string]any, error) {
	ds := m.Find("DaemonSet", Namespace, DaemonSetName)
	if ds == nil {
		return nil, fmt.Errorf("harness: no DaemonSet %s/%s in the manifests", Namespace, DaemonSetName)
	}
	containers, _, err := unstructured.NestedSlice(ds.Object, "spec", "template", "spec", "containers")
	if err != nil || len(containers) == 0 {
		return nil, fmt.Errorf("harness: DaemonSet %s has no containers (%w)", DaemonSetName, err)
	}
	c, _ := containers[0].(map[string]any)
	return c, nil
}

// DaemonSetEnv is the environment the DaemonSet in the manifests sets with
// literal values (GOGC), as NAME=value; what it takes from the downward
// API is left out.
func DaemonSetEnv(m *Manifests) ([]string, error) {
	c, err := daemonSetContainer(m)
	if err != nil {
		return nil, err
	}
	env, _, err := unstructured.NestedSlice(c, "env")
	if err != nil {
		return nil, fmt.Errorf("harness: DaemonSet %s env: %w", DaemonSetName, err)
	}
	var out []string
	for _, e := range env {
		e, _ := e.(map[string]any)
		name, _ := e["name"].(string)
		if v, ok := e["value"].(string); ok && name != "" {
			out = append(out, name+"="+v)
		}
	}
	return out, nil
}

// StartCCM builds the binary (once per process) and starts a CCM named name
// (its logs are <Dir>/<name>.<n>.log). It does not wait for it: see
// CCMProcess.WaitHealthy.
func (e *Env) StartCCM(name string, o CCMOptions) (*CCMProcess, error) {
	args, err := e.CCMArgs(o)
	if err != nil {
		return nil, err
	}
	var bin string
	var env []string
	switch {
	case o.Image != "" && o.Race:
		return nil, errors.New("harness: CCMOptions.Image and Race: the image holds no race-detector build")
	case o.Image != "":
		img, err := OpenImage(o.Image)
		if err != nil {
			return nil, err
		}
		e.mu.Lock()
		e.closers = append(e.closers, func() { _ = img.Close() })
		e.mu.Unlock()
		if err := mountLikeKubelet(e.Opts.Dir, e.CloudConfig, e.CCMKubeconfig); err != nil {
			return nil, err
		}
		bin, args = img.Command([]string{e.Opts.Dir}, args)
	default:
		build := BuildCCM
		if o.Race {
			build = BuildCCMRace
		}
		if bin, err = build(); err != nil {
			return nil, err
		}
		if env, err = DaemonSetEnv(e.Manifests); err != nil {
			return nil, err
		}
	}
	p, err := StartCCMProcess(name, bin, e.Opts.Dir, args, env...)
	if err != nil {
		return nil, err
	}
	e.mu.Lock()
	e.ccms = append(e.ccms, p)
	e.mu.Unlock()
	e.Opts.Logf("started %s (pid %d): %s %s", name, p.Pid(), bin, strings.Join(args, " "))
	return p, nil
}

// CCMs lists the CCM processes started, in order.
func (e *Env) CCMs() []*CCMProcess {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]*CCMProcess(nil), e.ccms...)
}

// NodeName is the Node name of a VM (its VM name, as on most clusters).
func NodeName(vm *vcsim.VM) string { return vm.Name }

// CreateNode registers vm's Node: with RealNodes its kubelet does
// (Env.StartNode), else the harness posts it as a kubelet would.
func (e *Env) CreateNode(ctx context.Context, vm *vcsim.VM) (*corev1.Node, error) {
	if e.Opts.RealNodes {
		return e.StartNode(ctx, vm, KubeletOptions{})
	}
	return CreateKubeletNode(ctx, e.Client, NodeName(vm), vm.SystemUUID())
}

// SetReady makes the Node of vm Ready or not: see SetNodesReady.
func (e *Env) SetReady(ctx context.Context, vm *vcsim.VM, ready bool) error {
	return e.SetNodesReady(ctx, []*vcsim.VM{vm}, ready)
}

// Close kills every CCM and stops the federation, the proxies and the control
// plane it started, newest first; safe to call more than once.
func (e *Env) Close() {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return
	}
	e.closed = true
	ccms, closers := e.ccms, e.closers
	e.mu.Unlock()
	for _, p := range ccms {
		_ = p.Close()
	}
	for i := len(closers) - 1; i >= 0; i-- {
		closers[i]()
	}
	if e.untrack != nil {
		e.untrack()
	}
}
