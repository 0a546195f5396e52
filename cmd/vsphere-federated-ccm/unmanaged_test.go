package main

import (
	"bytes"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/cloud"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/cloud/nodes"
)

// A bad --unmanaged-node-selector is an error naming the flag; empty is
// none (the label alone).
func TestParseUnmanagedSelector(t *testing.T) {
	if sel, err := parseUnmanagedSelector(""); sel != nil || err != nil {
		t.Fatalf(`"" = %v, %v; want nil, nil`, sel, err)
	}
	sel, err := parseUnmanagedSelector("node.example.com/metal=true,!node.example.com/vm")
	if err != nil || !sel.Matches(mapLabels{"node.example.com/metal": "true"}) || sel.Matches(mapLabels{"node.example.com/metal": "true", "node.example.com/vm": ""}) {
		t.Fatalf("selector %v, %v", sel, err)
	}
	_, err = parseUnmanagedSelector("node.example.com/metal==true=")
	if err == nil || !strings.Contains(err.Error(), "--unmanaged-node-selector") {
		t.Fatalf("bad selector: %v; want an error naming the flag", err)
	}
}

type mapLabels map[string]string

func (m mapLabels) Has(k string) bool              { _, ok := m[k]; return ok }
func (m mapLabels) Get(k string) string            { return m[k] }
func (m mapLabels) Lookup(k string) (string, bool) { v, ok := m[k]; return v, ok }

// diagnose says an unmanaged Node is left alone, without looking it up.
func TestDiagnoseUnmanagedNode(t *testing.T) {
	fleet := newDiagFleet()
	sel, err := parseUnmanagedSelector("node.example.com/metal=true")
	if err != nil {
		t.Fatal(err)
	}
	byLabel := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "metal-1", Labels: map[string]string{nodes.LabelUnmanaged: "true"}}}
	bySelector := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "metal-2", Labels: map[string]string{"node.example.com/metal": "true"}},
		Spec: v1.NodeSpec{Taints: []v1.Taint{{Key: "node.cloudprovider.kubernetes.io/uninitialized", Value: "true", Effect: v1.TaintEffectNoSchedule}}}}
	client := fake.NewClientset(byLabel, bySelector)
	d := testDiagnoser(t, fleet, client, func(o *cloud.Options) { o.UnmanagedNodeSelector = sel })
	calls := fleet["vcA"].Calls() + fleet["vcB"].Calls()
	for _, c := range []struct {
		node *v1.Node
		why  string
	}{{byLabel, "label " + nodes.LabelUnmanaged + "=true"}, {bySelector, `selector "node.example.com/metal=true"`}} {
		r, text := report(t, d, c.node)
		if !strings.Contains(r.Unmanaged, c.why) || !strings.Contains(text, "unmanaged ("+c.why) || !strings.Contains(text, "this CCM leaves it alone") {
			t.Errorf("%s: report %q does not say it is unmanaged by %s", c.node.Name, text, c.why)
		}
		if !r.WouldInitialize || len(r.Lookup) != 0 {
			t.Errorf("%s: wouldInitialize %v, lookup %v; want true and no lookup", c.node.Name, r.WouldInitialize, r.Lookup)
		}
	}
	rep, err := d.diagnoseNodes(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if code := emit(&out, false, rep); code != exitOK {
		t.Errorf("diagnose nodes = %d; want %d (unmanaged is no problem):\n%s", code, exitOK, out.String())
	}
	if !strings.Contains(lineWith(out.String(), "metal-2"), "unmanaged (selector") {
		t.Errorf("diagnose nodes:\n%s\nwant metal-2 listed as unmanaged", out.String())
	}
	if got := fleet["vcA"].Calls() + fleet["vcB"].Calls() - calls; got != 0 {
		t.Errorf("%d vCenter calls for unmanaged Nodes; want 0", got)
	}
}
