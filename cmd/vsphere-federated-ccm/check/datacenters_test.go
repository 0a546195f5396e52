package check

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/vmware/govmomi/object"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/test/vcsim"
)

// validate finds datacenters by each form, and for one it does not find,
// suggests what was likely meant in that form.
func TestValidateDatacenterForms(t *testing.T) {
	vc, p := vcsim.StartProxied(t, vcsim.Options{Datacenters: 2, Folders: 1})
	ctx := ctxFor(t)
	var nested *vcsim.VM
	for _, vm := range vc.VMs {
		if vm.DatacenterPath != "/"+vm.Datacenter {
			nested = vm
		}
	}
	if nested == nil {
		t.Fatal("fixture: no datacenter in a folder")
	}
	// A datacenter named like a managed object ID, and a second one of
	// the nested one's name elsewhere.
	client, err := vc.Client(ctx)
	if err != nil {
		t.Fatal(err)
	}
	root := object.NewRootFolder(client.Client)
	if _, err := root.CreateDatacenter(ctx, "datacenter-lab"); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		entries []string
		verdict Verdict
		detail  string
	}{
		{[]string{nested.Datacenter}, Passed, nested.DatacenterPath},
		{[]string{nested.DatacenterPath}, Passed, nested.DatacenterID},
		{[]string{"Datacenter:" + nested.DatacenterID}, Passed, nested.DatacenterPath},
		{[]string{nested.DatacenterID, "/datacenter-lab"}, Passed, "datacenter-lab"},
		{[]string{"/" + nested.Datacenter}, Failed, fmt.Sprintf("%q not found; datacenter %s is at %q", "/"+nested.Datacenter, nested.Datacenter, nested.DatacenterPath)},
		{[]string{"datacenter-lab"}, Failed, `"datacenter-lab" not found as an ID, but a datacenter is named so: write "/datacenter-lab"`},
		{[]string{"Datacenter:datacenter-99999"}, Failed, `"Datacenter:datacenter-99999" not found`},
		{[]string{strings.ToLower(nested.Datacenter) + "x"}, Failed, fmt.Sprintf("nearest: %q", nested.Datacenter)},
	} {
		tg := targetVia(vc, p.Host(), p.Port())
		tg.cfg.Datacenters = c.entries
		results, _ := validateVia(t, tg, nil, 30*time.Second)
		var got Result
		for _, r := range results {
			if r.Name == Datacenters {
				got = r
			}
		}
		if got.Verdict != c.verdict || !strings.Contains(got.Detail, c.detail) {
			t.Errorf("datacenters %q: %s %q; want %s with %q", c.entries, got.Verdict, got.Detail, c.verdict, c.detail)
		}
		if c.verdict == Passed && detailOf(results, VMs) == "" {
			t.Errorf("datacenters %q: no VM check", c.entries)
		}
	}
	// A name two datacenters carry fails: CPI refuses it.
	f, err := root.CreateFolder(ctx, "elsewhere")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.CreateDatacenter(ctx, nested.Datacenter); err != nil {
		t.Fatal(err)
	}
	tg := targetVia(vc, p.Host(), p.Port())
	tg.cfg.Datacenters = []string{nested.Datacenter}
	results, _ := validateVia(t, tg, nil, 30*time.Second)
	if d := detailOf(results, Datacenters); !strings.Contains(d, "names 2 datacenters") || !strings.Contains(d, "/elsewhere/"+nested.Datacenter) {
		t.Errorf("an ambiguous name: %q", d)
	}
}
