// Command vm-kubelet is the kubelet of a simulated vSphere VM, for the tests:
// the real kubelet code of k8s.io/kubernetes (through pkg/kubemark: a fake
// CRI runtime and a stub container manager, so no containers run) registering
// and heartbeating a Node as the kubelet on that VM would, with
// --cloud-provider=external.
//
// What it reports as the VM's:
//   - status.nodeInfo.systemUUID: --system-uuid (kubemark's fake cAdvisor
//     reports none; a Linux kubelet reports the DMI product UUID, which for a
//     vSphere VM is its BIOS UUID with the first three groups byte-swapped).
//   - --node-ip: the kubelet checks a node IP against the host's own
//     interfaces (validateNodeIP, net.InterfaceAddrs), which never carry a
//     simulated VM's addresses. So the process re-execs itself in a new
//     network namespace (CLONE_NEWNET) where the node IPs (and any
//     --host-ip) are put on lo. That namespace cannot reach the apiserver on
//     the host's 127.0.0.1, so the parent, left in the host namespace, serves
//     a unix socket in --root-dir and forwards each connection to the
//     apiserver's host:port from the kubeconfig; the kubelet dials that
//     socket (filesystem sockets are reachable across network namespaces)
//     and TLS still verifies the apiserver's certificate for its URL. Each
//     kubelet has its own namespace, so its ports never clash with another's.
//   - --provider-id: none unless given (kubemark hard-codes kubemark://<name>;
//     a kubelet with --cloud-provider=external leaves it to the CCM).
//
// Heartbeats. Defaults: a Lease of 10s (the kubelet renews it every quarter
// of its duration: 2.5s) and a node status every 5s (as with a real kubelet
// given --node-status-update-frequency, the status is also reported at that
// period, not only on change). A kube-controller-manager with
// --node-monitor-grace-period of 10-15s then sees four or more renewals per
// grace period, so a live kubelet never goes Unknown on a busy 2-core
// machine, while a killed one does within seconds. The real defaults (40s
// lease, 10s status, 5m report) would make tests wait ~a minute.
//
// The parent exits with the kubelet's status (128+signal when it was killed
// by one); SIGTERM or SIGINT to the parent is passed to the kubelet. The
// kubelet dies with the parent (parent-death signal) and is in its process
// group, so SIGKILL to the group stops both at once. Creating the namespace
// needs CAP_SYS_ADMIN (root); without it vm-kubelet fails, saying so,
// rather than running in the host namespace where --node-ip cannot work.
package main

import (
	"context"
	"errors"
	goflag "flag"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"

	cadvisorapi "github.com/google/cadvisor/lib/model"
	"github.com/spf13/pflag"
	"github.com/vishvananda/netlink"
	clientset "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	cliflag "k8s.io/component-base/cli/flag"
	"k8s.io/component-base/version"
	remote "k8s.io/cri-client/pkg"
	fakeremote "k8s.io/cri-client/pkg/fake"
	"k8s.io/klog/v2"
	cadvisortest "k8s.io/kubernetes/pkg/kubelet/cadvisor/testing"
	"k8s.io/kubernetes/pkg/kubelet/cm"
	"k8s.io/kubernetes/pkg/kubemark"
	netutils "k8s.io/utils/net"
)

// childEnv marks the re-executed process that runs the kubelet in the new
// network namespace.
const childEnv = "VM_KUBELET_IN_NETNS"

// Files in --root-dir. The apiserver socket is named relative to the root
// dir, both processes' working directory, so its path is never too long.
const (
	apiserverSocket = "apiserver.sock"
	criSocket       = "cri.sock"
)

// maxRootDir bounds --root-dir: the kubelet's longest socket under it,
// pod-resources/kubelet.sock, must fit in a unix socket address (107 bytes).
const maxRootDir = 107 - len("/pod-resources/kubelet.sock")

type options struct {
	kubeconfig   string
	name         string
	systemUUID   string
	nodeIP       string
	hostIPs      []string
	providerID   string
	nodeLabels   map[string]string
	rootDir      string
	leaseSeconds int32
	statusFreq   time.Duration
	port         int
	readOnlyPort int
	healthzPort  int
	maxPods      int
}

