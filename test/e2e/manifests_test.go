package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config/credentials"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/test/harness"
)

// The kustomization lists every file of manifests/, so what the suite
// applies is what `kubectl apply -k manifests/` deploys.
func TestKustomizationCoversEveryManifest(t *testing.T) {
	t.Parallel()
	dir, err := harness.ManifestsDir()
	if err != nil {
		t.Fatal(err)
	}
	m, err := harness.LoadManifests(dir)
	if err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var files []string
	for _, e := range entries {
		if e.IsDir() {
			// The Helm chart these manifests are rendered from, or a
			// kustomization of its own (cpi-migration), applied separately:
			// it too must list every file it holds.
			if _, err := os.Stat(filepath.Join(dir, e.Name(), "Chart.yaml")); err != nil {
				checkKustomizationDir(t, filepath.Join(dir, e.Name()))
			}
			continue
		}
		if e.Name() != "kustomization.yaml" && filepath.Ext(e.Name()) == ".yaml" {
			files = append(files, e.Name())
		}
	}
	listed := slices.Sorted(slices.Values(m.Kustomization.Resources))
	slices.Sort(files)
	if !slices.Equal(files, listed) {
		t.Fatalf("manifests/ holds %v but kustomization.yaml lists %v", files, listed)
	}
	for _, kind := range []string{"ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding", "ConfigMap", "Secret", "DaemonSet"} {
		if !slices.ContainsFunc(m.Objects, func(o *unstructured.Unstructured) bool { return o.GetKind() == kind }) {
			t.Errorf("no %s in the manifests", kind)
		}
	}
}

