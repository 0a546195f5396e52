package e2e

// The Helm chart, as an operator installs it for several vCenters: its
// rendering applies to a real apiserver with strict field validation, and
// the CCM runs with the cloud config and the arguments it rendered.

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

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

// kubeletServingCertApprover.enabled adds the approver to --controllers and
// the RBAC it needs, bound to the CCM's ServiceAccount, approving for the
// kubelet-serving signer alone; off (the default), the chart renders no
// right on CertificateSigningRequests. Enabled, its RBAC is
// manifests/kubelet-serving-cert-approver (the plain manifests' optional
// part, which TestKubeletServingCertificates runs the approver with).
func TestChartKubeletServingCertApprover(t *testing.T) {
	t.Parallel()
	root, err := harness.RepoRoot()
	must(t, err)
	dir := t.TempDir()
	render := func(set ...string) []*unstructured.Unstructured {
		t.Helper()
		args := []string{"template", "vsphere-federated-ccm", filepath.Join(root, "manifests", "chart"), "--namespace", harness.Namespace}
		for _, s := range set {
			args = append(args, "--set", s)
		}
		out, err := exec.Command(helmBinary(t), args...).CombinedOutput()
		if err != nil {
			t.Fatalf("helm %v: %v\n%s", args, err, out)
		}
		file := filepath.Join(dir, fmt.Sprintf("rendered-%d.yaml", len(set)))
		must(t, os.WriteFile(file, out, 0o600))
		objs, err := harness.ReadObjects(file)
		must(t, err)
		return objs
	}
	controllers := func(objs []*unstructured.Unstructured) string {
		t.Helper()
		args, err := harness.DaemonSetArgs(&harness.Manifests{Objects: objs})
		must(t, err)
		for _, a := range args {
			if v, ok := strings.CutPrefix(a, "--controllers="); ok {
				return v
			}
		}
		t.Fatalf("no --controllers in %v", args)
		return ""
	}
	csrRules := func(objs []*unstructured.Unstructured) (out []*unstructured.Unstructured) {
		for _, o := range objs {
			if o.GetKind() != "ClusterRole" && o.GetKind() != "Role" {
				continue
			}
			var r rbacv1.ClusterRole
			must(t, runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &r))
			for _, rule := range r.Rules {
				if slices.Contains(rule.APIGroups, "certificates.k8s.io") || slices.Contains(rule.APIGroups, "*") {
					out = append(out, o)
					break
				}
			}
		}
		return out
	}

	off := render()
	if got := controllers(off); got != "cloud-node,cloud-node-lifecycle" {
		t.Errorf("default --controllers=%s, want cloud-node,cloud-node-lifecycle", got)
	}
	if roles := csrRules(off); len(roles) > 0 {
		t.Errorf("by default the chart grants rights on certificates.k8s.io: %s %s", roles[0].GetKind(), roles[0].GetName())
	}

	on := render("kubeletServingCertApprover.enabled=true")
	if got := controllers(on); got != "cloud-node,cloud-node-lifecycle,kubelet-serving-cert-approver" {
		t.Errorf("enabled: --controllers=%s, want cloud-node,cloud-node-lifecycle,kubelet-serving-cert-approver", got)
	}
	roles := csrRules(on)
	if len(roles) != 1 {
		t.Fatalf("enabled: %d roles grant rights on certificates.k8s.io, want 1", len(roles))
	}
	var role rbacv1.ClusterRole
	must(t, runtime.DefaultUnstructuredConverter.FromUnstructured(roles[0].Object, &role))
	wantRules := []rbacv1.PolicyRule{
		{APIGroups: []string{"certificates.k8s.io"}, Resources: []string{"certificatesigningrequests"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{"certificates.k8s.io"}, Resources: []string{"certificatesigningrequests/approval"}, Verbs: []string{"update"}},
		{APIGroups: []string{"certificates.k8s.io"}, Resources: []string{"signers"}, ResourceNames: []string{"kubernetes.io/kubelet-serving"}, Verbs: []string{"approve"}},
	}
	if role.Kind != "ClusterRole" || !reflect.DeepEqual(role.Rules, wantRules) {
		t.Errorf("enabled: %s %s rules %+v, want %+v", role.Kind, role.Name, role.Rules, wantRules)
	}
	var bound bool
	for _, o := range on {
		if o.GetKind() != "ClusterRoleBinding" {
			continue
		}
		var b rbacv1.ClusterRoleBinding
		must(t, runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &b))
		if b.RoleRef.Kind == "ClusterRole" && b.RoleRef.Name == role.Name {
			bound = slices.Equal(b.Subjects, []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: harness.ServiceAccount, Namespace: harness.Namespace}})
			if !bound {
				t.Errorf("enabled: %s binds %s to %+v, want only the CCM's ServiceAccount", b.Name, role.Name, b.Subjects)
			}
		}
	}
	if !bound {
		t.Errorf("enabled: no ClusterRoleBinding of %s", role.Name)
	}

	// The plain manifests' optional part is exactly what enabling adds.
	var added []*unstructured.Unstructured
	for _, o := range on {
		if !slices.ContainsFunc(off, func(p *unstructured.Unstructured) bool {
			return p.GetKind() == o.GetKind() && p.GetNamespace() == o.GetNamespace() && p.GetName() == o.GetName()
		}) {
			added = append(added, o)
		}
	}
	plain, err := harness.LoadManifests(filepath.Join(root, "manifests", "kubelet-serving-cert-approver"))
	must(t, err)
	if len(plain.Objects) != len(added) {
		t.Fatalf("manifests/kubelet-serving-cert-approver holds %d objects; enabling the approver adds %d to the chart's rendering", len(plain.Objects), len(added))
	}
	for i := range added {
		if !reflect.DeepEqual(plain.Objects[i].Object, added[i].Object) {
			t.Errorf("manifests/kubelet-serving-cert-approver: %s %s differs from the chart's rendering (helm template --set kubeletServingCertApprover.enabled=true --show-only templates/servingcert-rbac.yaml):\n%v\nwant\n%v",
				plain.Objects[i].GetKind(), plain.Objects[i].GetName(), plain.Objects[i].Object, added[i].Object)
		}
	}
}
