// Package e2e runs the CCM binary against a real kube-apiserver and etcd and
// a federation of simulated vCenters, as the manifests deploy it: with its
// ServiceAccount's token, the DaemonSet's arguments and the RBAC of
// manifests/. Every test builds its own control plane, federation and CCM,
// so tests run in parallel (at most -parallel, GOMAXPROCS by default).
package e2e

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/test/harness"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/test/vcsim"
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

// raceCCM reports whether the fault matrix runs the CCM built with the
// race detector: yes unless E2E_RACE_CCM=0.
func raceCCM() bool { return os.Getenv("E2E_RACE_CCM") != "0" }

// failOnRaces fails t with every race detector report in the logs of env's
// CCMs (run after env.Close, so every report is complete).
func failOnRaces(t *testing.T, env *harness.Env) {
	t.Helper()
	if env == nil {
		return
	}
	for _, p := range env.CCMs() {
		for _, r := range p.RaceReports() {
			t.Errorf("%s: %s in the CCM's output:\n%s", p.Name, harness.RaceDetected, r)
		}
	}
}

// newEnv starts a control plane with the manifests applied, a federation
// and the cloud config for t; on failure the CCM logs are printed. With
// E2E_ARTIFACTS set, every file (logs, config, kubeconfigs) is kept in
// $E2E_ARTIFACTS/<test name>.
func newEnv(t *testing.T, opts harness.Options) *harness.Env {
	t.Helper()
	if dir := os.Getenv("E2E_ARTIFACTS"); dir != "" {
		opts.Dir = filepath.Join(dir, strings.ReplaceAll(t.Name(), "/", "_"))
		if err := os.RemoveAll(opts.Dir); err != nil {
			t.Fatal(err)
		}
	} else {
		opts.Dir = t.TempDir()
	}
	opts.AssetsDir = assets
	opts.Logf = t.Logf
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	env, err := harness.Start(ctx, opts)
	if err != nil {
		t.Fatalf("starting the environment: %v", err)
	}
	t.Cleanup(func() {
		// Whatever the scenario, the ServiceAccount's RBAC must never have
		// refused the CCM anything.
		for _, p := range env.CCMs() {
			for _, path := range p.LogPaths() {
				data, _ := os.ReadFile(path)
				for line := range strings.Lines(string(data)) {
					if strings.Contains(line, "forbidden") {
						t.Errorf("%s: the API refused the CCM: %s", filepath.Base(path), strings.TrimSpace(line))
						break
					}
				}
			}
		}
		if t.Failed() {
			for _, p := range env.CCMs() {
				t.Logf("%s", p.Tail(60))
			}
			t.Logf("cloud config:\n%s", env.CloudConfigYAML)
		}
		closeStart := time.Now()
		env.Close()
		t.Logf("environment stopped in %s", time.Since(closeStart).Round(time.Millisecond))
	})
	return env
}

// imageUnderTest is the OCI archive of the CCM's image that test/all.sh
// built (E2E_IMAGE), for the scenarios that run the CCM as it ships; ""
// (the binary built here) when unset.
func imageUnderTest(t *testing.T) string {
	t.Helper()
	img := os.Getenv("E2E_IMAGE")
	if img == "" {
		t.Log("E2E_IMAGE is unset: the CCM runs from the binary built here, not from the image")
	}
	return img
}

// startCCM starts a CCM and waits until its /healthz answers.
func startCCM(t *testing.T, env *harness.Env, name string, o harness.CCMOptions) *harness.CCMProcess {
	t.Helper()
	p, err := env.StartCCM(name, o)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.WaitHealthy(t.Context(), time.Minute); err != nil {
		t.Fatal(err)
	}
	return p
}

func createNodes(t *testing.T, env *harness.Env, vms []*vcsim.VM) []string {
	t.Helper()
	var names []string
	for _, vm := range vms {
		if _, err := env.CreateNode(t.Context(), vm); err != nil {
			t.Fatal(err)
		}
		names = append(names, harness.NodeName(vm))
	}
	return names
}

func setReady(t *testing.T, env *harness.Env, vms []*vcsim.VM, ready bool) {
	t.Helper()
	for _, vm := range vms {
		if err := env.SetReady(t.Context(), vm, ready); err != nil {
			t.Fatalf("setting %s Ready=%v: %v", vm.Name, ready, err)
		}
	}
}

func names(vms []*vcsim.VM) []string {
	var out []string
	for _, vm := range vms {
		out = append(out, harness.NodeName(vm))
	}
	return out
}

func waitInitialized(t *testing.T, env *harness.Env, nodeNames []string, timeout time.Duration) {
	t.Helper()
	if err := harness.WaitForNodes(t.Context(), env.Client, nodeNames, timeout, "initialized", harness.Initialized); err != nil {
		t.Fatal(err)
	}
}

// deletionWatch records every Node deletion the apiserver reports, from the
// moment it is started: unlike polling, no deletion can slip between looks.
type deletionWatch struct {
	mu      sync.Mutex
	deleted []string
	stop    context.CancelFunc
}

// deletedNodeName is the name of the Node an informer's delete event is
// about, also when the informer missed the deletion itself.
func deletedNodeName(obj any) string {
	switch o := obj.(type) {
	case *corev1.Node:
		return o.Name
	case cache.DeletedFinalStateUnknown:
		return o.Key // a Node has no namespace: the key is its name
	}
	return ""
}

func watchDeletions(t *testing.T, env *harness.Env) *deletionWatch {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w := &deletionWatch{stop: cancel}
	factory := informers.NewSharedInformerFactory(env.Client, 0)
	inf := factory.Core().V1().Nodes().Informer()
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		DeleteFunc: func(obj any) {
			name := deletedNodeName(obj)
			w.mu.Lock()
			w.deleted = append(w.deleted, name)
			w.mu.Unlock()
		},
	}); err != nil {
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(t.Context().Done(), inf.HasSynced) {
		t.Fatal("node informer did not sync")
	}
	t.Cleanup(func() { cancel(); factory.Shutdown() })
	return w
}

// Deleted lists the Nodes deleted so far among names (all when names is nil).
func (w *deletionWatch) Deleted(names []string) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for _, d := range w.deleted {
		if names == nil || slices.Contains(names, d) {
			out = append(out, d)
		}
	}
	return out
}

// logHas reports whether a log contains a match of re.
func logHas(log string, re *regexp.Regexp) bool { return re.MatchString(log) }