// The manifests, applied to a real apiserver with strict field validation,
// deploy what the brief asks for, and the CCM runs with the ServiceAccount's
// token alone: RBAC sufficient for the Lease, the Secret, Nodes, Events and
// delegated authentication of the secure port.
func TestManifestsDeployAndRBACSuffices(t *testing.T) {
	t.Parallel()
	env := newEnv(t, harness.Options{VCenters: 2, Datacenters: 1})
	ctx := t.Context()
	m := env.Manifests

	// Every object is on the server.
	for _, o := range m.Objects {
		gvk := o.GroupVersionKind()
		mapping, err := env.ControlPlane.Mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			t.Fatal(err)
		}
		ri := env.ControlPlane.Dynamic.Resource(mapping.Resource)
		if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
			_, err = ri.Namespace(o.GetNamespace()).Get(ctx, o.GetName(), metav1.GetOptions{})
		} else {
			_, err = ri.Get(ctx, o.GetName(), metav1.GetOptions{})
		}
		if err != nil {
			t.Errorf("%s %s/%s not on the server: %v", gvk.Kind, o.GetNamespace(), o.GetName(), err)
		}
	}

	ds, err := env.Client.AppsV1().DaemonSets(harness.Namespace).Get(ctx, harness.DaemonSetName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	checkDaemonSet(t, ds)

	// The example config parses, and its Secret is the manifests' Secret,
	// with a username and password key for every server, readable under the
	// Role's resourceNames.
	cm, err := env.Client.CoreV1().ConfigMaps(harness.Namespace).Get(ctx, harness.ConfigMapName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse([]byte(cm.Data[harness.ConfigMapKey]))
	if err != nil {
		t.Fatalf("the ConfigMap's %s does not parse: %v", harness.ConfigMapKey, err)
	}
	if len(cfg.VCenters) < 2 {
		t.Errorf("the example config has %d vCenters; it should show a federation", len(cfg.VCenters))
	}
	var example corev1.Secret
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m.Find("Secret", harness.Namespace, harness.SecretName).Object, &example); err != nil {
		t.Fatal(err)
	}
	var role rbacv1.Role
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m.Find("Role", harness.Namespace, "vsphere-federated-ccm").Object, &role); err != nil {
		t.Fatal(err)
	}
	for _, vc := range cfg.VCenters {
		if vc.SecretName != harness.SecretName || vc.SecretNamespace != harness.Namespace {
			t.Errorf("vcenter %s: secret %s/%s, want the manifests' %s/%s", vc.Name, vc.SecretNamespace, vc.SecretName, harness.Namespace, harness.SecretName)
		}
		for _, key := range []string{credentials.UsernameKey(vc.Server), credentials.PasswordKey(vc.Server)} {
			if _, ok := example.StringData[key]; !ok {
				t.Errorf("the example Secret has no key %s for vcenter %s", key, vc.Name)
			}
		}
	}
	if !slices.ContainsFunc(role.Rules, func(r rbacv1.PolicyRule) bool {
		return slices.Contains(r.Resources, "secrets") && slices.Contains(r.ResourceNames, harness.SecretName)
	}) {
		t.Errorf("the Role does not grant the Secret %s by name", harness.SecretName)
	}

	// No cluster-wide rule touches Secrets, and no rule uses wildcards.
	for _, o := range m.Objects {
		if o.GetKind() != "ClusterRole" && o.GetKind() != "Role" {
			continue
		}
		var cr rbacv1.ClusterRole // same rules layout as Role
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &cr); err != nil {
			t.Fatal(err)
		}
		for _, r := range cr.Rules {
			if slices.Contains(r.Verbs, "*") || slices.Contains(r.Resources, "*") || slices.Contains(r.APIGroups, "*") {
				t.Errorf("%s %s: wildcard rule %+v", o.GetKind(), o.GetName(), r)
			}
			if o.GetKind() == "ClusterRole" && slices.Contains(r.Resources, "secrets") {
				t.Errorf("ClusterRole %s grants secrets cluster-wide: %+v", o.GetName(), r)
			}
		}
	}

	// The CCM, as the DaemonSet runs it (leader election on), with the
	// ServiceAccount's token: it takes the Lease, reads the Secret, logs in
	// to every vCenter and initializes Nodes.
	ccm := startCCM(t, env, "ccm", harness.CCMOptions{LeaderElect: true})
	vms := env.Fed.AllVMs()
	createNodes(t, env, vms)
	waitInitialized(t, env, names(vms), time.Minute)
	checkNodes(t, env, expectations(env, vms))
	lease, err := env.Client.CoordinationV1().Leases(harness.Namespace).Get(ctx, "cloud-controller-manager", metav1.GetOptions{})
	if err != nil || ptrVal(lease.Spec.HolderIdentity) == "" {
		t.Fatalf("lease: %v %v", lease, err)
	}
	// It recorded its leadership as an Event (events create in kube-system).
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		evs, err := env.Client.CoreV1().Events(harness.Namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		return slices.ContainsFunc(evs.Items, func(e corev1.Event) bool {
			return e.Reason == "LeaderElection" && e.InvolvedObject.Kind == "Lease"
		}), nil
	}); err != nil {
		t.Fatalf("no LeaderElection Event: %v", err)
	}

	// The secure port: /healthz is open to the anonymous liveness probe;
	// /metrics goes through delegated authentication (TokenReview) and
	// authorization (SubjectAccessReview), the auth-delegator binding.
	probe := func(path, token string) int {
		t.Helper()
		code, body, err := ccm.Healthz(ctx, path, token)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		t.Logf("GET %s (token %v): %d %.60q", path, token != "", code, body)
		return code
	}
	if code := probe("/healthz", ""); code != http.StatusOK {
		t.Errorf("anonymous /healthz: %d, want 200 (the liveness probe)", code)
	}
	if code := probe("/metrics", "not-a-token"); code != http.StatusUnauthorized {
		t.Errorf("/metrics with a bogus token: %d, want 401", code)
	}
	if code := probe("/metrics", env.CCMToken); code != http.StatusForbidden {
		t.Errorf("/metrics as the CCM's ServiceAccount (authenticated, not authorized): %d, want 403", code)
	}
	scraper := metricsReaderToken(t, env)
	if code := probe("/metrics", scraper); code != http.StatusOK {
		t.Errorf("/metrics as a ServiceAccount allowed to get /metrics: %d, want 200", code)
	}
}

