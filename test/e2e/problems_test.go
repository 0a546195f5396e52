package e2e

// The leader's periodic checks on the real apiserver: a configured
// datacenter the vCenter lacks, a Node whose zone disagrees with the
// vSphere CSI driver's label, a Node's VM below CSI's hardware version and
// a vCenter login lacking a privilege are found, each an Event and a
// gauge, and a fixed one clears.

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/cloud/problems"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/test/harness"
)

func TestProblemChecks(t *testing.T) {
	t.Parallel()
	env := newEnv(t, harness.Options{VCenters: 1, Datacenters: 1, MachinesPerPool: 1})
	ctx := t.Context()
	yaml := strings.Replace(env.CloudConfigYAML, "  vc1:\n", "  vc1:\n    datacenters: [DC0, NOPE]\n", 1)
	writeConfig(t, env, yaml)
	vms := vmsOf(env, "vc1", "DC0")[:1]
	createNodes(t, env, vms)
	ccm := startCCM(t, env, "ccm", harness.CCMOptions{Flags: map[string]string{"problem-check-interval": "1s"}})
	nudgeInitialized(t, env, vms, time.Minute)
	token := metricsReaderToken(t, env)
	name := harness.NodeName(vms[0])
	node, err := env.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	zone := node.Labels[corev1.LabelTopologyZone]
	if zone == "" {
		t.Fatalf("node %s has no zone label: %v", name, node.Labels)
	}
	// The CSI driver's label of the same category, disagreeing.
	csiLabel := problems.CSITopologyPrefix + "k8s-zone"
	label := func(v string) {
		t.Helper()
		patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]string{csiLabel: v}}})
		if _, err := env.Client.CoreV1().Nodes().Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	label("elsewhere")
	gauge := func(check string, want float64) {
		t.Helper()
		scrapeUntil(t, ccm, token, fmt.Sprintf("problems{check=%s} %v", check, want), 30*time.Second, func(ss harness.Samples) bool {
			for _, s := range ss {
				if s.Name == "cloudprovider_vsphere_problems" && s.Labels["check"] == check {
					return s.Value == want
				}
			}
			return false
		})
	}
	event := func(namespace, kind, obj, reason, says string) {
		t.Helper()
		err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
			for _, e := range events(t, env, namespace, kind, obj) {
				if e.Reason == reason && strings.Contains(e.Message, says) {
					return true, nil
				}
			}
			return false, nil
		})
		if err != nil {
			t.Fatalf("no %s Event on %s %s saying %q: %v", reason, kind, obj, says, events(t, env, namespace, kind, obj))
		}
	}
	gauge(problems.CheckDatacenterMissing, 1)
	gauge(problems.CheckCSITopology, 1)
	gauge(problems.CheckCSIVCenterLimit, 0)
	gauge(problems.CheckHardwareVersion, 0)
	gauge(problems.CheckMissingPrivileges, 0)
	event("default", "Node", name, problems.ReasonProblemDetected, "zone topology.kubernetes.io/zone="+zone+" but "+csiLabel+"=elsewhere")
	// The datacenter's Event goes to the CCM's own object (outside a Pod:
	// the Lease).
	event("kube-system", "Lease", "cloud-controller-manager", problems.ReasonProblemDetected, `vcenter vc1 has no datacenter "NOPE"`)

	label(zone)
	gauge(problems.CheckCSITopology, 0)
	event("default", "Node", name, problems.ReasonProblemCleared, problems.CheckCSITopology)

	// The Node's VM on hardware older than CSI supports (vcsim's VMs are
	// vmx-19), then upgraded: read from the inventory, no request per Node.
	vc1 := env.Fed.VCenter("vc1")
	vc1.SetHardwareVersion(vms[0], "vmx-13")
	gauge(problems.CheckHardwareVersion, 1)
	event("default", "Node", name, problems.ReasonProblemDetected, "has virtual hardware vmx-13; the vSphere CSI driver needs vmx-15 or later")
	vc1.SetHardwareVersion(vms[0], "vmx-19")
	gauge(problems.CheckHardwareVersion, 0)
	event("default", "Node", name, problems.ReasonProblemCleared, problems.CheckHardwareVersion)

	// The CCM's user loses System.Read (the read-only role's), then has it
	// back: read with the CCM's own session, never a login of its own.
	logins := len(vc1.Logins(vc1.User))
	vc1.LimitPrivileges([]string{"System.Anonymous", "System.View"})
	t.Cleanup(func() { vc1.LimitPrivileges(nil) })
	gauge(problems.CheckMissingPrivileges, 1)
	event("kube-system", "Lease", "cloud-controller-manager", problems.ReasonProblemDetected, "lacks System.Read on datacenter DC0")
	vc1.LimitPrivileges(nil)
	gauge(problems.CheckMissingPrivileges, 0)
	event("kube-system", "Lease", "cloud-controller-manager", problems.ReasonProblemCleared, problems.CheckMissingPrivileges+": cleared (vcenter vc1)")
	if n := len(vc1.Logins(vc1.User)) - logins; n != 0 {
		t.Errorf("%d login(s) while the privileges were checked every second; want none (the CCM's session serves)", n)
	}
}
