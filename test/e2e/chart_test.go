package e2e

// The Helm chart, as an operator installs it for several vCenters: its
// rendering applies to a real apiserver with strict field validation, and
// the CCM runs with the cloud config and the arguments it rendered.

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/test/harness"
)

// helmBinary is the pinned helm test/helm.sh provides (built once, cached).
func helmBinary(t *testing.T) string {
	t.Helper()
	if h := os.Getenv("HELM"); h != "" {
		return h
	}
	root, err := harness.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(filepath.Join(root, "test", "helm.sh")).Output()
	if err != nil {
		t.Fatalf("test/helm.sh: %v", err)
	}
	return strings.TrimSpace(string(out))
}

func TestChartForTheFederation(t *testing.T) {
	t.Parallel()
	env := newEnv(t, harness.Options{VCenters: 2, Datacenters: 2, MachinesPerPool: 1})
	ctx := t.Context()

	// Values as an operator writes them: one entry per vCenter; the
	// harness already holds the logins in vsphere-cloud-secret.
	var values strings.Builder
	values.WriteString("image: {repository: registry.example.com/vsphere-federated-ccm, tag: e2e}\n")
	values.WriteString("cloudConfig:\n  global: {insecureFlag: true, secretName: vsphere-cloud-secret, secretNamespace: kube-system, requestTimeout: 5s}\n  vcenter:\n")
	for _, vc := range env.Fed.VCenters {
		fmt.Fprintf(&values, "    %s: {server: %q, port: %d}\n", vc.Name, vc.Host, env.Proxies[vc.Name].Port())
	}
	values.WriteString("  labels: {zone: k8s-zone, region: k8s-region}\nsecret: {create: false, name: vsphere-cloud-secret}\n")
	valuesFile := filepath.Join(env.Opts.Dir, "values.yaml")
	must(t, os.WriteFile(valuesFile, []byte(values.String()), 0o600))
	root, err := harness.RepoRoot()
	must(t, err)
	rendered, err := exec.Command(helmBinary(t), "template", "vsphere-federated-ccm", filepath.Join(root, "manifests", "chart"),
		"--namespace", harness.Namespace, "-f", valuesFile).CombinedOutput()
	if err != nil {
		t.Fatalf("helm template: %v\n%s", err, rendered)
	}
	renderedFile := filepath.Join(env.Opts.Dir, "rendered.yaml")
	must(t, os.WriteFile(renderedFile, rendered, 0o600))
	objs, err := harness.ReadObjects(renderedFile)
	must(t, err)
	must(t, env.ControlPlane.Apply(ctx, objs)) // strict field validation

	// The CCM runs with what the chart rendered: its cloud config and the
	// DaemonSet's args, from the image.
	find := func(kind string) *unstructured.Unstructured {
		for _, o := range objs {
			if o.GetKind() == kind {
				return o
			}
		}
		t.Fatalf("the chart rendered no %s", kind)
		return nil
	}
	conf, _, _ := unstructured.NestedString(find("ConfigMap").Object, "data", "vsphere.conf")
	writeConfig(t, env, conf)
	args, err := harness.DaemonSetArgs(&harness.Manifests{Objects: []*unstructured.Unstructured{find("DaemonSet")}})
	must(t, err)
	vms := env.Fed.AllVMs()
	createNodes(t, env, vms)
	startCCM(t, env, "ccm", harness.CCMOptions{Args: args, Image: imageUnderTest(t)})
	checkNodes(t, env, expectations(env, vms))
	t.Logf("chart rendered %d objects; %d Nodes of %d vCenters initialized by the CCM run with its config and args %v", len(objs), len(vms), len(env.Fed.VCenters), args)
}