func checkDaemonSet(t *testing.T, ds *appsv1.DaemonSet) {
	t.Helper()
	spec := ds.Spec.Template.Spec
	if got := spec.NodeSelector["node-role.kubernetes.io/control-plane"]; got != "" || len(spec.NodeSelector) != 1 {
		t.Errorf("nodeSelector %v, want only node-role.kubernetes.io/control-plane", spec.NodeSelector)
	} else if _, ok := spec.NodeSelector["node-role.kubernetes.io/control-plane"]; !ok {
		t.Errorf("nodeSelector %v lacks node-role.kubernetes.io/control-plane", spec.NodeSelector)
	}
	for _, taint := range []corev1.Taint{
		{Key: harness.UninitializedTaint, Value: "true", Effect: corev1.TaintEffectNoSchedule},
		{Key: "node-role.kubernetes.io/control-plane", Effect: corev1.TaintEffectNoSchedule},
		{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoSchedule},
		{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoExecute},
	} {
		if !slices.ContainsFunc(spec.Tolerations, func(tol corev1.Toleration) bool { return tol.ToleratesTaint(klog.Background(), &taint, false) }) {
			t.Errorf("no toleration for taint %s", taint.ToString())
		}
	}
	if !spec.HostNetwork {
		t.Error("hostNetwork is off")
	}
	if spec.PriorityClassName != "system-node-critical" {
		t.Errorf("priorityClassName %q", spec.PriorityClassName)
	}
	if spec.ServiceAccountName != harness.ServiceAccount {
		t.Errorf("serviceAccountName %q", spec.ServiceAccountName)
	}
	// A Service named vsphere-vcenter… would otherwise put variables
	// named as CPI's overrides in the CCM's environment.
	if spec.EnableServiceLinks == nil || *spec.EnableServiceLinks {
		t.Error("enableServiceLinks is not false")
	}
	psc := spec.SecurityContext
	if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.RunAsUser == nil || *psc.RunAsUser == 0 {
		t.Errorf("pod securityContext %+v: want runAsNonRoot and a non-zero runAsUser", psc)
	}
	if len(spec.Containers) != 1 {
		t.Fatalf("%d containers, want 1", len(spec.Containers))
	}
	c := spec.Containers[0]
	if c.Image != "vsphere-federated-ccm:latest" {
		t.Errorf("image %q, want the placeholder vsphere-federated-ccm:latest", c.Image)
	}
	sc := c.SecurityContext
	if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		t.Errorf("container securityContext %+v: want readOnlyRootFilesystem, no privilege escalation", sc)
	}
	for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		if _, ok := c.Resources.Requests[r]; !ok {
			t.Errorf("no %s request", r)
		}
	}
	if _, ok := c.Resources.Limits[corev1.ResourceMemory]; !ok {
		t.Error("no memory limit")
	}
	// The provider names its Pod in Events from the downward API.
	for name, path := range map[string]string{"POD_NAME": "metadata.name", "POD_NAMESPACE": "metadata.namespace"} {
		if !slices.ContainsFunc(c.Env, func(e corev1.EnvVar) bool {
			return e.Name == name && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == path
		}) {
			t.Errorf("no env %s from the downward API field %s", name, path)
		}
	}
	// The Go soft memory limit follows the container's (main.go).
	if !slices.ContainsFunc(c.Env, func(e corev1.EnvVar) bool {
		return e.Name == "MEMORY_LIMIT" && e.ValueFrom != nil && e.ValueFrom.ResourceFieldRef != nil &&
			e.ValueFrom.ResourceFieldRef.Resource == "limits.memory" && e.ValueFrom.ResourceFieldRef.ContainerName == c.Name
	}) {
		t.Error("no env MEMORY_LIMIT from the downward API resource limits.memory")
	}
	args := map[string]string{}
	for _, a := range c.Args {
		k, v, _ := strings.Cut(a, "=")
		args[k] = v
	}
	for k, want := range map[string]string{"--cloud-provider": "vsphere", "--leader-elect": "true", "--use-service-account-credentials": "false"} {
		if args[k] != want {
			t.Errorf("arg %s=%q, want %q", k, args[k], want)
		}
	}
	// The liveness probe hits the secure port's /healthz over HTTPS.
	p := c.LivenessProbe
	if p == nil || p.HTTPGet == nil {
		t.Fatal("no HTTP liveness probe")
	}
	if p.HTTPGet.Scheme != corev1.URISchemeHTTPS || p.HTTPGet.Path != "/healthz" || p.HTTPGet.Port != intstr.FromString(args["--secure-port"]) && p.HTTPGet.Port.String() != args["--secure-port"] {
		t.Errorf("liveness probe %s %s port %s; want HTTPS /healthz on --secure-port=%s", p.HTTPGet.Scheme, p.HTTPGet.Path, p.HTTPGet.Port.String(), args["--secure-port"])
	}
	if bind := args["--bind-address"]; bind != "" && bind != "0.0.0.0" && p.HTTPGet.Host != bind {
		t.Errorf("secure port bound to %s but the probe targets host %q", bind, p.HTTPGet.Host)
	}
	// --cloud-config is the ConfigMap's key, mounted read-only.
	cloudConfig := args["--cloud-config"]
	var mounted bool
	for _, vm := range c.VolumeMounts {
		if filepath.Join(vm.MountPath, harness.ConfigMapKey) != cloudConfig {
			continue
		}
		for _, v := range spec.Volumes {
			if v.Name == vm.Name && v.ConfigMap != nil && v.ConfigMap.Name == harness.ConfigMapName && vm.ReadOnly {
				mounted = true
			}
		}
	}
	if !mounted {
		t.Errorf("--cloud-config=%s is not the key %s of ConfigMap %s mounted read-only", cloudConfig, harness.ConfigMapKey, harness.ConfigMapName)
	}
}

