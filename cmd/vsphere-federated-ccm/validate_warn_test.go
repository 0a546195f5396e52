package main

import (
	"regexp"
	"strings"
	"testing"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/cmd/vsphere-federated-ccm/check"
)

// A warning (a certificate near its expiry) shows as "!" and does not fail
// the run.
func TestValidateTableShowsWarnings(t *testing.T) {
	rep := validateReport{Config: configReport{Verdict: check.Passed, Detail: "1 vCenter(s)"}, Passed: true,
		VCenters: []vcenterReport{{Name: "vc1", Checks: []check.Result{
			{Name: check.TLS, Verdict: check.Warned, Detail: "certificate NOT verified (insecureFlag: true); the certificate expires on 2026-12-01T00:00:00Z, in 7 days: plan its replacement"},
		}}}}
	var out strings.Builder
	rep.write(&out)
	if !regexp.MustCompile(`vc1 +tls +! +certificate NOT verified`).MatchString(out.String()) || !strings.HasSuffix(out.String(), "PASS\n") {
		t.Fatalf("table:\n%s", out.String())
	}
}
