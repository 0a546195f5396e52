package e2e

// Issue 13: `vsphere-federated-ccm diagnose` run as a process, with the
// CCM's config and ServiceAccount, against a real kube-apiserver and the
// simulated federation; and the running CCM's /vcenters endpoint during an
// outage of one vCenter.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vmware/govmomi/vapi/rest"
	"github.com/vmware/govmomi/vapi/tags"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/test/harness"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/test/vcsim"
)

// diagnoseRun is one run of the diagnose subcommand.
type diagnoseRun struct {
	code           int
	stdout, stderr string
	took           time.Duration
}

// runDiagnose runs the CCM binary's diagnose subcommand as the CCM's
// ServiceAccount with the CCM's cloud config.
func runDiagnose(t *testing.T, env *harness.Env, args ...string) diagnoseRun {
	t.Helper()
	bin, err := harness.BuildCCM()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	args = append(append([]string{"diagnose"}, args...), "--cloud-config="+env.CloudConfig, "--kubeconfig="+env.CCMKubeconfig)
	cmd := exec.CommandContext(ctx, bin, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err = cmd.Run()
	r := diagnoseRun{stdout: stdout.String(), stderr: stderr.String(), took: time.Since(start)}
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		r.code = exit.ExitCode()
	case err != nil:
		t.Fatalf("diagnose %v: %v\n%s", args, err, r.stderr)
	}
	t.Logf("$ vsphere-federated-ccm %s  (exit %d, %s)\n%s", strings.Join(args[:len(args)-2], " "), r.code, r.took.Round(time.Millisecond), r.stdout)
	if r.stderr != "" {
		t.Logf("its stderr:\n%s", r.stderr)
	}
	return r
}

func (r diagnoseRun) wantCode(t *testing.T, code int) {
	t.Helper()
	if r.code != code {
		t.Fatalf("diagnose exit code %d, want %d\nstdout:\n%s\nstderr:\n%s", r.code, code, r.stdout, r.stderr)
	}
}

func (r diagnoseRun) wantOut(t *testing.T, subs ...string) {
	t.Helper()
	for _, s := range subs {
		if !strings.Contains(r.stdout, s) {
			t.Errorf("diagnose output lacks %q:\n%s", s, r.stdout)
		}
	}
}

// diagnoseJSON is the part of `diagnose node -o json` the test reads.
type diagnoseJSON struct {
	Node   string `json:"node"`
	Lookup []struct {
		VCenter string `json:"vcenter"`
		Answer  string `json:"answer"`
		Error   string `json:"error"`
	} `json:"lookup"`
	VM *struct {
		VCenter string `json:"vcenter"`
		Name    string `json:"name"`
	} `json:"vm"`
	WouldSet *struct {
		ProviderID, InstanceType, Zone, Region string
		Addresses                              []string
	} `json:"wouldSet"`
	Exists struct {
		Value *bool  `json:"value"`
		Error string `json:"error"`
	} `json:"instanceExists"`
	Tainted         bool     `json:"uninitializedTaint"`
	WouldInitialize bool     `json:"wouldInitialize"`
	Why             []string `json:"why"`
	Events          []struct{ Reason string }
}

// detachZone removes the zone tag from every object it is attached to in
// vc (the cluster or host of vm): its VMs have no zone any more.
func detachZone(t *testing.T, vc *vcsim.VCenter, zone string) {
	t.Helper()
	ctx := t.Context()
	c, err := vc.Client(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Logout(context.WithoutCancel(ctx)) }()
	rc := rest.NewClient(c.Client)
	if err := rc.Login(ctx, url.UserPassword(vc.User, vc.Password)); err != nil {
		t.Fatal(err)
	}
	tm := tags.NewManager(rc)
	tag, err := tm.GetTagForCategory(ctx, zone, "k8s-zone")
	if err != nil {
		t.Fatal(err)
	}
	objs, err := tm.ListAttachedObjects(ctx, tag.ID)
	if err != nil || len(objs) == 0 {
		t.Fatalf("zone tag %s attached to %v (%v)", zone, objs, err)
	}
	for _, o := range objs {
		if err := tm.DetachTag(ctx, tag.ID, o); err != nil {
			t.Fatal(err)
		}
	}
}