func main() {
	o := options{nodeLabels: map[string]string{}}
	fs := pflag.NewFlagSet("vm-kubelet", pflag.ContinueOnError)
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig of the kubelet's identity (required)")
	fs.StringVar(&o.name, "name", "", "Node name (required)")
	fs.StringVar(&o.systemUUID, "system-uuid", "", "status.nodeInfo.systemUUID to report")
	fs.StringVar(&o.nodeIP, "node-ip", "", "the kubelet's --node-ip: one IP or a comma-separated dual-stack pair, put on lo in the kubelet's network namespace")
	fs.StringSliceVar(&o.hostIPs, "host-ip", nil, "more addresses for lo in the kubelet's network namespace")
	fs.StringVar(&o.providerID, "provider-id", "", "the kubelet's --provider-id; empty: none")
	labels := cliflag.ConfigurationMap(o.nodeLabels)
	fs.Var(&labels, "node-labels", "labels to register the Node with (k=v,...)")
	fs.StringVar(&o.rootDir, "root-dir", "", fmt.Sprintf("the kubelet's root directory, also holding the apiserver and CRI sockets (required, at most %d bytes)", maxRootDir))
	fs.Int32Var(&o.leaseSeconds, "node-lease-duration-seconds", 10, "duration of the Node's Lease; renewed every quarter of it")
	fs.DurationVar(&o.statusFreq, "node-status-update-frequency", 5*time.Second, "period of node status computation and report")
	fs.IntVar(&o.port, "kubelet-port", 10250, "the kubelet's port, in its own network namespace")
	fs.IntVar(&o.readOnlyPort, "kubelet-read-only-port", 0, "the kubelet's read-only port; 0: none, as a kubelet's configuration file defaults to")
	fs.IntVar(&o.healthzPort, "healthz-port", 10248, "the kubelet's healthz port on 127.0.0.1, in its own network namespace")
	fs.IntVar(&o.maxPods, "max-pods", 110, "pods the Node reports room for")
	klogFlags := goflag.NewFlagSet("klog", goflag.ContinueOnError)
	klog.InitFlags(klogFlags)
	fs.AddGoFlagSet(klogFlags)
	if err := fs.Parse(os.Args[1:]); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			os.Exit(0)
		}
		fmt.Fprintln(os.Stderr, "vm-kubelet:", err)
		os.Exit(2)
	}
	if err := o.validate(); err != nil {
		fmt.Fprintln(os.Stderr, "vm-kubelet:", err)
		os.Exit(2)
	}
	if os.Getenv(childEnv) == "1" {
		if err := runKubelet(o); err != nil {
			klog.ErrorS(err, "vm-kubelet")
			klog.Flush()
			os.Exit(1)
		}
		return
	}
	code, err := runParent(o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "vm-kubelet:", err)
		os.Exit(1)
	}
	os.Exit(code)
}

func (o *options) validate() error {
	switch {
	case o.kubeconfig == "":
		return errors.New("--kubeconfig is required")
	case o.name == "":
		return errors.New("--name is required")
	case o.rootDir == "":
		return errors.New("--root-dir is required")
	case o.leaseSeconds <= 0:
		return errors.New("--node-lease-duration-seconds must be positive")
	case o.statusFreq <= 0:
		return errors.New("--node-status-update-frequency must be positive")
	}
	var err error
	if o.rootDir, err = filepath.Abs(o.rootDir); err != nil {
		return err
	}
	if o.kubeconfig, err = filepath.Abs(o.kubeconfig); err != nil {
		return err
	}
	if len(o.rootDir) > maxRootDir {
		return fmt.Errorf("--root-dir %s is %d bytes, more than the %d that leave room for the kubelet's unix sockets under it (use a shorter path, or a symbolic link to it)", o.rootDir, len(o.rootDir), maxRootDir)
	}
	if _, err := o.loIPs(); err != nil {
		return err
	}
	return nil
}

// loIPs are the addresses to put on lo: the node IPs, then --host-ip.
func (o *options) loIPs() ([]net.IP, error) {
	var ips []net.IP
	var all []string
	if o.nodeIP != "" {
		all = strings.Split(o.nodeIP, ",")
		if len(all) > 2 {
			return nil, fmt.Errorf("--node-ip %q: one IP or a dual-stack pair", o.nodeIP)
		}
	}
	all = append(all, o.hostIPs...)
	for _, s := range all {
		ip := netutils.ParseIPSloppy(strings.TrimSpace(s))
		if ip == nil {
			return nil, fmt.Errorf("%q is not an IP address", s)
		}
		ips = append(ips, ip)
	}
	return ips, nil
}

