package servingcert

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"
	cloudproviderapi "k8s.io/cloud-provider/api"
	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/testutil"
)

// fakeVMs answers Guest from a table by providerID; err (when set) for
// every lookup, as a vCenter that does not answer.
type fakeVMs struct {
	mu     sync.Mutex
	guests map[string]*Guest
	err    error
	asked  int
}

func (f *fakeVMs) Guest(_ context.Context, node *v1.Node) (*Guest, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.asked++
	if f.err != nil {
		return nil, f.err
	}
	return f.guests[node.Spec.ProviderID], nil
}

func (f *fakeVMs) lookups() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.asked
}

func (f *fakeVMs) set(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.err = err
}

// kubeletCSR is a request made as the kubelet's certificate manager makes
// it: an ECDSA P-256 key, subject system:node:<name> / system:nodes, the
// DNS names and IPs given, usages digital signature and server auth, from
// user system:node:<name> in group system:nodes.
func kubeletCSR(t *testing.T, name, requester string, dns []string, ips []string, usages ...certificatesv1.KeyUsage) *certificatesv1.CertificateSigningRequest {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.CertificateRequest{Subject: pkix.Name{CommonName: "system:node:" + name, Organization: []string{"system:nodes"}}, DNSNames: dns}
	for _, ip := range ips {
		tmpl.IPAddresses = append(tmpl.IPAddresses, net.ParseIP(ip))
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, tmpl, key)
	if err != nil {
		t.Fatal(err)
	}
	if len(usages) == 0 {
		usages = []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageServerAuth}
	}
	return &certificatesv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "csr-", CreationTimestamp: metav1.Now()},
		Spec: certificatesv1.CertificateSigningRequestSpec{
			Request:    pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}),
			SignerName: certificatesv1.KubeletServingSignerName,
			Usages:     usages,
			Username:   requester,
			Groups:     []string{"system:nodes", "system:authenticated"},
		},
	}
}

func node(name, providerID string, initialized bool) *v1.Node {
	n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1.NodeSpec{ProviderID: providerID}}
	if !initialized {
		n.Spec.Taints = []v1.Taint{{Key: cloudproviderapi.TaintExternalCloudProvider, Value: "true", Effect: v1.TaintEffectNoSchedule}}
	}
	return n
}

type world struct {
	t         *testing.T
	client    *fake.Clientset
	vms       *fakeVMs
	metrics   *Metrics
	recorder  *record.FakeRecorder
	submitted int
}

