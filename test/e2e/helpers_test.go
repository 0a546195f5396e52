package e2e

// Helpers every e2e test may use: the environment, the CCM, Nodes,
// config edits, logs and Events, and waiting. Waiting has two forms: a
// positive property is polled until a deadline
// (wait.PollUntilContextTimeout, or the helpers built on it here); a
// negative one must hold for a window (holds, observe).

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/test/harness"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/test/vcsim"
)

// wrongfulDeletions is an error naming every deleted Node whose VM exists.
func wrongfulDeletions(env *harness.Env, deleted []string) error {
	var wrong []string
	for _, name := range deleted {
		for _, vm := range env.Fed.AllVMs() {
			if harness.NodeName(vm) == name && env.Fed.VCenter(vm.VCenter).Exists(vm) {
				wrong = append(wrong, name)
			}
		}
	}
	if len(wrong) > 0 {
		return fmt.Errorf("deleted %d Nodes whose VM exists: %v", len(wrong), wrong)
	}
	return nil
}

// allLogs is every log of every CCM process of env, oldest first.
func allLogs(env *harness.Env) string {
	var b strings.Builder
	for _, p := range env.CCMs() {
		for _, path := range p.LogPaths() {
			data, _ := os.ReadFile(path)
			b.Write(data)
		}
	}
	return b.String()
}

// nudgeInitialized waits until the Nodes of vms are initialized, posting a
// fresh Ready heartbeat for those still pending every 2s, as their kubelets
// would. The cloud-node controller retries a Node that failed with an
// exponential backoff (up to 1000s), but any update requeues it at once.
func nudgeInitialized(t *testing.T, env *harness.Env, vms []*vcsim.VM, timeout time.Duration) {
	t.Helper()
	if err := nudgeInitializedErr(t.Context(), env, vms, timeout); err != nil {
		t.Fatal(err)
	}
}

func nudgeInitializedErr(ctx context.Context, env *harness.Env, vms []*vcsim.VM, timeout time.Duration) error {
	var pending []string
	var nudged time.Time
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		pending = pending[:0]
		for _, vm := range vms {
			n, err := env.Client.CoreV1().Nodes().Get(ctx, harness.NodeName(vm), metav1.GetOptions{})
			if err != nil || !harness.Initialized(n) {
				pending = append(pending, harness.NodeName(vm))
			}
		}
		if len(pending) > 0 && time.Since(nudged) >= 2*time.Second {
			for _, name := range pending {
				_ = harness.SetNodeReady(ctx, env.Client, name, true)
			}
			nudged = time.Now()
		}
		return len(pending) == 0, nil
	})
	if err != nil {
		return fmt.Errorf("%d of %d Nodes not initialized within %s: %v", len(pending), len(vms), timeout, pending)
	}
	return nil
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func quoteAll(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = regexp.QuoteMeta(s)
	}
	return out
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(slices.Compact(a), slices.Compact(b))
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

// newEnv starts a control plane (of the suite's Kubernetes unless
// opts.AssetsDir names another's) with the manifests applied, a federation
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
	if opts.AssetsDir == "" {
		opts.AssetsDir = assets
	}
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

// createNodes registers the Nodes of vms: with env.Opts.RealNodes their
// kubelets start (all at once) and register them.
func createNodes(t *testing.T, env *harness.Env, vms []*vcsim.VM) []string {
	t.Helper()
	if err := env.CreateNodes(t.Context(), vms); err != nil {
		t.Fatal(err)
	}
	return names(vms)
}

