package harness

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/test/vcsim"
)

// KubeletOptions shape the kubelet of one simulated VM (vm-kubelet: the
// real kubelet code with a fake container runtime, --cloud-provider=external,
// in its own network namespace holding the node IPs; see
// test/tools/vm-kubelet/main.go).
type KubeletOptions struct {
	Name       string            // Node name (required)
	SystemUUID string            // status.nodeInfo.systemUUID, as a Linux kubelet on the VM reports it
	NodeIPs    []string          // --node-ip: none, one, or a dual-stack pair
	ProviderID string            // --provider-id; empty: none
	Labels     map[string]string // --node-labels
	Dir        string            // root dir; its log is Dir/kubelet.log (required)
	// Args are more vm-kubelet arguments (--name=value), e.g.
	// --node-lease-duration-seconds or --host-ip.
	Args []string
}

// Kubelet is a running vm-kubelet process (a parent in the host's network
// namespace forwarding the apiserver, and the kubelet in a namespace of its
// own) in its own process group, dying with the test process.
type Kubelet struct {
	Opts KubeletOptions
	Bin  string

	kubeconfig string
	rootDir    string // Dir, or a short symbolic link to it
	linkDir    string // the directory of that link, removed by Close

	mu      sync.Mutex
	cmd     *exec.Cmd
	done    chan struct{}
	exitErr error
	starts  int
	untrack func()
	closed  bool
}

// provisionedKubelet caches test/provision.sh's vm-kubelet for the process.
var provisionedKubelet struct {
	sync.Mutex
	path string
}

// KubeletBinary returns the path of vm-kubelet: in dir when it holds one
// (a control plane's assets, as test/provision.sh builds them side by
// side), else from test/provision.sh (an older minor's assets, or a
// $KUBEBUILDER_ASSETS without it).
func KubeletBinary(dir string) (string, error) {
	if dir != "" {
		if bin := filepath.Join(dir, "vm-kubelet"); isExecutable(bin) {
			return bin, nil
		}
	}
	provisionedKubelet.Lock()
	defer provisionedKubelet.Unlock()
	if provisionedKubelet.path != "" {
		return provisionedKubelet.path, nil
	}
	out, err := provisionScript()
	if err != nil {
		return "", err
	}
	bin := filepath.Join(out, "vm-kubelet")
	if !isExecutable(bin) {
		return "", fmt.Errorf("harness: test/provision.sh built no vm-kubelet in %s", out)
	}
	provisionedKubelet.path = bin
	return bin, nil
}

func isExecutable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}

// kubeletUserMu serialises envtest's client certificate issuing, which is
// not documented as safe for concurrent use.
var kubeletUserMu sync.Mutex

// kubeletBinding grants the group system:nodes the bootstrap ClusterRole
// system:node.
//
// Why not the Node authorizer and NodeRestriction, as a cluster does: they
// are apiserver flags, and ControlPlane's flags are the e2e suite's (every
// scenario and the CCM's own RBAC run against them). So each kubelet has the
// real identity, a client certificate for system:node:<name> in group
// system:nodes, authorized by RBAC with the role clusters bound to that
// group before the Node authorizer existed (Kubernetes still maintains it).
// What differs from a cluster: a kubelet could also write other Nodes (no
// NodeRestriction), and the role's list of resources may trail what the
// Node authorizer grants a 1.37 kubelet (forbidden answers in its log, for
// features these Nodes do not use).
const kubeletBinding = "harness:system:nodes"

func ensureKubeletRBAC(ctx context.Context, cp *ControlPlane) error {
	crb := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: kubeletBinding},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "system:node"},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.GroupKind, Name: "system:nodes"}},
	}
	_, err := cp.Client.RbacV1().ClusterRoleBindings().Create(ctx, crb, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("harness: ClusterRoleBinding %s: %w", kubeletBinding, err)
	}
	return nil
}

