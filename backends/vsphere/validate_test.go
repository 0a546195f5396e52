package vsphere

import (
	"context"
	"crypto/sha1"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vmware/govmomi/vapi/rest"
	"github.com/vmware/govmomi/vapi/tags"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config/credentials"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/test/vcsim"
)

// verdicts renders checks as "name=verdict" in order, for comparison.
func verdicts(checks []Check) []string {
	out := make([]string, len(checks))
	for i, c := range checks {
		out[i] = c.Name + "=" + string(c.Verdict)
	}
	return out
}

func detailOf(checks []Check, name string) string {
	for _, c := range checks {
		if c.Name == name {
			return c.Detail
		}
	}
	return ""
}

func validateVia(t *testing.T, o Options, req ValidateRequest, timeout time.Duration) ([]Check, time.Duration) {
	t.Helper()
	b := New(o)
	b.Start()
	t.Cleanup(func() { _ = b.Close(context.Background()) })
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	start := time.Now()
	checks := b.Validate(ctx, req)
	return checks, time.Since(start)
}

func expectVerdicts(t *testing.T, checks []Check, want ...string) {
	t.Helper()
	if got := verdicts(checks); !slices.Equal(got, want) {
		var lines []string
		for _, c := range checks {
			lines = append(lines, fmt.Sprintf("  %s %s: %s", c.Name, c.Verdict, c.Detail))
		}
		t.Fatalf("verdicts %v\nwant     %v\n%s", got, want, strings.Join(lines, "\n"))
	}
}

var withLabels = ValidateRequest{Categories: zoneRegion}

// One row per check, each with its reason; the simulator's vCenter (its
// tags, its Admin-privileged user) passes them all, and no password
// appears anywhere.
func TestValidatePasses(t *testing.T) {
	vc, p := proxiedVCenter(t, vcsim.Options{Datacenters: 2})
	o := optionsVia(vc, p.Host(), p.Port(), 5*time.Second)
	o.Config.Datacenters = []string{vc.VMs[0].Datacenter}
	checks, _ := validateVia(t, o, withLabels, 30*time.Second)
	expectVerdicts(t, checks, "tcp=pass", "tls=pass", "login=pass", "datacenters=pass", "tag categories=pass", "privileges=pass", "vms=pass", "latency=pass")
	for _, c := range checks {
		if strings.Contains(c.Detail, vc.Password) {
			t.Fatalf("%s: the password is in %q", c.Name, c.Detail)
		}
	}
	if d := detailOf(checks, CheckLogin); !strings.Contains(d, vc.User) || !strings.Contains(d, "config file") {
		t.Errorf("login detail %q: want the user and where its credentials came from", d)
	}
	if d := detailOf(checks, CheckTLS); !strings.Contains(d, "NOT verified") {
		t.Errorf("tls detail %q: insecureFlag must be called out", d)
	}
}

func TestValidateWrongPassword(t *testing.T) {
	vc, p := proxiedVCenter(t, vcsim.Options{Datacenters: 1})
	o := optionsVia(vc, p.Host(), p.Port(), 5*time.Second)
	const wrong = "Wr0ng-validate-pw"
	o.Credentials = credentials.Static{User: vc.User, Password: config.Password(wrong)}
	checks, _ := validateVia(t, o, withLabels, 30*time.Second)
	expectVerdicts(t, checks, "tcp=pass", "tls=pass", "login=fail", "datacenters=skip", "tag categories=skip", "privileges=skip", "vms=skip", "latency=skip")
	if d := detailOf(checks, CheckLogin); strings.Contains(d, wrong) || !strings.Contains(d, "login as") {
		t.Fatalf("login detail %q: want the refusal, never the password", d)
	}
}

func TestValidateMissingDatacenterSuggestsNearest(t *testing.T) {
	vc, p := proxiedVCenter(t, vcsim.Options{Datacenters: 2})
	o := optionsVia(vc, p.Host(), p.Port(), 5*time.Second)
	typo := strings.ToLower(vc.VMs[0].Datacenter) + "x"
	o.Config.Datacenters = []string{typo}
	checks, _ := validateVia(t, o, withLabels, 30*time.Second)
	if v := verdicts(checks)[3]; v != "datacenters=fail" {
		t.Fatalf("%v", verdicts(checks))
	}
	if d := detailOf(checks, CheckDatacenters); !strings.Contains(d, fmt.Sprintf("%q not found; nearest: %q", typo, vc.VMs[0].Datacenter)) {
		t.Fatalf("datacenters detail %q: want the typo and the nearest name", d)
	}
}

