// Package check is the judgement of the validate command: which checks a
// vCenter gets, in what order, which an earlier failure skips, and the
// verdict and words of each. What it reads of vCenter, it reads through
// the small read-only methods of the vSphere backend (its operator.go):
// nothing here speaks SOAP or REST, and nothing of the product's lookups
// exists for it.
package check

import (
	"context"
	"net"
	"strconv"
	"time"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/backends/vsphere"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config"
)

// The names of a vCenter's checks, in the order they run.
const (
	TCP         = "tcp"
	TLS         = "tls"
	Login       = "login"
	Datacenters = "datacenters"
	Tags        = "tag categories"
	Privileges  = "privileges"
	VMs         = "vms"
	Latency     = "latency"
)

// Verdict is the outcome of one check.
type Verdict string

// The verdicts: passed, failed, not run (an earlier check failed, or
// nothing to check), passed with a warning (something to act on soon,
// nothing that stops the CCM now).
const (
	Passed  Verdict = "pass"
	Failed  Verdict = "fail"
	Skipped Verdict = "skip"
	Warned  Verdict = "warn"
)

// Result is one check's verdict, with its reason in words; it never holds
// a credential. Its JSON is validate's -o json.
type Result struct {
	Name    string        `json:"name"`
	Verdict Verdict       `json:"verdict"`
	Detail  string        `json:"detail"`
	Took    time.Duration `json:"tookNanoseconds"`
}

// Request says what is checked beyond the connection.
type Request struct {
	// Categories are the zone and region tag categories of the config's
	// labels; none: not checked.
	Categories []string
}

// VCenter checks, read-only, what the CCM needs of the vCenter vc through
// b, a backend built from vc, each step under ctx: the TCP connection,
// the TLS verification the config asks for, the login with the
// backend's own credentials, the datacenters, the tag categories, the
// privileges, the VMs visible and the round-trip latency. A failed step
// skips those that need it. Nothing is written to vCenter but the
// session itself (and a container view, destroyed after counting).
func VCenter(ctx context.Context, vc config.VCenter, b *vsphere.Backend, req Request) []Result {
	addr := net.JoinHostPort(vc.Server, strconv.Itoa(vc.Port))
	var r record
	if r.run(TCP, func() (Verdict, string) { return tcp(ctx, addr) }) != Passed {
		return r.skip(TLS, Login, Datacenters, Tags, Privileges, VMs, Latency)
	}
	user, ok := r.tlsAndLogin(ctx, vc, b, addr)
	if !ok {
		return r.skip(Datacenters, Tags, Privileges, VMs, Latency)
	}
	var dcs []config.Datacenter
	r.run(Datacenters, func() (v Verdict, detail string) {
		dcs, v, detail = datacenters(ctx, b, vc.DatacenterSpecs())
		return v, detail
	})
	r.run(Tags, func() (Verdict, string) {
		if len(req.Categories) == 0 {
			return Skipped, "labels.zone and labels.region not configured: no zones or regions"
		}
		return categories(ctx, b, req.Categories)
	})
	r.run(Privileges, func() (Verdict, string) {
		if len(dcs) == 0 {
			return Skipped, "no datacenter to check them on"
		}
		return privileges(ctx, b, user, len(dcs))
	})
	r.run(VMs, func() (Verdict, string) { return vms(ctx, b, dcs) })
	r.run(Latency, func() (Verdict, string) { return latency(ctx, b, vc.RequestTimeout) })
	return r.results
}

// record collects a vCenter's results in order.
type record struct{ results []Result }

// run times fn and records its verdict under name.
func (r *record) run(name string, fn func() (Verdict, string)) Verdict {
	start := time.Now()
	v, detail := fn()
	r.results = append(r.results, Result{Name: name, Verdict: v, Detail: detail, Took: time.Since(start)})
	return v
}

// skip records names as not run and returns every result.
func (r *record) skip(names ...string) []Result {
	for _, n := range names {
		r.results = append(r.results, Result{Name: n, Verdict: Skipped, Detail: "not run: an earlier check failed"})
	}
	return r.results
}
