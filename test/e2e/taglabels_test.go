package e2e

// Labels from any tag category (nodes.tagLabels) on the real apiserver:
// set at initialization from the VM's own tag and its host's, kept after
// the VM as it moves (from the tag cache, no request per Node).

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/cloud/nodes"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/discovery"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/test/harness"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/test/vcsim"
)

func TestTagLabels(t *testing.T) {
	t.Parallel()
	env := newEnv(t, harness.Options{VCenters: 1, Datacenters: 1, MachinesPerPool: 2})
	ctx := t.Context()
	vc := env.Fed.VCenter("vc1")
	hosts := vc.Hosts("DC0")
	// Every host in a rack of its own; one VM also tagged itself.
	for _, h := range hosts {
		if err := vc.TagHost(ctx, h, "rack", "rack-"+h); err != nil {
			t.Fatal(err)
		}
	}
	vms := vmsOf(env, "vc1", "DC0")[:2]
	a, b := vms[0], vms[1]
	if err := vc.TagVM(ctx, a, "power feed", "Feed A/B"); err != nil {
		t.Fatal(err)
	}
	writeConfig(t, env, env.CloudConfigYAML+"nodes:\n  tagLabels:\n    rack: example.com/rack\n    power feed: example.com/power-feed\n")
	createNodes(t, env, vms)
	startCCM(t, env, "ccm", harness.CCMOptions{})
	nudgeInitialized(t, env, vms, time.Minute)

	labels := func(vm *vcsim.VM) map[string]string {
		n, err := env.Client.CoreV1().Nodes().Get(ctx, harness.NodeName(vm), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return n.Labels
	}
	if got := labels(a); got["example.com/rack"] != "rack-"+a.Host || got["example.com/power-feed"] != discovery.LabelValue("Feed A/B") {
		t.Fatalf("node %s labels %v; want its host's rack and its own power feed (encoded)", harness.NodeName(a), got)
	}
	if got := labels(b); got["example.com/rack"] != "rack-"+b.Host || got["example.com/power-feed"] != "" {
		t.Fatalf("node %s labels %v; want its host's rack and no power feed label", harness.NodeName(b), got)
	}

	// vMotion a to another host: the rack label follows, an Event says so.
	var to string
	for _, h := range hosts {
		if h != a.Host {
			to = h
			break
		}
	}
	from := a.Host
	if err := env.Fed.Relocate(ctx, a, to); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		return labels(a)["example.com/rack"] == "rack-"+to, nil
	})
	if err != nil {
		t.Fatalf("node %s: rack label %q %s after moving %s → %s; want rack-%s", harness.NodeName(a), labels(a)["example.com/rack"], time.Since(start), from, to, to)
	}
	t.Logf("TAGLABELS rack label followed the vMotion in %s", time.Since(start).Round(time.Millisecond))
	want := fmt.Sprintf("example.com/rack rack-%s → rack-%s", from, to)
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		for _, e := range events(t, env, "default", "Node", harness.NodeName(a)) {
			if e.Reason == nodes.ReasonTagLabelsUpdated && strings.Contains(e.Message, want) {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("no %s Event naming %q: %v", nodes.ReasonTagLabelsUpdated, want, events(t, env, "default", "Node", harness.NodeName(a)))
	}
	if got := labels(a)["example.com/power-feed"]; got != discovery.LabelValue("Feed A/B") {
		t.Fatalf("power feed label %q after the move; the VM's own tag goes with it", got)
	}
}