func startApprover(t *testing.T, vms *fakeVMs, opts Options, objs ...*v1.Node) *world {
	t.Helper()
	client := fake.NewClientset()
	for _, n := range objs {
		if _, err := client.CoreV1().Nodes().Create(t.Context(), n, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	factory := informers.NewSharedInformerFactory(client, 0)
	w := &world{t: t, client: client, vms: vms, metrics: NewMetrics(), recorder: record.NewFakeRecorder(100)}
	// Unregistered component-base metrics count nothing.
	metrics.NewKubeRegistry().MustRegister(w.metrics.Collectors()...)
	a, err := New(client, factory.Certificates().V1().CertificateSigningRequests(), factory.Core().V1().Nodes(), vms, w.recorder, w.metrics, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	var done sync.WaitGroup
	done.Go(func() { a.Run(ctx, 2) })
	factory.Start(ctx.Done())
	t.Cleanup(func() { cancel(); done.Wait(); factory.Shutdown() })
	return w
}

func (w *world) submit(csr *certificatesv1.CertificateSigningRequest) string {
	w.t.Helper()
	w.submitted++
	// The fake client does not generate names.
	csr.Name = fmt.Sprintf("csr-%d", w.submitted)
	got, err := w.client.CertificatesV1().CertificateSigningRequests().Create(w.t.Context(), csr, metav1.CreateOptions{})
	if err != nil {
		w.t.Fatal(err)
	}
	return got.Name
}

// decision waits for name's condition and returns it; nil when none came
// within wait.
func (w *world) decision(name string, within time.Duration) *certificatesv1.CertificateSigningRequestCondition {
	w.t.Helper()
	var cond *certificatesv1.CertificateSigningRequestCondition
	_ = wait.PollUntilContextTimeout(w.t.Context(), 10*time.Millisecond, within, true, func(ctx context.Context) (bool, error) {
		csr, err := w.client.CertificatesV1().CertificateSigningRequests().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for i := range csr.Status.Conditions {
			cond = &csr.Status.Conditions[i]
			return true, nil
		}
		return false, nil
	})
	return cond
}

const vmA, vmB = "vsphere://4207a7f4-0000-0000-0000-00000000000a", "vsphere://4207a7f4-0000-0000-0000-00000000000b"

func guests() map[string]*Guest {
	return map[string]*Guest{
		vmA: {VM: "vc1/dc/vm-a", IPs: []netip.Addr{netip.MustParseAddr("10.0.0.10"), netip.MustParseAddr("192.168.5.10"), netip.MustParseAddr("fd00::a")}, HostName: "vm-a.corp.example"},
		vmB: {VM: "vc1/dc/vm-b", IPs: []netip.Addr{netip.MustParseAddr("10.0.0.11")}, HostName: "vm-b"},
	}
}

// Every check, each with a request that passes all the others: approved
// only when everything the kubelet asks for is its VM's.
func TestApproverDecidesEachCheck(t *testing.T) {
	vms := &fakeVMs{guests: guests()}
	w := startApprover(t, vms, Options{}, node("a", vmA, true), node("b", vmB, true), node("c", "kind://c", true))
	serving := []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageKeyEncipherment, certificatesv1.UsageServerAuth}
	for _, tc := range []struct {
		name   string
		csr    *certificatesv1.CertificateSigningRequest
		reason string
		says   string // in the message
	}{
		{"the kubelet's own request", kubeletCSR(t, "a", "system:node:a", []string{"a", "vm-a.corp.example"}, []string{"10.0.0.10", "192.168.5.10", "fd00::a"}), ReasonApproved, ""},
		{"RSA-style usages, host name with a dot", kubeletCSR(t, "a", "system:node:a", []string{"VM-A.corp.example."}, []string{"10.0.0.10"}, serving...), ReasonApproved, ""},
		{"another VM's IP", kubeletCSR(t, "a", "system:node:a", []string{"a"}, []string{"10.0.0.10", "10.0.0.11"}), ReasonIPSAN, "10.0.0.11"},
		{"an IP the VM had an hour ago", kubeletCSR(t, "a", "system:node:a", []string{"a"}, []string{"10.0.0.99"}), ReasonIPSAN, "10.0.0.99"},
		{"a wildcard", kubeletCSR(t, "a", "system:node:a", []string{"*.corp.example"}, []string{"10.0.0.10"}), ReasonDNSSAN, "*.corp.example"},
		{"another Node's name", kubeletCSR(t, "a", "system:node:a", []string{"b"}, nil), ReasonDNSSAN, `"b"`},
		{"another Node's identity", kubeletCSR(t, "a", "system:node:b", []string{"a"}, []string{"10.0.0.10"}), ReasonSubject, "system:node:b"},
		{"not a Node", kubeletCSR(t, "a", "system:serviceaccount:default:x", []string{"a"}, []string{"10.0.0.10"}), ReasonRequester, "serviceaccount"},
		{"client auth asked", kubeletCSR(t, "a", "system:node:a", []string{"a"}, nil, certificatesv1.UsageDigitalSignature, certificatesv1.UsageServerAuth, certificatesv1.UsageClientAuth), ReasonUsages, "client auth"},
		{"no server auth", kubeletCSR(t, "a", "system:node:a", []string{"a"}, nil, certificatesv1.UsageDigitalSignature), ReasonUsages, "server auth"},
		{"no names", kubeletCSR(t, "a", "system:node:a", nil, nil), ReasonNoSANs, ""},
		{"not a vSphere Node", kubeletCSR(t, "c", "system:node:c", []string{"c"}, nil), ReasonNoVM, "kind://c"},
	} {
		name := w.submit(tc.csr)
		cond := w.decision(name, 5*time.Second)
		if cond == nil {
			t.Fatalf("%s: no decision within 5 s", tc.name)
		}
		wantType := certificatesv1.CertificateDenied
		if tc.reason == ReasonApproved {
			wantType = certificatesv1.CertificateApproved
		}
		if cond.Type != wantType || cond.Reason != tc.reason || !strings.Contains(cond.Message, tc.says) {
			t.Errorf("%s: %s %s %q; want %s %s naming %q", tc.name, cond.Type, cond.Reason, cond.Message, wantType, tc.reason, tc.says)
		}
	}
	if n, _ := testutil.GetCounterMetricValue(w.metrics.decisions.WithLabelValues("approved", ReasonApproved)); n != 2 {
		t.Errorf("approved counted %v; want 2", n)
	}
	if n, _ := testutil.GetCounterMetricValue(w.metrics.decisions.WithLabelValues("denied", ReasonIPSAN)); n != 2 {
		t.Errorf("denied for an IP counted %v; want 2", n)
	}
}

// A vCenter that cannot answer leaves the request pending, with an Event,
// and it is decided once the vCenter answers; a VM every vCenter says is
// not there, or another Node holds, is denied.
func TestApproverWaitsForVCenter(t *testing.T) {
	vms := &fakeVMs{guests: guests(), err: errors.New("vcenter vc1: still connecting")}
	w := startApprover(t, vms, Options{}, node("a", vmA, true), node("gone", "vsphere://4207a7f4-0000-0000-0000-0000000000ff", true))
	name := w.submit(kubeletCSR(t, "a", "system:node:a", []string{"a"}, []string{"10.0.0.10"}))
	if cond := w.decision(name, 500*time.Millisecond); cond != nil {
		t.Fatalf("decided %s %s while the vCenter cannot answer; want pending", cond.Type, cond.Reason)
	}
	select {
	case e := <-w.recorder.Events:
		if !strings.Contains(e, ReasonVCenterUnavailable) || !strings.Contains(e, "still connecting") {
			t.Fatalf("event %q; want %s naming the lookup's error", e, ReasonVCenterUnavailable)
		}
	default:
		t.Fatal("no Event for a request left pending")
	}
	vms.set(nil)
	if cond := w.decision(name, 10*time.Second); cond == nil || cond.Type != certificatesv1.CertificateApproved {
		t.Fatalf("after the vCenter answered: %+v; want approved", cond)
	}
	gone := w.submit(kubeletCSR(t, "gone", "system:node:gone", []string{"gone"}, nil))
	if cond := w.decision(gone, 5*time.Second); cond == nil || cond.Reason != ReasonNoVM {
		t.Fatalf("a VM in no vCenter: %+v; want denied %s", cond, ReasonNoVM)
	}
	vms.set(fmt.Errorf("cloud.Guest: %w: node a claims the VM node z holds", ErrHeldByAnotherNode))
	held := w.submit(kubeletCSR(t, "a", "system:node:a", []string{"a"}, nil))
	if cond := w.decision(held, 5*time.Second); cond == nil || cond.Reason != ReasonIdentity || !strings.Contains(cond.Message, "node z holds") {
		t.Fatalf("a VM another Node holds: %+v; want denied %s naming it", cond, ReasonIdentity)
	}
}

// A request waits for its Node: registered later, then initialized; one
// whose Node never comes is denied after the grace.
func TestApproverWaitsForTheNode(t *testing.T) {
	vms := &fakeVMs{guests: guests()}
	w := startApprover(t, vms, Options{NodeGrace: 1500 * time.Millisecond, Recheck: 100 * time.Millisecond})
	name := w.submit(kubeletCSR(t, "a", "system:node:a", []string{"a"}, []string{"10.0.0.10"}))
	if cond := w.decision(name, 300*time.Millisecond); cond != nil {
		t.Fatalf("decided %s before the Node exists; want pending", cond.Reason)
	}
	n, err := w.client.CoreV1().Nodes().Create(t.Context(), node("a", "", false), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if cond := w.decision(name, 700*time.Millisecond); cond != nil {
		t.Fatalf("decided %s while the Node is uninitialized; want pending", cond.Reason)
	}
	if n := vms.lookups(); n != 0 {
		t.Fatalf("vCenter asked %d times about an uninitialized Node", n)
	}
	n.Spec.Taints, n.Spec.ProviderID = nil, vmA
	if _, err := w.client.CoreV1().Nodes().Update(t.Context(), n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if cond := w.decision(name, 15*time.Second); cond == nil || cond.Type != certificatesv1.CertificateApproved {
		t.Fatalf("after initialization: %+v; want approved", cond)
	}
	never := w.submit(kubeletCSR(t, "never", "system:node:never", []string{"never"}, nil))
	if cond := w.decision(never, 10*time.Second); cond == nil || cond.Reason != ReasonNoNode {
		t.Fatalf("a Node that never registers: %+v; want denied %s after the grace", cond, ReasonNoNode)
	}
}

// A request decided by anyone is not decided again.
func TestApproverDecidesOnce(t *testing.T) {
	vms := &fakeVMs{guests: guests()}
	w := startApprover(t, vms, Options{}, node("a", vmA, true))
	csr := kubeletCSR(t, "a", "system:node:a", []string{"a"}, []string{"10.0.0.10"})
	csr.Status.Conditions = []certificatesv1.CertificateSigningRequestCondition{{Type: certificatesv1.CertificateDenied, Status: v1.ConditionTrue, Reason: "ByHand"}}
	name := w.submit(csr)
	time.Sleep(300 * time.Millisecond)
	got, err := w.client.CertificatesV1().CertificateSigningRequests().Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Status.Conditions) != 1 || vms.lookups() != 0 {
		t.Fatalf("conditions %+v, vCenter asked %d times; want the operator's denial alone", got.Status.Conditions, vms.lookups())
	}
}