// The ServiceAccount can read the credentials Secret and nothing else of
// Secrets: not in default, not cluster-wide, not another one in
// kube-system. Asked as the ServiceAccount itself (SelfSubjectAccessReview
// with its token).
func TestRBACHasNoClusterWideSecretAccess(t *testing.T) {
	t.Parallel()
	env := newEnv(t, harness.Options{VCenters: 1, Datacenters: 1})
	sa, err := kubernetes.NewForConfig(env.CCMConfig)
	if err != nil {
		t.Fatal(err)
	}
	type check struct {
		attrs authorizationv1.ResourceAttributes
		want  bool
	}
	secret := func(verb, ns, name string) authorizationv1.ResourceAttributes {
		return authorizationv1.ResourceAttributes{Verb: verb, Resource: "secrets", Namespace: ns, Name: name}
	}
	checks := []check{
		{secret("get", harness.Namespace, harness.SecretName), true},
		{secret("list", harness.Namespace, harness.SecretName), true}, // the field-selected informer
		{secret("watch", harness.Namespace, harness.SecretName), true},
		{secret("list", "default", ""), false},
		{secret("get", "default", harness.SecretName), false},
		{secret("list", "", ""), false},
		{secret("watch", "", ""), false},
		{secret("list", harness.Namespace, ""), false},
		{secret("get", harness.Namespace, "some-other-secret"), false},
		{secret("update", harness.Namespace, harness.SecretName), false},
		{authorizationv1.ResourceAttributes{Verb: "delete", Resource: "nodes"}, true},
		{authorizationv1.ResourceAttributes{Verb: "patch", Resource: "nodes", Subresource: "status"}, true},
		{authorizationv1.ResourceAttributes{Verb: "create", Group: "coordination.k8s.io", Resource: "leases", Namespace: harness.Namespace}, true},
		{authorizationv1.ResourceAttributes{Verb: "create", Group: "coordination.k8s.io", Resource: "leases", Namespace: "default"}, false},
		{authorizationv1.ResourceAttributes{Verb: "create", Resource: "serviceaccounts", Subresource: "token", Namespace: harness.Namespace, Name: harness.ServiceAccount}, false},
		{authorizationv1.ResourceAttributes{Verb: "create", Resource: "serviceaccounts", Namespace: harness.Namespace}, false},
		{authorizationv1.ResourceAttributes{Verb: "list", Resource: "pods"}, false},
		{authorizationv1.ResourceAttributes{Verb: "get", Resource: "configmaps", Namespace: harness.Namespace, Name: "extension-apiserver-authentication"}, true},
		{authorizationv1.ResourceAttributes{Verb: "get", Resource: "configmaps", Namespace: harness.Namespace, Name: harness.ConfigMapName}, false},
	}
	for _, c := range checks {
		attrs := c.attrs
		r, err := sa.AuthorizationV1().SelfSubjectAccessReviews().Create(t.Context(), &authorizationv1.SelfSubjectAccessReview{
			Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &attrs},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		desc := fmt.Sprintf("%s %s/%s ns=%q name=%q", attrs.Verb, attrs.Resource, attrs.Subresource, attrs.Namespace, attrs.Name)
		if r.Status.Allowed != c.want {
			t.Errorf("system:serviceaccount:%s:%s may %s: %v, want %v (%s)", harness.Namespace, harness.ServiceAccount, desc, r.Status.Allowed, c.want, r.Status.Reason)
		}
	}
	// And the real thing: listing Secrets in default as the ServiceAccount is refused.
	if _, err := sa.CoreV1().Secrets("default").List(t.Context(), metav1.ListOptions{}); err == nil {
		t.Error("the ServiceAccount listed Secrets in default")
	}
	if _, err := sa.CoreV1().Secrets(harness.Namespace).Get(t.Context(), harness.SecretName, metav1.GetOptions{}); err != nil {
		t.Errorf("the ServiceAccount cannot get its Secret: %v", err)
	}
}

// checkKustomizationDir fails unless dir's kustomization.yaml loads and
// lists exactly the other files of dir.
func checkKustomizationDir(t *testing.T, dir string) {
	t.Helper()
	m, err := harness.LoadManifests(dir)
	if err != nil {
		t.Errorf("%s: %v", dir, err)
		return
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var files []string
	for _, e := range entries {
		if e.Name() != "kustomization.yaml" {
			files = append(files, e.Name())
		}
	}
	if listed := slices.Sorted(slices.Values(m.Kustomization.Resources)); !slices.Equal(files, listed) {
		t.Errorf("%s holds %v but its kustomization.yaml lists %v", dir, files, listed)
	}
}