// runParent serves the apiserver socket and runs the kubelet as a child in a
// new network namespace, returning its exit code.
func runParent(o options) (int, error) {
	if err := os.MkdirAll(o.rootDir, 0o755); err != nil {
		return 0, err
	}
	if err := os.Chdir(o.rootDir); err != nil {
		return 0, err
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", o.kubeconfig)
	if err != nil {
		return 0, fmt.Errorf("kubeconfig %s: %w", o.kubeconfig, err)
	}
	target, err := hostPort(cfg.Host)
	if err != nil {
		return 0, err
	}
	_ = os.Remove(apiserverSocket) // a killed run's
	ln, err := net.Listen("unix", apiserverSocket)
	if err != nil {
		return 0, fmt.Errorf("listening on %s: %w", filepath.Join(o.rootDir, apiserverSocket), err)
	}
	defer ln.Close()
	go forward(ln, target)

	self, err := os.Executable()
	if err != nil {
		return 0, err
	}
	cmd := exec.Command(self, os.Args[1:]...)
	cmd.Env = append(os.Environ(), childEnv+"=1")
	cmd.Dir = o.rootDir
	cmd.Stdin, cmd.Stdout, cmd.Stderr = nil, os.Stdout, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNET, Pdeathsig: syscall.SIGKILL}

	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	started := make(chan error, 1)
	exited := make(chan error, 1)
	go func() {
		// The parent-death signal fires when the thread that forked the
		// child exits, not the process: this thread stays locked (never
		// handed back to the Go scheduler, which may end idle threads)
		// until the process exits.
		runtime.LockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		exited <- cmd.Wait()
	}()
	if err := <-started; err != nil {
		if errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.EINVAL) {
			return 0, fmt.Errorf("cannot start the kubelet in a new network namespace (clone with CLONE_NEWNET: %w): it needs CAP_SYS_ADMIN (run as root), and the kubelet cannot accept a simulated VM's --node-ip in the host's namespace", err)
		}
		return 0, fmt.Errorf("starting the kubelet: %w", err)
	}
	for {
		select {
		case sig := <-sigs:
			_ = cmd.Process.Signal(sig)
		case err := <-exited:
			var ee *exec.ExitError
			switch {
			case err == nil:
				return 0, nil
			case errors.As(err, &ee):
				if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
					return 128 + int(ws.Signal()), nil
				}
				return ee.ExitCode(), nil
			default:
				return 0, err
			}
		}
	}
}

// hostPort is the host:port of an apiserver URL.
func hostPort(host string) (string, error) {
	u, err := url.Parse(host)
	if err != nil || u.Host == "" {
		return "", fmt.Errorf("apiserver address %q: want https://host:port", host)
	}
	if u.Port() != "" {
		return u.Host, nil
	}
	if u.Scheme == "http" {
		return net.JoinHostPort(u.Hostname(), "80"), nil
	}
	return net.JoinHostPort(u.Hostname(), "443"), nil
}

// forward copies each connection on ln to a new TCP connection to target,
// both ways, until either side closes.
func forward(ln net.Listener, target string) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			up, err := net.DialTimeout("tcp", target, 10*time.Second)
			if err != nil {
				fmt.Fprintf(os.Stderr, "vm-kubelet: forwarding to the apiserver at %s: %v\n", target, err)
				return
			}
			defer up.Close()
			done := make(chan struct{}, 2)
			go func() { _, _ = io.Copy(up, c); closeWrite(up); done <- struct{}{} }()
			go func() { _, _ = io.Copy(c, up); closeWrite(c); done <- struct{}{} }()
			<-done
			<-done
		}()
	}
}

func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	}
}

// setUpLoopback brings lo up in this (new) network namespace and puts ips on
// it as host addresses, so the kubelet finds them among its interfaces.
func setUpLoopback(ips []net.IP) error {
	lo, err := netlink.LinkByName("lo")
	if err != nil {
		return fmt.Errorf("lo: %w", err)
	}
	if err := netlink.LinkSetUp(lo); err != nil {
		return fmt.Errorf("lo up: %w", err)
	}
	for _, ip := range ips {
		bits := 128
		if ip.To4() != nil {
			ip, bits = ip.To4(), 32
		}
		addr := &netlink.Addr{IPNet: &net.IPNet{IP: ip, Mask: net.CIDRMask(bits, bits)}}
		if err := netlink.AddrAdd(lo, addr); err != nil && !errors.Is(err, syscall.EEXIST) {
			return fmt.Errorf("adding %s to lo: %w", addr.IPNet, err)
		}
	}
	return nil
}

// machine is kubemark's fake cAdvisor reporting the VM's system UUID, as
// cAdvisor reads it from DMI on a Linux VM.
type machine struct {
	cadvisortest.Fake
	systemUUID string
}