// setReady makes the Nodes of vms Ready or not: with env.Opts.RealNodes by
// killing their kubelets (and waiting until the kube-controller-manager
// marks them Unknown) or starting them again.
func setReady(t *testing.T, env *harness.Env, vms []*vcsim.VM, ready bool) {
	t.Helper()
	if err := env.SetNodesReady(t.Context(), vms, ready); err != nil {
		t.Fatalf("setting %v Ready=%v: %v", names(vms), ready, err)
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

// vcenterSection matches one "  <name>:" section of the harness's config.
func vcenterSection(name string) *regexp.Regexp {
	return regexp.MustCompile(`(?m)^  ` + regexp.QuoteMeta(name) + `:\n(    .*\n)+`)
}

func withoutVCenter(yaml, name string) string {
	return vcenterSection(name).ReplaceAllString(yaml, "")
}

func withDatacenters(yaml, name, list string) string {
	return strings.Replace(yaml, "  "+name+":\n", "  "+name+":\n    datacenters: "+list+"\n", 1)
}

// writeConfig replaces the cloud config as an editor does (write, rename).
func writeConfig(t *testing.T, env *harness.Env, yaml string) time.Time {
	t.Helper()
	tmp := env.CloudConfig + ".new"
	if err := os.WriteFile(tmp, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	at := time.Now()
	if err := os.Rename(tmp, env.CloudConfig); err != nil {
		t.Fatal(err)
	}
	return at
}

// sameProcess fails t unless p still runs with the PID it had.
func sameProcess(t *testing.T, p *harness.CCMProcess, pid int) {
	t.Helper()
	if !p.Running() || p.Pid() != pid {
		t.Fatalf("the CCM was restarted or died (pid %d, was %d, running %v)", p.Pid(), pid, p.Running())
	}
}

func vmsOf(env *harness.Env, vcenter, datacenter string) []*vcsim.VM {
	var out []*vcsim.VM
	for _, vm := range env.Fed.VCenter(vcenter).VMs {
		if datacenter == "" || vm.Datacenter == datacenter {
			out = append(out, vm)
		}
	}
	return out
}

// firstInitialized waits for any Node of names to be initialized and
// returns when that was seen.
func firstInitialized(t *testing.T, env *harness.Env, names []string, timeout time.Duration) time.Time {
	t.Helper()
	var at time.Time
	err := wait.PollUntilContextTimeout(t.Context(), 50*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		for _, n := range names {
			node, err := env.Client.CoreV1().Nodes().Get(ctx, n, metav1.GetOptions{})
			if err == nil && harness.Initialized(node) {
				at = time.Now()
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("none of %v initialized within %s", names, timeout)
	}
	return at
}

// events lists the Events about one object.
func events(t *testing.T, env *harness.Env, namespace, kind, name string) []corev1.Event {
	t.Helper()
	sel := fields.Set{"involvedObject.kind": kind, "involvedObject.name": name}.AsSelector().String()
	list, err := env.Client.CoreV1().Events(namespace).List(t.Context(), metav1.ListOptions{FieldSelector: sel})
	if err != nil {
		t.Fatal(err)
	}
	return list.Items
}

func waitEvent(t *testing.T, env *harness.Env, namespace, kind, name, reason string, timeout time.Duration) corev1.Event {
	t.Helper()
	var found corev1.Event
	err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		for _, e := range events(t, env, namespace, kind, name) {
			if e.Reason == reason {
				found = e
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("no %s Event on %s %s/%s within %s: %v", reason, kind, namespace, name, timeout, events(t, env, namespace, kind, name))
	}
	return found
}

// holds checks cond every 100ms for d and returns the first problem it
// reports (negative properties need a window; positive ones poll until a
// deadline instead).
func holds(ctx context.Context, d time.Duration, cond func() error) error {
	deadline := time.Now().Add(d)
	for {
		if err := cond(); err != nil {
			return err
		}
		if time.Now().After(deadline) {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// observe is holds, failing t at the first problem.
func observe(t *testing.T, d time.Duration, cond func() error) {
	t.Helper()
	if err := holds(t.Context(), d, cond); err != nil {
		t.Fatal(err)
	}
}

// readerToken creates a ServiceAccount name (in default) allowed GET on
// the non-resource URL path, as a person or a Prometheus would be, and
// returns a token of it.
func readerToken(t *testing.T, env *harness.Env, name, path string) string {
	t.Helper()
	ctx, c := t.Context(), env.Client
	if _, err := c.CoreV1().ServiceAccounts("default").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Rules:      []rbacv1.PolicyRule{{NonResourceURLs: []string{path}, Verbs: []string{"get"}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: name, Namespace: "default"}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	token, err := env.ControlPlane.ServiceAccountToken(ctx, "default", name, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return token
}

// metricsReaderToken is a token allowed GET /metrics (ServiceAccount
// default/scraper).
func metricsReaderToken(t *testing.T, env *harness.Env) string {
	t.Helper()
	return readerToken(t, env, "scraper", "/metrics")
}