// One federation, one CCM (serving /vcenters), four Nodes: one
// initialized, one whose zone tag is missing, one whose BIOS UUID a VM of
// another vCenter also has, one of a vCenter that is down. diagnose
// reports each as the CCM sees it, and /vcenters shows the outage.
func TestDiagnose(t *testing.T) {
	t.Parallel()
	env := newEnv(t, harness.Options{})
	vc1, vc2, vc3 := env.Fed.VCenter("vc1"), env.Fed.VCenter("vc2"), env.Fed.VCenter("vc3")
	healthy, noZone, dupTarget, dupTwin, down := vc1.VMs[0], vc3.VMs[0], vc1.VMs[5], vc3.VMs[7], vc2.VMs[1]
	if noZone.Zone == dupTwin.Zone {
		t.Fatalf("fixture: %s and %s share zone %s", noZone.Name, dupTwin.Name, noZone.Zone)
	}
	// Before the CCM starts, so its caches and diagnose's agree: a zone
	// tag removed, and a VM of vc3 given the BIOS UUID of one of vc1.
	detachZone(t, vc3, noZone.Zone)
	vc3.SetUUID(dupTwin, dupTarget.UUID)

	port, err := harness.FreePort("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	ccm := startCCM(t, env, "ccm", harness.CCMOptions{Flags: map[string]string{"vcenters-port": strconv.Itoa(port)}})

	t.Run("initialized", func(t *testing.T) {
		createNodes(t, env, []*vcsim.VM{healthy})
		waitInitialized(t, env, names([]*vcsim.VM{healthy}), time.Minute)
		r := runDiagnose(t, env, "node", healthy.Name)
		r.wantCode(t, 0)
		r.wantOut(t, "vsphere://"+healthy.UUID, healthy.Zone, healthy.Region, "vc1  ", "found", "InternalIP "+healthy.IP,
			"vsphere-vm.cpu-4.mem-8gb.os-ubuntu", "InstanceExists:   true", "InstanceShutdown: false", "not tainted")
		j := runDiagnose(t, env, "node", healthy.Name, "-o", "json")
		j.wantCode(t, 0)
		var got diagnoseJSON
		if err := json.Unmarshal([]byte(j.stdout), &got); err != nil {
			t.Fatalf("-o json: %v\n%s", err, j.stdout)
		}
		if !got.WouldInitialize || got.WouldSet == nil || got.WouldSet.ProviderID != "vsphere://"+healthy.UUID ||
			got.WouldSet.Zone != healthy.Zone || got.WouldSet.Region != healthy.Region || got.VM == nil || got.VM.VCenter != "vc1" {
			t.Fatalf("-o json: %+v", got)
		}
		answers := map[string]string{}
		for _, a := range got.Lookup {
			answers[a.VCenter] = a.Answer
		}
		if answers["vc1"] != "found" {
			t.Errorf("-o json: vc1's answer %q, want found (all: %v)", answers["vc1"], answers)
		}
	})

	t.Run("zone tag missing", func(t *testing.T) {
		createNodes(t, env, []*vcsim.VM{noZone})
		waitEvent(t, env, metav1.NamespaceDefault, "Node", noZone.Name, "ZoneTagMissing", time.Minute)
		r := runDiagnose(t, env, "node", noZone.Name)
		r.wantCode(t, 1)
		r.wantOut(t, "ZoneTagMissing", "no tag for", `zone (category "k8s-zone")`, "would not initialize",
			"tainted node.cloudprovider.kubernetes.io/uninitialized: InstanceMetadata fails", "no zone or region tag")
	})

	t.Run("duplicate BIOS UUID", func(t *testing.T) {
		createNodes(t, env, []*vcsim.VM{dupTarget})
		waitEvent(t, env, metav1.NamespaceDefault, "Node", dupTarget.Name, "DuplicateVMUUID", time.Minute)
		r := runDiagnose(t, env, "node", dupTarget.Name)
		r.wantCode(t, 1)
		r.wantOut(t, "DuplicateVMUUID", "refusing to choose", "vcenter vc1", "vcenter vc3", dupTarget.Name, dupTwin.Name,
			"the same BIOS UUID is held by several VMs", "would not initialize")
	})

	t.Run("vCenter down", func(t *testing.T) {
		must(t, env.Proxies["vc2"].SetMode(vcsim.Refuse))
		defer func() { must(t, env.Proxies["vc2"].SetMode(vcsim.Pass)) }()
		createNodes(t, env, []*vcsim.VM{down})
		waitEvent(t, env, metav1.NamespaceDefault, "Node", down.Name, "VMLookupFailed", time.Minute)
		r := runDiagnose(t, env, "node", down.Name)
		r.wantCode(t, 1)
		r.wantOut(t, "vc2 did not answer", "the Node is kept and retried", "connection refused", "VMLookupFailed",
			"InstanceExists:   error", "would not initialize")
		var got diagnoseJSON
		j := runDiagnose(t, env, "node", down.Name, "-o", "json")
		j.wantCode(t, 1)
		if err := json.Unmarshal([]byte(j.stdout), &got); err != nil {
			t.Fatal(err)
		}
		if got.Exists.Value != nil || got.Exists.Error == "" || !got.Tainted || got.WouldInitialize {
			t.Errorf("-o json: instanceExists %+v, tainted %v, wouldInitialize %v; want an error (kept), tainted, not initializing", got.Exists, got.Tainted, got.WouldInitialize)
		}
		// A Node of a healthy vCenter is not held up by vc2.
		runDiagnose(t, env, "node", healthy.Name).wantCode(t, 0)

		// The running CCM's view: vc2 down with its error, the others up;
		// /healthz stays 200.
		reader := readerToken(t, env, "vcenters-reader", "/vcenters")
		if code, _, err := harness.GetLocalHTTPS(t.Context(), port, "/vcenters", ""); err != nil || code != http.StatusUnauthorized && code != http.StatusForbidden {
			t.Errorf("anonymous /vcenters: %d, %v; want 401 or 403", code, err)
		}
		if code, _, err := harness.GetLocalHTTPS(t.Context(), port, "/vcenters", env.CCMToken); err != nil || code != http.StatusForbidden {
			t.Errorf("/vcenters as the CCM's ServiceAccount (not authorized): %d, %v; want 403", code, err)
		}
		type status struct {
			Name, Reachability, Breaker, LastError string
			Inventory                              *struct {
				InService bool
				VMs       int
			}
			Session *struct{ AgeSeconds float64 }
		}
		var body string
		var got2 struct{ VCenters []status }
		if err := wait.PollUntilContextTimeout(t.Context(), 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			code, b, err := harness.GetLocalHTTPS(ctx, port, "/vcenters", reader)
			if err != nil || code != http.StatusOK {
				body = fmt.Sprintf("%d %s %v", code, b, err)
				return false, nil
			}
			body = b
			got2.VCenters = nil
			if err := json.Unmarshal([]byte(b), &got2); err != nil {
				return false, err
			}
			for _, v := range got2.VCenters {
				if v.Name == "vc2" && (v.Reachability != "down" || v.LastError == "") {
					return false, nil
				}
			}
			return len(got2.VCenters) == 3, nil
		}); err != nil {
			t.Fatalf("/vcenters: vc2 not shown down: %v\n%s", err, body)
		}
		t.Logf("GET /vcenters during vc2's outage:\n%s", body)
		for _, v := range got2.VCenters {
			switch v.Name {
			case "vc2":
				if !strings.Contains(v.LastError, "connection refused") || v.Breaker == "" {
					t.Errorf("vc2: %+v; want its refused connection and a breaker state", v)
				}
			default:
				if v.Reachability != "up" || v.Breaker != "closed" || v.Inventory == nil || !v.Inventory.InService || v.Inventory.VMs != len(env.Fed.VCenter(v.Name).VMs) || v.Session == nil {
					t.Errorf("%s: %+v; want up, breaker closed, inventory in service with %d VMs, a session", v.Name, v, len(env.Fed.VCenter(v.Name).VMs))
				}
			}
		}
		if code, _, err := ccm.Healthz(t.Context(), "/healthz", ""); err != nil || code != http.StatusOK {
			t.Errorf("/healthz during the outage: %d, %v; want 200", code, err)
		}

		// Every Node still tainted or failing, one line each.
		s := runDiagnose(t, env, "nodes")
		s.wantCode(t, 1)
		s.wantOut(t, noZone.Name, dupTarget.Name, down.Name, "4 Nodes checked, 3 listed")
		if strings.Contains(s.stdout, healthy.Name+" ") {
			t.Errorf("diagnose nodes lists the initialized Node %s:\n%s", healthy.Name, s.stdout)
		}
	})

	// Read only: diagnose changed no Node.
	n, err := env.Client.CoreV1().Nodes().Get(t.Context(), noZone.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !harness.HasTaint(n, harness.UninitializedTaint) || n.Spec.ProviderID != "" {
		t.Errorf("node %s changed: providerID %q, taints %v", n.Name, n.Spec.ProviderID, n.Spec.Taints)
	}
}