func (m *machine) MachineInfo(logger klog.Logger) (*cadvisorapi.MachineInfo, error) {
	info, err := m.Fake.MachineInfo(logger)
	if err != nil {
		return nil, err
	}
	info.SystemUUID = m.systemUUID
	return info, nil
}

// runKubelet runs in the new network namespace: it puts the addresses on lo
// and runs the kubelet until the process is killed.
func runKubelet(o options) error {
	ctx := context.Background()
	klog.InfoS("vm-kubelet", "version", version.Get().GitVersion, "node", o.name, "nodeIP", o.nodeIP, "systemUUID", o.systemUUID, "rootDir", o.rootDir)
	ips, err := o.loIPs()
	if err != nil {
		return err
	}
	if err := setUpLoopback(ips); err != nil {
		return err
	}

	cfg, err := clientcmd.BuildConfigFromFlags("", o.kubeconfig)
	if err != nil {
		return fmt.Errorf("kubeconfig %s: %w", o.kubeconfig, err)
	}
	// Every apiserver connection goes through the parent's socket; the URL
	// (and so the certificate's name checked) stays the kubeconfig's.
	sock := filepath.Join(o.rootDir, apiserverSocket)
	cfg.Dial = func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", sock)
	}
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	cfg.QPS, cfg.Burst = 10, 20
	cfg.UserAgent = "vm-kubelet/" + version.Get().GitVersion
	client, err := clientset.NewForConfig(cfg)
	if err != nil {
		return err
	}

	// GetHollowKubeletConfig makes its directories under the temporary
	// directory: keep them in the root dir, then point the kubelet at ours.
	tmp := filepath.Join(o.rootDir, "tmp")
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return err
	}
	if err := os.Setenv("TMPDIR", tmp); err != nil {
		return err
	}
	f, c := kubemark.GetHollowKubeletConfig(&kubemark.HollowKubeletOptions{
		NodeName:            o.name,
		KubeletPort:         o.port,
		KubeletReadOnlyPort: o.readOnlyPort,
		MaxPods:             o.maxPods,
		NodeLabels:          o.nodeLabels,
	})
	_ = os.RemoveAll(f.RootDirectory)
	f.RootDirectory = o.rootDir
	c.StaticPodPath = filepath.Join(o.rootDir, "static-pods")
	c.PodLogsDir = filepath.Join(o.rootDir, "pod-logs")
	for _, d := range []string{c.StaticPodPath, c.PodLogsDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	// As the kubelet on a VM of an external cloud provider: registers with
	// the uninitialized taint, annotates the node IPs it was given, and
	// names no provider ID unless told.
	f.CloudProvider = "external"
	f.NodeIP = o.nodeIP
	c.ProviderID = o.providerID
	c.NodeLeaseDurationSeconds = o.leaseSeconds
	c.NodeStatusUpdateFrequency.Duration = o.statusFreq
	// The kubelet's defaulting gives a set --node-status-update-frequency
	// as the report frequency too (pkg/kubelet/apis/config/v1beta1).
	c.NodeStatusReportFrequency.Duration = o.statusFreq
	c.HealthzPort = int32(o.healthzPort)
	c.HealthzBindAddress = "127.0.0.1"

	// Heartbeats (Lease and status) time out within one period, as
	// kubemark and the kubelet set them up.
	hb := rest.CopyConfig(cfg)
	hb.Timeout = min(o.statusFreq, time.Duration(o.leaseSeconds)*time.Second)
	hb.QPS = -1
	heartbeat, err := clientset.NewForConfig(hb)
	if err != nil {
		return err
	}

	runtimeEndpoint := "unix://" + filepath.Join(o.rootDir, criSocket)
	fake := fakeremote.NewFakeRemoteRuntime()
	if err := fake.Start(runtimeEndpoint); err != nil {
		return fmt.Errorf("fake CRI runtime: %w", err)
	}
	defer fake.Stop()
	runtimeService, err := remote.NewRemoteRuntimeServiceBuilder().
		WithEndpoint(runtimeEndpoint).
		WithConnectionTimeout(15 * time.Second).
		Build(ctx)
	if err != nil {
		return fmt.Errorf("CRI runtime client: %w", err)
	}

	hk := kubemark.NewHollowKubelet(f, c, client, heartbeat,
		&machine{Fake: cadvisortest.Fake{NodeName: o.name}, systemUUID: o.systemUUID},
		fake.ImageService, runtimeService, cm.NewStubContainerManager())
	hk.Run(ctx) // never returns; exits the process on error
	return nil
}
