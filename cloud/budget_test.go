package cloud_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/cloud"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/test/vcsim"
)

// Each vCenter's request budget and certificate show in its status and
// its metrics; a config edit of the budget applies to the running backend
// (its counts kept: it is not rebuilt).
func TestVCenterBudgetAndCertificate(t *testing.T) {
	fed, err := vcsim.Start(vcsim.Options{VCenters: 1, Datacenters: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fed.Close)
	vc := fed.VCenter("vc1")
	budget := func(perSecond, burst string) string {
		return strings.Replace(fileConfig(fed, []string{"vc1"}, nil), "  requestTimeout: 2s\n",
			"  requestTimeout: 2s\n  inventory: false\n  requestsPerSecond: "+perSecond+"\n  requestBurst: "+burst+"\n", 1)
	}
	path := filepath.Join(t.TempDir(), "vsphere.conf")
	// A token every 2s, one in the bucket: the warm-up's lookups, each
	// under a 2s deadline, are soon refused.
	writeAtomically(t, path, budget("0.5", "1"))
	c, reg := startFromFileRegistered(t, path)
	status := func() cloud.VCenterStatus { return c.VCenterStatuses()[0] }
	node := kubeletNode(vc.VMs[0].Name, vc.VMs[0].SystemUUID())
	eventually(t, "a lookup refused by the budget", func() bool {
		_, _ = c.InstanceExists(t.Context(), node)
		st := status()
		return st.Budget != nil && st.Budget.Rejections > 0
	})
	st := status()
	if st.Budget.RequestsPerSecond != 0.5 || st.Budget.RequestBurst != 1 {
		t.Fatalf("budget %+v; want 0.5/s, burst 1", st.Budget)
	}
	if st.Breaker != "closed" {
		t.Fatalf("breaker %q after budget refusals; want closed", st.Breaker)
	}
	if n, ok := vcenterMetric(t, reg, "cloudprovider_vsphere_vcenter_request_budget_rejections_total", "vc1", true); !ok || n < 1 {
		t.Fatalf("rejections_total{vc1} = %v, %v; status shows %d", n, ok, st.Budget.Rejections)
	}
	if _, ok := vcenterMetric(t, reg, "cloudprovider_vsphere_vcenter_request_budget_waits_total", "vc1", true); !ok {
		t.Fatal("no waits_total{vc1}")
	}

	// The certificate vcsim serves.
	cert := vc.Server.Certificate()
	if st.Certificate == nil || !st.Certificate.NotAfter.Equal(cert.NotAfter) || st.Certificate.ExpiresInSeconds <= 0 || st.Certificate.Subject != cert.Subject.String() {
		t.Fatalf("certificate %+v; want NotAfter %s", st.Certificate, cert.NotAfter)
	}
	if n, ok := vcenterMetric(t, reg, "cloudprovider_vsphere_vcenter_certificate_expiry_seconds", "vc1", false); !ok || n != float64(cert.NotAfter.Unix()) {
		t.Fatalf("certificate_expiry_seconds{vc1} = %v, %v; want %d", n, ok, cert.NotAfter.Unix())
	}

	refused := st.Budget.Rejections
	writeAtomically(t, path, budget("50", "20"))
	eventually(t, "the edited budget to apply", func() bool {
		b := status().Budget
		return b != nil && b.RequestsPerSecond == 50 && b.RequestBurst == 20
	})
	if b := status().Budget; b.Rejections < refused {
		t.Fatalf("rejections %d after the edit, %d before: the backend was rebuilt", b.Rejections, refused)
	}
	if ok, err := c.InstanceExists(t.Context(), node); !ok || err != nil {
		t.Fatalf("InstanceExists under the edited budget = %v, %v", ok, err)
	}
}