// writeKubeletKubeconfig writes a kubeconfig for system:node:<name> in group
// system:nodes, a client certificate from the apiserver's client CA.
func writeKubeletKubeconfig(cp *ControlPlane, name, path string) error {
	base := &rest.Config{Host: cp.Config.Host, TLSClientConfig: rest.TLSClientConfig{CAData: cp.Config.CAData}}
	user := "system:node:" + name
	kubeletUserMu.Lock()
	u, err := cp.Env.AddUser(envtest.User{Name: user, Groups: []string{"system:nodes"}}, base)
	kubeletUserMu.Unlock()
	if err != nil {
		return fmt.Errorf("harness: client certificate for %s: %w", user, err)
	}
	return WriteKubeconfig(path, u.Config(), user)
}

// maxKubeletRootDir is vm-kubelet's bound on --root-dir (unix socket paths
// under it must fit in 107 bytes).
const maxKubeletRootDir = 107 - len("/pod-resources/kubelet.sock")

// StartKubelet starts the kubelet of o.Name against cp, as
// system:node:<name>. It returns once the process runs; it does not wait
// for the Node (WaitForNodes).
func StartKubelet(cp *ControlPlane, o KubeletOptions) (_ *Kubelet, err error) {
	if o.Name == "" {
		return nil, errors.New("harness: KubeletOptions.Name is required")
	}
	if o.Dir == "" {
		return nil, errors.New("harness: KubeletOptions.Dir is required")
	}
	if len(o.NodeIPs) > 2 {
		return nil, fmt.Errorf("harness: KubeletOptions.NodeIPs %q: none, one or a dual-stack pair", o.NodeIPs)
	}
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		return nil, err
	}
	if o.Dir, err = filepath.Abs(o.Dir); err != nil {
		return nil, err
	}
	k := &Kubelet{Opts: o, rootDir: o.Dir}
	defer func() {
		if err != nil {
			k.Close()
		}
	}()
	if k.Bin, err = KubeletBinary(cp.Env.BinaryAssetsDirectory); err != nil {
		return nil, err
	}
	if len(o.Dir) > maxKubeletRootDir {
		// The kubelet binds sockets under its root dir; a path too long for
		// them is reached through a short link, the files staying in Dir.
		if k.linkDir, err = os.MkdirTemp("", "vmk"); err != nil {
			return nil, err
		}
		k.rootDir = filepath.Join(k.linkDir, "r")
		if err := os.Symlink(o.Dir, k.rootDir); err != nil {
			return nil, err
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := ensureKubeletRBAC(ctx, cp); err != nil {
		return nil, err
	}
	k.kubeconfig = filepath.Join(o.Dir, "kubeconfig")
	if err := writeKubeletKubeconfig(cp, o.Name, k.kubeconfig); err != nil {
		return nil, err
	}
	if err := k.start(); err != nil {
		return nil, err
	}
	return k, nil
}

// args are vm-kubelet's arguments for o.
func (k *Kubelet) args() []string {
	o := k.Opts
	args := []string{
		"--kubeconfig=" + k.kubeconfig,
		"--name=" + o.Name,
		"--root-dir=" + k.rootDir,
		"--v=2",
	}
	if o.SystemUUID != "" {
		args = append(args, "--system-uuid="+o.SystemUUID)
	}
	if len(o.NodeIPs) > 0 {
		args = append(args, "--node-ip="+strings.Join(o.NodeIPs, ","))
	}
	if o.ProviderID != "" {
		args = append(args, "--provider-id="+o.ProviderID)
	}
	if len(o.Labels) > 0 {
		var kv []string
		for key, v := range o.Labels {
			kv = append(kv, key+"="+v)
		}
		slices.Sort(kv)
		args = append(args, "--node-labels="+strings.Join(kv, ","))
	}
	return append(args, o.Args...)
}

func (k *Kubelet) start() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.closed {
		return fmt.Errorf("harness: the kubelet of %s is closed", k.Opts.Name)
	}
	if k.cmd != nil && !isClosed(k.done) {
		return fmt.Errorf("harness: the kubelet of %s is already running (pid %d)", k.Opts.Name, k.cmd.Process.Pid)
	}
	// One log across restarts, each start marked, so LogPath stays the
	// same for a test reading it.
	log, err := os.OpenFile(k.LogPath(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	k.starts++
	args := k.args()
	fmt.Fprintf(log, "==> harness: start %d at %s: %s %s\n", k.starts, time.Now().Format(time.RFC3339Nano), k.Bin, strings.Join(args, " "))
	cmd := exec.Command(k.Bin, args...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		_ = log.Close()
		return fmt.Errorf("harness: starting the kubelet of %s: %w", k.Opts.Name, err)
	}
	done := make(chan struct{})
	k.cmd, k.done, k.exitErr = cmd, done, nil
	if k.untrack == nil {
		k.untrack = track(k.Close)
	}
	go func() {
		err := cmd.Wait()
		_ = log.Close()
		k.mu.Lock()
		k.exitErr = err
		k.mu.Unlock()
		close(done)
	}()
	return nil
}

// Kill sends SIGKILL to the process group (parent and kubelet) and waits
// for the exit: the kubelet stops heartbeating, its Node stays.
func (k *Kubelet) Kill() error {
	k.mu.Lock()
	cmd, done := k.cmd, k.done
	k.mu.Unlock()
	if cmd == nil || isClosed(done) {
		return nil
	}
	if err := syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("harness: killing the kubelet of %s: %w", k.Opts.Name, err)
	}
	select {
	case <-done:
		return nil
	case <-time.After(30 * time.Second):
		return fmt.Errorf("harness: the kubelet of %s did not exit within 30s of SIGKILL", k.Opts.Name)
	}
}

// Restart starts a new process with the same options (killing the running
// one first): the same Node, heartbeating again.
func (k *Kubelet) Restart() error {
	if err := k.Kill(); err != nil {
		return err
	}
	return k.start()
}

// Close kills the process and forgets it; safe to call more than once.
func (k *Kubelet) Close() {
	_ = k.Kill()
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.closed {
		return
	}
	k.closed = true
	if k.untrack != nil {
		k.untrack()
		k.untrack = nil
	}
	if k.linkDir != "" {
		_ = os.RemoveAll(k.linkDir)
	}
}

// LogPath is the kubelet's log, Dir/kubelet.log, all starts appended.
func (k *Kubelet) LogPath() string { return filepath.Join(k.Opts.Dir, "kubelet.log") }

// Pid of the current process (vm-kubelet's parent); 0 when never started.
func (k *Kubelet) Pid() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.cmd == nil {
		return 0
	}
	return k.cmd.Process.Pid
}

