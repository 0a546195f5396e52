package check

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vmware/govmomi/vapi/rest"
	"github.com/vmware/govmomi/vapi/tags"
	"github.com/vmware/govmomi/vim25/soap"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/backends/vsphere"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config/credentials"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/test/vcsim"
)

// target is a vCenter as validate is given it: its config and its login.
type target struct {
	cfg   config.VCenter
	creds credentials.Source
}

// targetVia is vc reached through host:port, its certificate not verified.
func targetVia(vc *vcsim.VCenter, host string, port int) target {
	return target{
		cfg:   config.VCenter{Name: vc.Name, Server: host, Port: port, InsecureFlag: true, RoundTripCount: 1, RequestTimeout: 5 * time.Second}.WithDefaults(),
		creds: credentials.Static{User: vc.User, Password: config.Password(vc.Password)},
	}
}

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// validateVia checks tg as the validate command does, with a backend of
// its own, under timeout.
func validateVia(t *testing.T, tg target, categories []string, timeout time.Duration) ([]Result, time.Duration) {
	t.Helper()
	b := vsphere.New(vsphere.Options{Config: tg.cfg, Credentials: tg.creds})
	t.Cleanup(func() { _ = b.Close(context.Background()) })
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	start := time.Now()
	results := VCenter(ctx, tg.cfg, b, categories)
	return results, time.Since(start)
}

// verdicts renders results as "name=verdict" in order, for comparison.
func verdicts(results []Result) []string {
	out := make([]string, len(results))
	for i, c := range results {
		out[i] = c.Name + "=" + string(c.Verdict)
	}
	return out
}

func detailOf(results []Result, name string) string {
	for _, c := range results {
		if c.Name == name {
			return c.Detail
		}
	}
	return ""
}

func expectVerdicts(t *testing.T, results []Result, want ...string) {
	t.Helper()
	if got := verdicts(results); !slices.Equal(got, want) {
		var lines []string
		for _, c := range results {
			lines = append(lines, fmt.Sprintf("  %s %s: %s", c.Name, c.Verdict, c.Detail))
		}
		t.Fatalf("verdicts %v\nwant     %v\n%s", got, want, strings.Join(lines, "\n"))
	}
}

var withLabels = []string{"k8s-zone", "k8s-region"}

// One row per check, each with its reason; the simulator's vCenter (its
// tags, its Admin-privileged user) passes them all, and no password
// appears anywhere.
func TestValidatePasses(t *testing.T) {
	vc, p := vcsim.StartProxied(t, vcsim.Options{Datacenters: 2})
	tg := targetVia(vc, p.Host(), p.Port())
	tg.cfg.Datacenters = []string{vc.VMs[0].Datacenter}
	results, _ := validateVia(t, tg, withLabels, 30*time.Second)
	expectVerdicts(t, results, "tcp=pass", "tls=pass", "login=pass", "datacenters=pass", "tag categories=pass", "privileges=pass", "vms=pass", "latency=pass")
	for _, c := range results {
		if strings.Contains(c.Detail, vc.Password) {
			t.Fatalf("%s: the password is in %q", c.Name, c.Detail)
		}
	}
	if d := detailOf(results, Login); !strings.Contains(d, vc.User) || !strings.Contains(d, "config file") {
		t.Errorf("login detail %q: want the user and where its credentials came from", d)
	}
	if d := detailOf(results, TLS); !strings.Contains(d, "NOT verified") {
		t.Errorf("tls detail %q: insecureFlag must be called out", d)
	}
}

func TestValidateWrongPassword(t *testing.T) {
	vc, p := vcsim.StartProxied(t, vcsim.Options{Datacenters: 1})
	tg := targetVia(vc, p.Host(), p.Port())
	const wrong = "Wr0ng-validate-pw"
	tg.creds = credentials.Static{User: vc.User, Password: config.Password(wrong)}
	results, _ := validateVia(t, tg, withLabels, 30*time.Second)
	expectVerdicts(t, results, "tcp=pass", "tls=pass", "login=fail", "datacenters=skip", "tag categories=skip", "privileges=skip", "vms=skip", "latency=skip")
	if d := detailOf(results, Login); strings.Contains(d, wrong) || !strings.Contains(d, "login as") {
		t.Fatalf("login detail %q: want the refusal, never the password", d)
	}
}

func TestValidateMissingDatacenterSuggestsNearest(t *testing.T) {
	vc, p := vcsim.StartProxied(t, vcsim.Options{Datacenters: 2})
	tg := targetVia(vc, p.Host(), p.Port())
	typo := strings.ToLower(vc.VMs[0].Datacenter) + "x"
	tg.cfg.Datacenters = []string{typo}
	results, _ := validateVia(t, tg, withLabels, 30*time.Second)
	if v := verdicts(results)[3]; v != "datacenters=fail" {
		t.Fatalf("%v", verdicts(results))
	}
	if d := detailOf(results, Datacenters); !strings.Contains(d, fmt.Sprintf("%q not found; nearest: %q", typo, vc.VMs[0].Datacenter)) {
		t.Fatalf("datacenters detail %q: want the typo and the nearest name", d)
	}
}

