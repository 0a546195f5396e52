package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/test/harness"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/test/vcsim"
)

// The deletion policy on the real apiserver (config nodeDeletion):
//   - the grace: a destroyed VM's NotReady Node is deleted only once its VM
//     has been confirmed absent for minAbsence, measured from the destroy,
//     with a NodeDeletionHeld Event meanwhile;
//   - the freeze: with vc2 frozen, a destroyed VM's Node (of vc1: any VM
//     could be in vc2) is kept, the Event names the freeze, the held-Nodes
//     gauge and /vcenters show it, and diagnose says so; an edit lifting
//     the freeze lets the Node go, without a restart.
func TestDeletionPolicy(t *testing.T) {
	t.Parallel()
	const grace = 6 * time.Second
	env := newEnv(t, harness.Options{VCenters: 2, Datacenters: 1, MachinesPerPool: 2, MinAbsence: grace.String()})
	graceVictim, frozenVictim, control := env.Fed.VCenter("vc1").VMs[0], env.Fed.VCenter("vc1").VMs[1], env.Fed.VCenter("vc2").VMs[0]
	vms := []*vcsim.VM{graceVictim, frozenVictim, control}
	createNodes(t, env, vms)
	port, err := harness.FreePort("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	ccm := startCCM(t, env, "ccm", harness.CCMOptions{Flags: map[string]string{"vcenters-port": strconv.Itoa(port)}})
	waitInitialized(t, env, names(vms), time.Minute)
	deletions := watchDeletions(t, env)
	metricsToken := metricsReaderToken(t, env)
	vcentersToken := readerToken(t, env, "vcenters-reader", "/vcenters")
	const held = "cloudprovider_vsphere_nodes_deletion_held"
	heldGauge := func(vcenter, reason string) float64 {
		ss, _, err := ccm.Scrape(t.Context(), metricsToken)
		if err != nil {
			t.Fatal(err)
		}
		v, ok := ss.Sum(held, "vcenter", vcenter, "reason", reason)
		if !ok {
			t.Fatalf("/metrics has no %s{vcenter=%q,reason=%q}", held, vcenter, reason)
		}
		return v
	}

	t.Run("grace", func(t *testing.T) {
		destroyed := time.Now()
		if err := env.Fed.VCenter("vc1").Destroy(t.Context(), graceVictim); err != nil {
			t.Fatal(err)
		}
		setReady(t, env, []*vcsim.VM{graceVictim}, false)
		e := waitEventMatching(t, env, graceVictim.Name, "NodeDeletionHeld", "nodeDeletion.minAbsence", 30*time.Second)
		if _, err := env.Client.CoreV1().Nodes().Get(t.Context(), graceVictim.Name, metav1.GetOptions{}); err != nil {
			t.Fatalf("the Node is gone when its NodeDeletionHeld Event is seen: %v", err)
		}
		if e.Type != corev1.EventTypeWarning {
			t.Errorf("NodeDeletionHeld is a %s Event, want Warning", e.Type)
		}
		if err := harness.WaitForNodesGone(t.Context(), env.Client, []string{graceVictim.Name}, time.Minute); err != nil {
			t.Fatal(err)
		}
		took := time.Since(destroyed)
		t.Logf("deleted %s after the destroy (%.1f× minAbsence); the Event meanwhile: %s", took.Round(100*time.Millisecond), float64(took)/float64(grace), e.Message)
		if took < grace {
			t.Fatalf("the Node was deleted %s after its VM was destroyed, before minAbsence (%s)", took, grace)
		}
	})

	t.Run("freeze", func(t *testing.T) {
		frozenAt := writeConfig(t, env, strings.Replace(env.CloudConfigYAML, "\n  vc2:\n", "\n  vc2:\n    nodeDeletion: frozen\n", 1))
		waitVCenters(t, port, vcentersToken, "vc2 frozen", func(vc vcenterDeletion) bool { return vc.Name == "vc2" && vc.NodeDeletion.Frozen })
		t.Logf("the freeze applied %s after the edit", time.Since(frozenAt).Round(10*time.Millisecond))
		destroyed := time.Now()
		if err := env.Fed.VCenter("vc1").Destroy(t.Context(), frozenVictim); err != nil {
			t.Fatal(err)
		}
		setReady(t, env, []*vcsim.VM{frozenVictim}, false)
		waitEventMatching(t, env, frozenVictim.Name, "NodeDeletionHeld", "vcenter.vc2.nodeDeletion: frozen", 30*time.Second)
		if v := heldGauge("vc2", "frozen"); v != 1 {
			t.Errorf("%s{vcenter=vc2,reason=frozen} = %v, want 1", held, v)
		}
		if v := heldGauge("vc1", "frozen"); v != 0 {
			t.Errorf("%s{vcenter=vc1,reason=frozen} = %v, want 0 (vc1 is not frozen)", held, v)
		}
		waitVCenters(t, port, vcentersToken, "vc2 holding one Node", func(vc vcenterDeletion) bool {
			return vc.Name == "vc2" && vc.NodeDeletion.Frozen && vc.NodeDeletion.HeldNodes == 1
		})
		runDiagnose(t, env, "node", frozenVictim.Name).wantOut(t, "held back by the freeze of vc2 (vcenter.vc2.nodeDeletion: frozen)")
		// Kept well past the grace: three times it, from the destroy.
		observe(t, 3*grace-time.Since(destroyed), func() error {
			if d := deletions.Deleted([]string{frozenVictim.Name}); len(d) > 0 {
				return fmt.Errorf("node %s deleted while vc2 is frozen", frozenVictim.Name)
			}
			return nil
		})

		pid := ccm.Pid()
		writeConfig(t, env, env.CloudConfigYAML)
		if err := harness.WaitForNodesGone(t.Context(), env.Client, []string{frozenVictim.Name}, time.Minute); err != nil {
			t.Fatalf("freeze lifted: %v", err)
		}
		sameProcess(t, ccm, pid)
		if v := heldGauge("vc2", "frozen"); v != 0 {
			t.Errorf("freeze lifted: %s{vcenter=vc2,reason=frozen} = %v, want 0", held, v)
		}
	})

	if d := deletions.Deleted([]string{control.Name}); len(d) > 0 {
		t.Fatalf("node %s of an existing VM was deleted", control.Name)
	}
}

// vcenterDeletion is what a /vcenters row says of its deletion policy.
type vcenterDeletion struct {
	Name         string
	NodeDeletion struct {
		MinAbsence string
		Frozen     bool
		HeldNodes  int
	}
}

// waitVCenters polls the running CCM's /vcenters until a row satisfies cond.
func waitVCenters(t *testing.T, port int, token, what string, cond func(vcenterDeletion) bool) {
	t.Helper()
	var body string
	err := wait.PollUntilContextTimeout(t.Context(), 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		code, b, err := harness.GetLocalHTTPS(ctx, port, "/vcenters", token)
		if err != nil || code != http.StatusOK {
			body = fmt.Sprintf("%d %s %v", code, b, err)
			return false, nil
		}
		body = b
		var got struct{ VCenters []vcenterDeletion }
		if err := json.Unmarshal([]byte(b), &got); err != nil {
			return false, err
		}
		for _, vc := range got.VCenters {
			if cond(vc) {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("/vcenters: not %s: %v\n%s", what, err, body)
	}
}

// waitEventMatching waits for an Event of reason on Node name whose
// message contains sub.
func waitEventMatching(t *testing.T, env *harness.Env, name, reason, sub string, timeout time.Duration) corev1.Event {
	t.Helper()
	var found corev1.Event
	err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		for _, e := range events(t, env, "", "Node", name) {
			if e.Reason == reason && strings.Contains(e.Message, sub) {
				found = e
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("no %s Event saying %q on Node %s within %s: %v", reason, sub, name, timeout, events(t, env, "", "Node", name))
	}
	return found
}