// Running reports whether the current process has not exited.
func (k *Kubelet) Running() bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.cmd != nil && !isClosed(k.done)
}

// ExitErr is the current process's wait error once it exited.
func (k *Kubelet) ExitErr() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.exitErr
}

// Tail returns the last n lines of the log, for failure reports.
func (k *Kubelet) Tail(n int) string {
	data, _ := os.ReadFile(k.LogPath())
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return fmt.Sprintf("==> %s (last %d lines) <==\n%s\n", k.LogPath(), len(lines), strings.Join(lines, "\n"))
}

// StartKubelet starts vm's kubelet against the Env's control plane: Name
// NodeName(vm), SystemUUID vm.SystemUUID() and Dir <Opts.Dir>/kubelets/<name>
// unless set. The Env closes it.
func (e *Env) StartKubelet(vm *vcsim.VM, o KubeletOptions) (*Kubelet, error) {
	if o.Name == "" {
		o.Name = NodeName(vm)
	}
	if o.SystemUUID == "" {
		o.SystemUUID = vm.SystemUUID()
	}
	if o.Dir == "" {
		o.Dir = filepath.Join(e.Opts.Dir, "kubelets", o.Name)
	}
	e.mu.Lock()
	closed := e.closed
	e.mu.Unlock()
	if closed {
		return nil, errors.New("harness: the Env is closed")
	}
	k, err := StartKubelet(e.ControlPlane, o)
	if err != nil {
		return nil, err
	}
	e.mu.Lock()
	e.closers = append(e.closers, k.Close)
	e.mu.Unlock()
	e.Opts.Logf("started the kubelet of %s (pid %d), log %s", o.Name, k.Pid(), k.LogPath())
	return k, nil
}
