package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/test/harness"
)

// A vCenter without an inventory and a small request budget (5 a second,
// burst 5: each Node's initialization takes a few requests, and the
// address updates of the Nodes initialized take 1.5 a second here):
// ten Nodes registering at once all initialize, their lookups paced
// (waits and refusals counted in /metrics), the breaker stays closed and
// no Node is deleted; /vcenters shows the budget and the certificate the
// vCenter serves.
func TestRequestBudgetPacesLookups(t *testing.T) {
	t.Parallel()
	env := newEnv(t, harness.Options{VCenters: 1, Datacenters: 1, MachinesPerPool: 5})
	vms := env.Fed.AllVMs()
	if len(vms) < 10 {
		t.Fatalf("fixture: %d VMs, want 10", len(vms))
	}
	vms = vms[:10]
	writeConfig(t, env, strings.ReplaceAll(env.CloudConfigYAML, "    insecureFlag: true\n",
		"    insecureFlag: true\n    inventory: false\n    requestsPerSecond: 5\n    requestBurst: 5\n"))
	port, err := harness.FreePort("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	deletions := watchDeletions(t, env)
	ccm := startCCM(t, env, "ccm", harness.CCMOptions{Flags: map[string]string{"vcenters-port": strconv.Itoa(port)}})
	createNodes(t, env, vms)
	waitInitialized(t, env, names(vms), 3*time.Minute)

	const (
		waits      = "cloudprovider_vsphere_vcenter_request_budget_waits_total"
		rejections = "cloudprovider_vsphere_vcenter_request_budget_rejections_total"
		expiry     = "cloudprovider_vsphere_vcenter_certificate_expiry_seconds"
		breaker    = "cloudprovider_vsphere_breaker_state"
	)
	ss, body, err := ccm.Scrape(t.Context(), metricsReaderToken(t, env))
	if err != nil {
		t.Fatal(err)
	}
	w, _ := ss.Sum(waits, "vcenter", "vc1")
	r, _ := ss.Sum(rejections, "vcenter", "vc1")
	if w+r == 0 {
		t.Errorf("%s + %s = 0 after ten Nodes at 5 requests a second:\n%s", waits, rejections, ours(body))
	}
	if v, ok := ss.Sum(breaker, "vcenter", "vc1"); !ok || v != 0 {
		t.Errorf("%s{vc1} = %v (present %v), want 0: budget refusals are no failures", breaker, v, ok)
	}
	cert := env.Fed.VCenter("vc1").Server.Certificate()
	if v, ok := ss.Sum(expiry, "vcenter", "vc1"); !ok || v != float64(cert.NotAfter.Unix()) {
		t.Errorf("%s{vc1} = %v (present %v), want %d", expiry, v, ok, cert.NotAfter.Unix())
	}
	t.Logf("ten Nodes initialized: %v waits, %v refusals", w, r)

	type status struct {
		Name   string
		Budget *struct {
			RequestsPerSecond float64
			RequestBurst      int
			Waits, Rejections uint64
		}
		Certificate *struct {
			NotAfter         time.Time
			ExpiresInSeconds float64
			SHA256Thumbprint string
		}
	}
	reader := readerToken(t, env, "vcenters-reader", "/vcenters")
	var got struct{ VCenters []status }
	if err := wait.PollUntilContextTimeout(t.Context(), 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		code, b, err := harness.GetLocalHTTPS(ctx, port, "/vcenters", reader)
		if err != nil || code != http.StatusOK {
			return false, nil
		}
		body = b
		return true, json.Unmarshal([]byte(b), &got)
	}); err != nil {
		t.Fatalf("/vcenters: %v\n%s", err, body)
	}
	if len(got.VCenters) != 1 {
		t.Fatalf("/vcenters: %s", body)
	}
	st := got.VCenters[0]
	if st.Budget == nil || st.Budget.RequestsPerSecond != 5 || st.Budget.RequestBurst != 5 || st.Budget.Waits+st.Budget.Rejections == 0 {
		t.Errorf("/vcenters budget: %+v; want 5/s, burst 5, some waits or refusals\n%s", st.Budget, body)
	}
	if st.Certificate == nil || !st.Certificate.NotAfter.Equal(cert.NotAfter) || st.Certificate.ExpiresInSeconds <= 0 || st.Certificate.SHA256Thumbprint == "" {
		t.Errorf("/vcenters certificate: %+v; want NotAfter %s\n%s", st.Certificate, cert.NotAfter, body)
	}
	if d := deletions.Deleted(nil); len(d) > 0 {
		t.Errorf("Nodes deleted: %v", d)
	}
}

// ours are the provider's lines of a /metrics body.
func ours(body string) string {
	var out []string
	for line := range strings.Lines(body) {
		if strings.HasPrefix(line, "cloudprovider_vsphere_") {
			out = append(out, strings.TrimSpace(line))
		}
	}
	return strings.Join(out, "\n")
}
