package e2e

// The kubelet serving certificate approver (--controllers=…,
// kubelet-serving-cert-approver; cloud/servingcert), against a real
// apiserver: kubelet-serving CertificateSigningRequests made as a kubelet
// makes them, sent as the Node's own user, approved or denied by the CCM
// with the RBAC of manifests/kubelet-serving-cert-approver.

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"net"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/vmware/govmomi/vim25/types"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	certutil "k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/certificate"
	"k8s.io/client-go/util/certificate/csr"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/test/harness"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/test/vcsim"
)

// The approver's reasons and metrics (cloud/servingcert), as an operator
// reads them.
const (
	csrDecisions      = "cloudprovider_vsphere_kubelet_serving_csr_decisions_total"
	csrLookupFailures = "cloudprovider_vsphere_kubelet_serving_csr_lookup_failures_total"
)

// A kubelet's own request is approved; forged ones (another VM's IP, an IP
// its VM no longer has, a wildcard name, another Node's subject, a request
// not from a Node) are denied with the check that failed; a request whose
// VM's vCenter is down stays pending with a VCenterUnavailable Event and is
// approved once the vCenter is back. The decisions are on /metrics.
func TestKubeletServingCertificates(t *testing.T) {
	t.Parallel()
	start := time.Now()
	env := newEnv(t, harness.Options{VCenters: 2, Datacenters: 1, MachinesPerPool: 2})
	ctx := t.Context()

	// The optional RBAC the chart adds with kubeletServingCertApprover.enabled.
	dir, err := harness.ManifestsDir()
	must(t, err)
	approverRBAC, err := harness.LoadManifests(filepath.Join(dir, "kubelet-serving-cert-approver"))
	must(t, err)
	must(t, env.ControlPlane.Apply(ctx, approverRBAC.Objects))
	// Kubelets create CSRs: a cluster's Node authorizer allows it; this
	// apiserver authorizes by RBAC alone, so bind the role clusters bound
	// to system:nodes before that authorizer existed (as the harness does
	// for real kubelets).
	if _, err := env.Client.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e:system:nodes"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "system:node"},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.GroupKind, Name: "system:nodes"}},
	}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}

	vc1, vc2 := vmsOf(env, "vc1", ""), vmsOf(env, "vc2", "")
	a, b, c, d := vc1[0], vc1[1], vc1[2], vc2[0]
	vms := []*vcsim.VM{a, b, c, d}
	createNodes(t, env, vms)
	ccm := startCCM(t, env, "ccm", harness.CCMOptions{Flags: map[string]string{"controllers": "*,kubelet-serving-cert-approver"}})
	waitInitialized(t, env, names(vms), time.Minute)
	token := metricsReaderToken(t, env)
	t.Logf("environment, CCM and %d initialized Nodes in %s", len(vms), time.Since(start).Round(time.Millisecond))

	// What each kubelet would ask for: the names of its Node's addresses,
	// which the CCM set from vCenter.
	kubeletNames := map[string]csrNames{}
	for _, vm := range vms {
		n, err := env.Client.CoreV1().Nodes().Get(ctx, harness.NodeName(vm), metav1.GetOptions{})
		must(t, err)
		names := namesOfAddresses(n.Status.Addresses)
		if len(names.ips) == 0 {
			t.Fatalf("Node %s has no IP address (%v): a kubelet would ask for no serving certificate", n.Name, n.Status.Addresses)
		}
		for _, ip := range names.ips {
			if ip.String() != vm.IP && ip.String() != "fe80::1" {
				t.Fatalf("Node %s has address %s, not one of VM %s's guest IPs (%s, fe80::1)", n.Name, ip, vm.Name, vm.IP)
			}
		}
		for _, dns := range names.dns {
			if dns != n.Name && dns != vm.HostName {
				t.Fatalf("Node %s has DNS address %s: neither its name nor VM %s's guest host name %s", n.Name, dns, vm.Name, vm.HostName)
			}
		}
		kubeletNames[n.Name] = names
		t.Logf("Node %s: a kubelet asks for DNS %v, IPs %v", n.Name, names.dns, names.ips)
	}
	with := func(vm *vcsim.VM, dns []string, ips ...string) csrNames {
		n := kubeletNames[harness.NodeName(vm)]
		n.dns = append(slices.Clone(n.dns), dns...)
		n.ips = slices.Clone(n.ips)
		for _, ip := range ips {
			n.ips = append(n.ips, net.ParseIP(ip))
		}
		return n
	}

	// Its VM re-addressed (DHCP, a move to another network): the guest
	// reports c's new IP only.
	oldIP, newIP := c.IP, "10.250.0.10"
	setGuestIPv4(env.Fed.VCenter(c.VCenter), c, newIP)

	// Every request of the healthy part at once.
	type want struct {
		what           string
		name           string
		approved       bool
		reason, detail string
	}
	var cases []want
	submit := func(what, requester, subject string, names csrNames, approved bool, reason, detail string) {
		t.Helper()
		name := requestServingCert(t, env, requester, subject, names)
		cases = append(cases, want{what, name, approved, reason, detail})
	}
	an, bn := harness.NodeName(a), harness.NodeName(b)
	submit("the kubelet's own request", an, an, kubeletNames[an], true, "VSphereVMVerified", "")
	submit("its own name and its guest host name", an, an, csrNames{dns: []string{an, a.HostName}, ips: kubeletNames[an].ips}, true, "VSphereVMVerified", "")
	submit("another VM's IP", an, an, with(a, nil, b.IP), false, "IPNotOnVM", b.IP)
	submit("an IP on no VM", an, an, with(a, nil, "192.0.2.7"), false, "IPNotOnVM", "192.0.2.7")
	submit("a wildcard DNS name", an, an, with(a, []string{"*.cluster.local"}), false, "DNSNameNotTheNode", "*.cluster.local")
	submit("another Node's DNS name", an, an, with(a, []string{bn}), false, "DNSNameNotTheNode", bn)
	submit("another Node's subject", bn, an, kubeletNames[an], false, "SubjectNotTheNode", "system:node:"+an)
	submit("a request not from a Node", "", an, kubeletNames[an], false, "RequesterNotTheNode", "")

	// The re-addressed VM: once the CCM's inventory shows the new IP (a
	// request naming it is approved; until then it is denied, so ask again),
	// the address it had before is refused.
	cn := harness.NodeName(c)
	probes, probeDenials := 0, 0
	var newIPApproved bool
	for deadline := time.Now().Add(15 * time.Second); !newIPApproved && time.Now().Before(deadline); {
		probes++
		name := requestServingCert(t, env, cn, cn, csrNames{dns: []string{cn}, ips: []net.IP{net.ParseIP(newIP)}})
		cond := waitDecided(t, env, name, 15*time.Second)
		if newIPApproved = cond.Type == certificatesv1.CertificateApproved; !newIPApproved {
			probeDenials++
			if cond.Reason != "IPNotOnVM" {
				t.Fatalf("a request for %s's new IP %s: %s %s: %s", cn, newIP, cond.Type, cond.Reason, cond.Message)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	if !newIPApproved {
		t.Fatalf("no request for %s's new IP %s approved in 15s (%d tries)", cn, newIP, probes)
	}
	t.Logf("%s's new IP %s approved at try %d", cn, newIP, probes)
	submit("an IP its VM no longer has", cn, cn, csrNames{dns: []string{cn}, ips: []net.IP{net.ParseIP(oldIP)}}, false, "IPNotOnVM", oldIP)

	for _, w := range cases {
		cond := waitDecided(t, env, w.name, 20*time.Second)
		got := cond.Type == certificatesv1.CertificateApproved
		if got != w.approved || cond.Reason != w.reason || !strings.Contains(cond.Message, w.detail) {
			t.Errorf("%s (%s): %s %s %q; want approved=%v, reason %s, a message naming %q", w.what, w.name, cond.Type, cond.Reason, cond.Message, w.approved, w.reason, w.detail)
			continue
		}
		t.Logf("%s: %s %s: %s", w.what, cond.Type, cond.Reason, cond.Message)
	}

	// vc2, which holds d's VM, stops answering after d was initialized: d's
	// kubelet's request waits, with an Event saying why, and is approved
	// once vc2 is back.
	must(t, env.Proxies["vc2"].SetMode(vcsim.Refuse))
	scrapeUntil(t, ccm, token, "showing vc2 down", 30*time.Second, func(ss harness.Samples) bool {
		v, ok := ss.Sum("cloudprovider_vsphere_vcenter_up", "vcenter", "vc2")
		return ok && v == 0
	})
	dn := harness.NodeName(d)
	pending := requestServingCert(t, env, dn, dn, kubeletNames[dn])
	ev := waitEvent(t, env, metav1.NamespaceDefault, "CertificateSigningRequest", pending, "VCenterUnavailable", 20*time.Second)
	if ev.Type != corev1.EventTypeWarning || !strings.Contains(ev.Message, dn) {
		t.Errorf("Event %s %s %q: want a Warning naming Node %s", ev.Type, ev.Reason, ev.Message, dn)
	}
	t.Logf("vc2 down: %s pending, Event %s: %s", pending, ev.Reason, ev.Message)
	observe(t, 3*time.Second, func() error {
		if cond := decision(t, env, pending); cond != nil {
			return fmt.Errorf("%s decided while vc2 is down: %s %s: %s", pending, cond.Type, cond.Reason, cond.Message)
		}
		return nil
	})
	must(t, env.Proxies["vc2"].SetMode(vcsim.Pass))
	healed := time.Now()
	cond := waitDecided(t, env, pending, 60*time.Second)
	if cond.Type != certificatesv1.CertificateApproved || cond.Reason != "VSphereVMVerified" {
		t.Fatalf("%s after vc2 is back: %s %s: %s; want Approved VSphereVMVerified", pending, cond.Type, cond.Reason, cond.Message)
	}
	t.Logf("vc2 back: %s approved %s after the heal", pending, time.Since(healed).Round(time.Millisecond))

	// /metrics counts every decision once, by the check that decided it.
	wantCounts := map[[2]string]float64{
		{"approved", "VSphereVMVerified"}: 2 + 1 + 1, // a's two, c's new IP, d's after the outage
		{"denied", "IPNotOnVM"}:           3 + float64(probeDenials),
		{"denied", "DNSNameNotTheNode"}:   2,
		{"denied", "SubjectNotTheNode"}:   1,
		{"denied", "RequesterNotTheNode"}: 1,
	}
	var ss harness.Samples
	scrapeUntil(t, ccm, token, "counting every decision", 10*time.Second, func(got harness.Samples) bool {
		ss = got
		for k, v := range wantCounts {
			if n, _ := got.Sum(csrDecisions, "decision", k[0], "reason", k[1]); n != v {
				return false
			}
		}
		return true
	})
	var total float64
	for _, v := range wantCounts {
		total += v
	}
	if n, _ := ss.Sum(csrDecisions); n != total {
		t.Errorf("%s sums to %v, want %v (no other decision): %v", csrDecisions, n, total, ss.Find(csrDecisions))
	}
	if n, _ := ss.Sum(csrLookupFailures); n < 1 {
		t.Errorf("%s = %v after a request left pending by vc2's outage", csrLookupFailures, n)
	}
	t.Logf("/metrics: %v; lookup failures %v; whole test %s", ss.Find(csrDecisions), ss.Find(csrLookupFailures), time.Since(start).Round(time.Millisecond))
}

// csrNames are the subject alternative names of a serving certificate
// request.
type csrNames struct {
	dns []string
	ips []net.IP
}

// namesOfAddresses is what the kubelet asks a serving certificate for, from
// its Node's addresses (k8s.io/kubernetes pkg/kubelet/certificate,
// addressesToHostnamesAndIPs): host names and DNS addresses as DNS names
// (a host name that parses as an IP as an IP), internal and external IPs as
// IPs; unique, sorted.
func namesOfAddresses(addrs []corev1.NodeAddress) csrNames {
	dns, ips := map[string]bool{}, map[string]bool{}
	for _, a := range addrs {
		if a.Address == "" {
			continue
		}
		switch a.Type {
		case corev1.NodeHostName:
			if net.ParseIP(a.Address) != nil {
				ips[a.Address] = true
			} else {
				dns[a.Address] = true
			}
		case corev1.NodeExternalIP, corev1.NodeInternalIP:
			if net.ParseIP(a.Address) != nil {
				ips[a.Address] = true
			}
		case corev1.NodeExternalDNS, corev1.NodeInternalDNS:
			dns[a.Address] = true
		}
	}
	var out csrNames
	for n := range dns {
		out.dns = append(out.dns, n)
	}
	sort.Strings(out.dns)
	for ip := range ips {
		out.ips = append(out.ips, net.ParseIP(ip))
	}
	sort.Slice(out.ips, func(i, j int) bool { return out.ips[i].String() < out.ips[j].String() })
	return out
}

// requestServingCert creates a kubelet-serving CSR as the kubelet's
// certificate manager does (an ECDSA P-256 key, subject
// CN=system:node:<subject> O=system:nodes, its usages for that key, through
// k8s.io/client-go/util/certificate/csr), sent as user
// system:node:<requester> in groups system:nodes and system:authenticated
// (as the administrator when requester is ""), and returns its name.
func requestServingCert(t *testing.T, env *harness.Env, requester, subject string, names csrNames) string {
	t.Helper()
	client := env.Client
	if requester != "" {
		cfg := rest.CopyConfig(env.ControlPlane.Config)
		cfg.Impersonate = rest.ImpersonationConfig{UserName: "system:node:" + requester, Groups: []string{"system:nodes", "system:authenticated"}}
		var err error
		client, err = kubernetes.NewForConfig(cfg)
		must(t, err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	must(t, err)
	der, err := certutil.MakeCSRFromTemplate(key, &x509.CertificateRequest{
		Subject:     pkix.Name{CommonName: "system:node:" + subject, Organization: []string{"system:nodes"}},
		DNSNames:    names.dns,
		IPAddresses: names.ips,
	})
	must(t, err)
	name, _, err := csr.RequestCertificateWithContext(t.Context(), client, der, "", certificatesv1.KubeletServingSignerName, nil,
		certificate.DefaultKubeletServingGetUsages(key), key)
	if err != nil {
		t.Fatalf("creating a kubelet-serving CSR as %q: %v", requester, err)
	}
	return name
}

// decision is the Approved, Denied or Failed condition of the CSR name;
// nil while it is pending.
func decision(t *testing.T, env *harness.Env, name string) *certificatesv1.CertificateSigningRequestCondition {
	t.Helper()
	r, err := env.Client.CertificatesV1().CertificateSigningRequests().Get(t.Context(), name, metav1.GetOptions{})
	must(t, err)
	for _, c := range r.Status.Conditions {
		switch c.Type {
		case certificatesv1.CertificateApproved, certificatesv1.CertificateDenied, certificatesv1.CertificateFailed:
			return &c
		}
	}
	return nil
}

// waitDecided waits until the CSR name is decided and returns how.
func waitDecided(t *testing.T, env *harness.Env, name string, timeout time.Duration) certificatesv1.CertificateSigningRequestCondition {
	t.Helper()
	var cond *certificatesv1.CertificateSigningRequestCondition
	if err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		cond = decision(t, env, name)
		return cond != nil, nil
	}); err != nil {
		t.Fatalf("CSR %s not approved or denied within %s; Events %v", name, timeout, events(t, env, metav1.NamespaceDefault, "CertificateSigningRequest", name))
	}
	return *cond
}

// scrapeUntil scrapes the CCM's /metrics until cond holds.
func scrapeUntil(t *testing.T, ccm *harness.CCMProcess, token, what string, timeout time.Duration, cond func(harness.Samples) bool) {
	t.Helper()
	var body string
	if err := wait.PollUntilContextTimeout(t.Context(), 250*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		ss, b, err := ccm.Scrape(ctx, token)
		if err != nil {
			return false, err
		}
		body = b
		return cond(ss), nil
	}); err != nil {
		var ours []string
		for line := range strings.Lines(body) {
			if strings.HasPrefix(line, "cloudprovider_vsphere_") {
				ours = append(ours, strings.TrimSpace(line))
			}
		}
		t.Fatalf("/metrics: not %s within %s (%v):\n%s", what, timeout, err, strings.Join(ours, "\n"))
	}
}

// metricIs waits up to 30 s for the sum of name's samples with labels to
// be want.
func metricIs(t *testing.T, ccm *harness.CCMProcess, token string, want float64, name string, labels ...string) {
	t.Helper()
	scrapeUntil(t, ccm, token, fmt.Sprintf("showing %s%v = %v", name, labels, want), 30*time.Second, func(ss harness.Samples) bool {
		got, _ := ss.Sum(name, labels...)
		return got == want
	})
}

// setGuestIPv4 makes vm's VMware Tools report ip instead of its IPv4
// address, on the same adapter, as after a DHCP lease to another address.
func setGuestIPv4(vc *vcsim.VCenter, vm *vcsim.VM, ip string) {
	obj := vc.Object(vm)
	ctx := vc.Model.Service.Context
	vc.Model.Map().WithLock(ctx, obj.Reference(), func() {
		nics := slices.Clone(obj.Guest.Net)
		for i := range nics {
			var ips []string
			for _, old := range nics[i].IpAddress {
				if old == vm.IP {
					old = ip
				}
				ips = append(ips, old)
			}
			nics[i].IpAddress = ips
		}
		ctx.Update(obj, []types.PropertyChange{{Name: "guest.net", Val: nics}, {Name: "guest.ipAddress", Val: ip}})
	})
}
