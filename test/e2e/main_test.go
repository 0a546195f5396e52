// Package e2e runs the CCM binary against a real kube-apiserver and etcd and
// a federation of simulated vCenters, as the manifests deploy it: with its
// ServiceAccount's token, the DaemonSet's arguments and the RBAC of
// manifests/. Every test builds its own control plane, federation and CCM,
// so tests run in parallel (at most -parallel, GOMAXPROCS by default).
package e2e

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/test/harness"
)

// assets is the directory of kube-apiserver and etcd, provisioned once.
var assets string

func TestMain(m *testing.M) {
	flag.Parse()
	// envtest logs through controller-runtime's logger; nothing of it is
	// needed here (the control plane's own output is in its log files).
	ctrllog.SetLogger(logr.Discard())
	start := time.Now()
	var err error
	if assets, err = harness.Provision(); err != nil {
		fmt.Fprintf(os.Stderr, "e2e: FAIL: provisioning kube-apiserver and etcd: %v\n", err)
		os.Exit(1)
	}
	bin, err := harness.BuildCCM()
	if err != nil {
		fmt.Fprintf(os.Stderr, "e2e: FAIL: building the CCM: %v\n", err)
		os.Exit(1)
	}
	fmt.Fprintf(os.Stderr, "e2e: control plane binaries in %s, CCM %s (%s)\n", assets, bin, time.Since(start).Round(time.Millisecond))
	if raceCCM() {
		// Built here rather than by the first row that needs it, so the
		// build (minutes when cold) does not run inside a timed test.
		start := time.Now()
		bin, err := harness.BuildCCMRace()
		if err != nil {
			fmt.Fprintf(os.Stderr, "e2e: FAIL: building the CCM with -race: %v\n", err)
			os.Exit(1)
		}
		fmt.Fprintf(os.Stderr, "e2e: CCM with the race detector %s (%s)\n", bin, time.Since(start).Round(time.Millisecond))
	}

	// Children run in their own process groups, so neither a Ctrl-C nor the
	// -timeout panic reaches them: stop them ourselves first.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		s := <-sigs
		fmt.Fprintf(os.Stderr, "e2e: %v: stopping every CCM, simulator and control plane\n", s)
		harness.Shutdown()
		os.Exit(1)
	}()
	if f := flag.Lookup("test.timeout"); f != nil {
		// Shutdown takes up to ~10s (kube-apiserver's stop timeout).
		if d, ok := f.Value.(flag.Getter).Get().(time.Duration); ok && d > time.Minute {
			time.AfterFunc(d-30*time.Second, func() {
				fmt.Fprintf(os.Stderr, "e2e: -timeout %s is near: stopping every CCM, simulator and control plane\n", d)
				start := time.Now()
				harness.Shutdown()
				fmt.Fprintf(os.Stderr, "e2e: stopped in %s\n", time.Since(start).Round(time.Millisecond))
			})
		}
	}
	code := m.Run()
	harness.Shutdown() // a no-op when every test cleaned up
	os.Exit(code)
}