func TestValidateTagCategories(t *testing.T) {
	vc, p := vcsim.StartProxied(t, vcsim.Options{Datacenters: 1})
	tg := targetVia(vc, p.Host(), p.Port())
	t.Run("missing", func(t *testing.T) {
		results, _ := validateVia(t, tg, []string{"k8s-zones", "k8s-region"}, 30*time.Second)
		if d := detailOf(results, Tags); verdicts(results)[4] != "tag categories=fail" || !strings.Contains(d, `category "k8s-zones" not found; nearest: "k8s-zone"`) {
			t.Fatalf("%v: %q", verdicts(results), d)
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
		results, _ := validateVia(t, tg, []string{"unused-zones"}, 30*time.Second)
		if d := detailOf(results, Tags); verdicts(results)[4] != "tag categories=fail" || !strings.Contains(d, "attached to nothing") {
			t.Fatalf("%v: %q", verdicts(results), d)
		}
	})
	t.Run("labels not configured", func(t *testing.T) {
		results, _ := validateVia(t, tg, nil, 30*time.Second)
		if verdicts(results)[4] != "tag categories=skip" {
			t.Fatalf("%v", verdicts(results))
		}
	})
}

// A wrong thumbprint fails TLS and shows what the server presents, so the
// operator can pin it; the right one passes.
func TestValidateThumbprint(t *testing.T) {
	vc, p := vcsim.StartProxied(t, vcsim.Options{Datacenters: 1})
	right := soap.ThumbprintSHA1(vc.Server.Certificate())
	tg := targetVia(vc, p.Host(), p.Port())
	tg.cfg.InsecureFlag = false
	tg.cfg.Thumbprints = []string{strings.Repeat("AB:", 19) + "AB"}
	results, _ := validateVia(t, tg, withLabels, 30*time.Second)
	expectVerdicts(t, results, "tcp=pass", "tls=fail", "login=skip", "datacenters=skip", "tag categories=skip", "privileges=skip", "vms=skip", "latency=skip")
	if d := detailOf(results, TLS); !strings.Contains(d, "SHA-1 thumbprint "+right) || !strings.Contains(d, "SHA-256 ") {
		t.Fatalf("tls detail %q: want the server's thumbprints (SHA-1 %s)", d, right)
	}
	tg.cfg.Thumbprints = []string{right}
	results, _ = validateVia(t, tg, withLabels, 30*time.Second)
	if v := verdicts(results); v[1] != "tls=pass" || v[2] != "login=pass" {
		t.Fatalf("with the server's thumbprint: %v: %s", v, detailOf(results, TLS))
	}
}

// An unreachable vCenter fails fast when it refuses, and within the
// deadline when it never answers.
func TestValidateUnreachable(t *testing.T) {
	vc, p := vcsim.StartProxied(t, vcsim.Options{Datacenters: 1})
	tg := targetVia(vc, p.Host(), p.Port())
	if err := p.SetMode(vcsim.Refuse); err != nil {
		t.Fatal(err)
	}
	results, _ := validateVia(t, tg, withLabels, 30*time.Second)
	expectVerdicts(t, results, "tcp=fail", "tls=skip", "login=skip", "datacenters=skip", "tag categories=skip", "privileges=skip", "vms=skip", "latency=skip")
	if err := p.SetMode(vcsim.Blackhole); err != nil {
		t.Fatal(err)
	}
	const deadline = 2 * time.Second
	results, took := validateVia(t, tg, withLabels, deadline)
	if v := verdicts(results); v[0] != "tcp=pass" || v[1] != "tls=fail" {
		t.Fatalf("black-holed: %v: %s", v, detailOf(results, TLS))
	}
	if took > 3*deadline {
		t.Fatalf("black-holed: validate took %s under a %s deadline", took, deadline)
	}
}

func TestValidateMissingPrivilege(t *testing.T) {
	vc, p := vcsim.StartProxied(t, vcsim.Options{Datacenters: 2})
	vc.LimitPrivileges([]string{"System.Anonymous", "System.View"})
	results, _ := validateVia(t, targetVia(vc, p.Host(), p.Port()), withLabels, 30*time.Second)
	d := detailOf(results, Privileges)
	if verdicts(results)[5] != "privileges=fail" || !strings.Contains(d, "lacks System.Read on datacenter "+vc.VMs[0].Datacenter) {
		t.Fatalf("%v: %q", verdicts(results), d)
	}
}

// With verification on and neither a thumbprint nor a caFile, the
// simulator's self-signed certificate is not trusted: TLS fails with the
// session's own reason and shows what the server presents.
func TestValidateUntrustedCertificate(t *testing.T) {
	vc, p := vcsim.StartProxied(t, vcsim.Options{Datacenters: 1})
	tg := targetVia(vc, p.Host(), p.Port())
	tg.cfg.InsecureFlag = false
	results, _ := validateVia(t, tg, withLabels, 30*time.Second)
	expectVerdicts(t, results, "tcp=pass", "tls=fail", "login=skip", "datacenters=skip", "tag categories=skip", "privileges=skip", "vms=skip", "latency=skip")
	d := detailOf(results, TLS)
	thumbprint := soap.ThumbprintSHA1(vc.Server.Certificate())
	if !strings.Contains(d, "SHA-1 thumbprint "+thumbprint) || !strings.Contains(d, "certificate") {
		t.Fatalf("tls detail %q: want the verification failure and the server's thumbprint", d)
	}
}
