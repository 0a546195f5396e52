package harness

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// ControllerManagerOptions shape a kube-controller-manager. Zero values are
// the defaults noted.
type ControllerManagerOptions struct {
	// Dir receives its log (kube-controller-manager.<n>.log); required.
	Dir string
	// AssetsDir holds the kube-controller-manager binary test/provision.sh
	// builds beside kube-apiserver; default Provision().
	AssetsDir string
	// Controllers to run; default only node-lifecycle-controller, the one a
	// CCM's Nodes depend on (it marks a silent Node Unknown and taints it
	// unreachable; only then does the cloud-node-lifecycle controller ask
	// InstanceExists and InstanceShutdown).
	Controllers []string
	// NodeMonitorGracePeriod: how long after a Node's last heartbeat (Lease
	// or status) its Ready condition turns Unknown. Default 12s: kubelets
	// of StartKubelet renew their Lease every few seconds, so a live one
	// never misses it, and a killed one is Unknown within seconds rather
	// than the cluster default's 50 s.
	NodeMonitorGracePeriod time.Duration
	// NodeMonitorPeriod: how often the controller checks; default 1s
	// (cluster default 5s) so the grace above is what a test waits for.
	NodeMonitorPeriod time.Duration
	// NodeStartupGracePeriod: how long a Node that never posted Ready may
	// stay silent; default 20s (cluster default 60s).
	NodeStartupGracePeriod time.Duration
}

const defaultNodeMonitorGracePeriod = 12 * time.Second

// StartControllerManager starts a kube-controller-manager against cp as the
// administrator, without leader election (one per control plane) and
// without a serving port (nothing here scrapes it). It returns once the
// process runs; the process dies with its parent and with Shutdown.
func StartControllerManager(cp *ControlPlane, o ControllerManagerOptions) (*CCMProcess, error) {
	if o.Dir == "" {
		return nil, errors.New("harness: ControllerManagerOptions.Dir is required")
	}
	if o.AssetsDir == "" {
		dir, err := Provision()
		if err != nil {
			return nil, err
		}
		o.AssetsDir = dir
	}
	bin := filepath.Join(o.AssetsDir, "kube-controller-manager")
	if _, err := os.Stat(bin); err != nil {
		return nil, fmt.Errorf("harness: kube-controller-manager is not in %s (test/provision.sh builds it): %w", o.AssetsDir, err)
	}
	if len(o.Controllers) == 0 {
		o.Controllers = []string{"node-lifecycle-controller"}
	}
	if o.NodeMonitorGracePeriod == 0 {
		o.NodeMonitorGracePeriod = defaultNodeMonitorGracePeriod
	}
	if o.NodeMonitorPeriod == 0 {
		o.NodeMonitorPeriod = time.Second
	}
	if o.NodeStartupGracePeriod == 0 {
		o.NodeStartupGracePeriod = 20 * time.Second
	}
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		return nil, err
	}
	args := []string{
		"--kubeconfig=" + cp.AdminKubeconfig,
		"--controllers=" + strings.Join(o.Controllers, ","),
		"--leader-elect=false",
		"--secure-port=0",
		"--node-monitor-grace-period=" + o.NodeMonitorGracePeriod.String(),
		"--node-monitor-period=" + o.NodeMonitorPeriod.String(),
		"--node-startup-grace-period=" + o.NodeStartupGracePeriod.String(),
		"-v=2",
	}
	return StartCCMProcess("kube-controller-manager", bin, o.Dir, args)
}
