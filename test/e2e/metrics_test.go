package e2e

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/test/harness"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/test/vcsim"
)

// The provider's metrics, scraped from the CCM's /metrics as a Prometheus
// with a token allowed to read it would: request durations per vCenter and
// operation, errors by reason, breaker states (2, open, for a dead
// vCenter), lookups by result and location cache hits and misses.
func TestMetricsAfterLookupsAndOutage(t *testing.T) {
	t.Parallel()
	env := newEnv(t, harness.Options{VCenters: 2, Datacenters: 1, MachinesPerPool: 2})
	vms := env.Fed.AllVMs()
	createNodes(t, env, vms)
	ccm := startCCM(t, env, "ccm", harness.CCMOptions{})
	waitInitialized(t, env, names(vms), time.Minute)
	deletions := watchDeletions(t, env)
	token := metricsReaderToken(t, env)
	const (
		duration = "cloudprovider_vsphere_api_request_duration_seconds"
		errs     = "cloudprovider_vsphere_api_request_errors_total"
		breaker  = "cloudprovider_vsphere_breaker_state"
		up       = "cloudprovider_vsphere_vcenter_up"
		lookups  = "cloudprovider_vsphere_discovery_total"
		cached   = "cloudprovider_vsphere_discovery_cache_total"
	)
	// NotReady: the lifecycle controller looks each Node up every second,
	// at its remembered location.
	setReady(t, env, vms, false)
	var ss harness.Samples
	scrapeUntil := func(what string, timeout time.Duration, cond func(harness.Samples) bool) {
		t.Helper()
		var body string
		if err := wait.PollUntilContextTimeout(t.Context(), 500*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
			var err error
			ss, body, err = ccm.Scrape(ctx, token)
			if err != nil {
				t.Fatal(err)
			}
			return cond(ss), nil
		}); err != nil {
			var ours []string
			for line := range strings.Lines(body) {
				if strings.HasPrefix(line, "cloudprovider_vsphere_") {
					ours = append(ours, strings.TrimSpace(line))
				}
			}
			t.Fatalf("/metrics: not %s within %s:\n%s", what, timeout, strings.Join(ours, "\n"))
		}
	}
	val := func(name string, labels ...string) float64 { v, _ := ss.Sum(name, labels...); return v }

	scrapeUntil("showing cache hits", 20*time.Second, func(ss harness.Samples) bool {
		v, _ := ss.Sum(cached, "result", "hit")
		return v > 0
	})
	for _, vc := range []string{"vc1", "vc2"} {
		for _, op := range []string{"find", "get", "tags"} {
			n := val(duration+"_count", "vcenter", vc, "operation", op)
			if n < 1 {
				t.Errorf("%s_count{vcenter=%q,operation=%q} = %v, want ≥ 1", duration, vc, op, n)
				continue
			}
			// Healthy loopback calls: well under requestTimeout (2s) on average.
			if mean := val(duration+"_sum", "vcenter", vc, "operation", op) / n; mean <= 0 || mean >= 2 {
				t.Errorf("%s{vcenter=%q,operation=%q}: mean %.3fs over %v calls", duration, vc, op, mean, n)
			}
			if inf := val(duration+"_bucket", "vcenter", vc, "operation", op, "le", "+Inf"); inf != n {
				t.Errorf("%s_bucket{le=+Inf} = %v, _count = %v", duration, inf, n)
			}
		}
		if v, ok := ss.Sum(breaker, "vcenter", vc); !ok || v != 0 {
			t.Errorf("%s{vcenter=%q} = %v (present %v), want 0 (closed)", breaker, vc, v, ok)
		}
	}
	if n := val(lookups, "result", "found"); n < float64(len(vms)) {
		t.Errorf("%s{result=found} = %v, want ≥ %d (one per Node at least)", lookups, n, len(vms))
	}
	if n := val(cached, "result", "miss"); n < float64(len(vms)) {
		t.Errorf("%s{result=miss} = %v, want ≥ %d (each Node's first lookup)", cached, n, len(vms))
	}
	if n, ok := ss.Sum(errs); ok && n > 0 {
		t.Errorf("%s = %v before any fault: %v", errs, n, ss.Find(errs))
	}
	t.Logf("healthy: %v find calls, %v lookups found, cache %v hits / %v misses",
		val(duration+"_count", "operation", "find"), val(lookups, "result", "found"), val(cached, "result", "hit"), val(cached, "result", "miss"))

	if v := val(up, "vcenter", "vc2"); v != 1 {
		t.Errorf("%s{vcenter=vc2} = %v while healthy, want 1", up, v)
	}
	// vc2 goes down: it is known down from its first failed connect, and
	// its lookups answer at once, counted as vcenter_down.
	must(t, env.Proxies["vc2"].SetMode(vcsim.Refuse))
	scrapeUntil("showing vc2 down", 20*time.Second, func(ss harness.Samples) bool {
		v, ok := ss.Sum(up, "vcenter", "vc2")
		return ok && v == 0
	})
	scrapeUntil("counting lookups answered at once for vc2", 20*time.Second, func(ss harness.Samples) bool {
		v, _ := ss.Sum(errs, "vcenter", "vc2", "reason", "vcenter_down")
		return v > 0
	})
	// Silent now: its probes time out, it stays down.
	must(t, env.Proxies["vc2"].SetMode(vcsim.Blackhole))
	time.Sleep(3 * time.Second)
	scrapeUntil("still showing vc2 down while silent", 10*time.Second, func(ss harness.Samples) bool {
		v, ok := ss.Sum(up, "vcenter", "vc2")
		return ok && v == 0
	})
	if v := val(breaker, "vcenter", "vc1"); v != 0 {
		t.Errorf("%s{vcenter=vc1} = %v while only vc2 is down", breaker, v)
	}
	if n := val(errs, "vcenter", "vc1"); n != 0 {
		t.Errorf("%s{vcenter=vc1} = %v while only vc2 is down: %v", errs, n, ss.Find(errs, "vcenter", "vc1"))
	}
	if n := val(lookups, "result", "error"); n < 1 {
		t.Errorf("%s{result=error} = %v during vc2's outage", lookups, n)
	}
	if n := val(lookups, "result", "not_found"); n != 0 {
		t.Errorf("%s{result=not_found} = %v: no VM is gone", lookups, n)
	}
	for _, s := range ss.Find(errs) {
		if r := s.Labels["reason"]; !slices.Contains([]string{"vcenter_down", "connecting", "deadline", "breaker_open", "auth", "connection", "other"}, r) {
			t.Errorf("%s with reason %q", errs, r)
		}
	}
	t.Logf("vc2 down: errors %v", ss.Find(errs))

	// Back: a probe sees it.
	must(t, env.Proxies["vc2"].SetMode(vcsim.Pass))
	scrapeUntil("showing vc2 up again, its breaker closed", 30*time.Second, func(ss harness.Samples) bool {
		u, _ := ss.Sum(up, "vcenter", "vc2")
		v, _ := ss.Sum(breaker, "vcenter", "vc2")
		return u == 1 && v == 0
	})
	if d := deletions.Deleted(nil); len(d) > 0 {
		t.Fatalf("nodes deleted: %v", d)
	}
}