func TestValidateTagCategories(t *testing.T) {
	vc, p := proxiedVCenter(t, vcsim.Options{Datacenters: 1})
	o := optionsVia(vc, p.Host(), p.Port(), 5*time.Second)
	t.Run("missing", func(t *testing.T) {
		checks, _ := validateVia(t, o, ValidateRequest{Categories: []string{"k8s-zones", "k8s-region"}}, 30*time.Second)
		if d := detailOf(checks, CheckTags); verdicts(checks)[4] != "tag categories=fail" || !strings.Contains(d, `category "k8s-zones" not found; nearest: "k8s-zone"`) {
			t.Fatalf("%v: %q", verdicts(checks), d)
		}
	})
	t.Run("attached to nothing", func(t *testing.T) {
		ctx := ctxFor(t)
		c, err := vc.Client(ctx)
		if err != nil {
			t.Fatal(err)
		}
		rc := rest.NewClient(c.Client)
		if err := rc.Login(ctx, url.UserPassword(vc.User, vc.Password)); err != nil {
			t.Fatal(err)
		}
		tm := tags.NewManager(rc)
		cat, err := tm.CreateCategory(ctx, &tags.Category{Name: "unused-zones", Cardinality: "SINGLE"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tm.CreateTag(ctx, &tags.Tag{Name: "nowhere", CategoryID: cat}); err != nil {
			t.Fatal(err)
		}
		checks, _ := validateVia(t, o, ValidateRequest{Categories: []string{"unused-zones"}}, 30*time.Second)
		if d := detailOf(checks, CheckTags); verdicts(checks)[4] != "tag categories=fail" || !strings.Contains(d, "attached to nothing") {
			t.Fatalf("%v: %q", verdicts(checks), d)
		}
	})
	t.Run("labels not configured", func(t *testing.T) {
		checks, _ := validateVia(t, o, ValidateRequest{}, 30*time.Second)
		if verdicts(checks)[4] != "tag categories=skip" {
			t.Fatalf("%v", verdicts(checks))
		}
	})
}

// A wrong thumbprint fails TLS and shows what the server presents, so the
// operator can pin it; the right one passes.
func TestValidateThumbprint(t *testing.T) {
	vc, p := proxiedVCenter(t, vcsim.Options{Datacenters: 1})
	cert := vc.Server.Certificate()
	sum := sha1.Sum(cert.Raw)
	right := colonHex(sum[:])
	o := optionsVia(vc, p.Host(), p.Port(), 5*time.Second)
	o.Config.InsecureFlag = false
	o.Config.Thumbprints = []string{strings.Repeat("AB:", 19) + "AB"}
	checks, _ := validateVia(t, o, withLabels, 30*time.Second)
	expectVerdicts(t, checks, "tcp=pass", "tls=fail", "login=skip", "datacenters=skip", "tag categories=skip", "privileges=skip", "vms=skip", "latency=skip")
	if d := detailOf(checks, CheckTLS); !strings.Contains(d, "SHA-1 thumbprint "+right) || !strings.Contains(d, "SHA-256 ") {
		t.Fatalf("tls detail %q: want the server's thumbprints (SHA-1 %s)", d, right)
	}
	o.Config.Thumbprints = []string{right}
	checks, _ = validateVia(t, o, withLabels, 30*time.Second)
	if v := verdicts(checks); v[1] != "tls=pass" || v[2] != "login=pass" {
		t.Fatalf("with the server's thumbprint: %v: %s", v, detailOf(checks, CheckTLS))
	}
}

// An unreachable vCenter fails fast when it refuses, and within the
// deadline when it never answers.
func TestValidateUnreachable(t *testing.T) {
	vc, p := proxiedVCenter(t, vcsim.Options{Datacenters: 1})
	o := optionsVia(vc, p.Host(), p.Port(), 5*time.Second)
	if err := p.SetMode(vcsim.Refuse); err != nil {
		t.Fatal(err)
	}
	checks, _ := validateVia(t, o, withLabels, 30*time.Second)
	expectVerdicts(t, checks, "tcp=fail", "tls=skip", "login=skip", "datacenters=skip", "tag categories=skip", "privileges=skip", "vms=skip", "latency=skip")
	if err := p.SetMode(vcsim.Blackhole); err != nil {
		t.Fatal(err)
	}
	const deadline = 2 * time.Second
	checks, took := validateVia(t, o, withLabels, deadline)
	if v := verdicts(checks); v[0] != "tcp=pass" || v[1] != "tls=fail" {
		t.Fatalf("black-holed: %v: %s", v, detailOf(checks, CheckTLS))
	}
	if took > 3*deadline {
		t.Fatalf("black-holed: Validate took %s under a %s deadline", took, deadline)
	}
}

func TestValidateMissingPrivilege(t *testing.T) {
	vc, p := proxiedVCenter(t, vcsim.Options{Datacenters: 2})
	vc.LimitPrivileges([]string{"System.Anonymous", "System.View"})
	o := optionsVia(vc, p.Host(), p.Port(), 5*time.Second)
	checks, _ := validateVia(t, o, withLabels, 30*time.Second)
	d := detailOf(checks, CheckPrivileges)
	if verdicts(checks)[5] != "privileges=fail" || !strings.Contains(d, "lacks System.Read on datacenter "+vc.VMs[0].Datacenter) {
		t.Fatalf("%v: %q", verdicts(checks), d)
	}
}

// With verification on and neither a thumbprint nor a caFile, the
// simulator's self-signed certificate is not trusted: TLS fails with the
// session's own reason and shows what the server presents.
func TestValidateUntrustedCertificate(t *testing.T) {
	vc, p := proxiedVCenter(t, vcsim.Options{Datacenters: 1})
	o := optionsVia(vc, p.Host(), p.Port(), 5*time.Second)
	o.Config.InsecureFlag = false
	checks, _ := validateVia(t, o, withLabels, 30*time.Second)
	expectVerdicts(t, checks, "tcp=pass", "tls=fail", "login=skip", "datacenters=skip", "tag categories=skip", "privileges=skip", "vms=skip", "latency=skip")
	d := detailOf(checks, CheckTLS)
	sum := sha1.Sum(vc.Server.Certificate().Raw)
	if !strings.Contains(d, "SHA-1 thumbprint "+colonHex(sum[:])) || !strings.Contains(d, "certificate") {
		t.Fatalf("tls detail %q: want the verification failure and the server's thumbprint", d)
	}
}
