package check

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/backends"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/backends/vsphere"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config"
)

// datacenters finds the configured datacenters (all, when none is
// configured), by name, managed object ID or inventory path, suggesting
// for each one missing what it may have meant. A name that several
// datacenters carry fails too: CPI's finder refuses it, and its Nodes'
// labels could not tell those datacenters apart.
func datacenters(ctx context.Context, b *vsphere.Backend, want []config.DatacenterSpec) ([]config.Datacenter, Verdict, string) {
	all, err := b.Datacenters(ctx)
	if err != nil {
		return nil, Failed, fmt.Sprintf("listing datacenters: %v", err)
	}
	if len(want) == 0 {
		var shown []string
		for _, dc := range all {
			shown = append(shown, describeDC(dc))
		}
		return all, Passed, fmt.Sprintf("none configured: all %d searched (%s)", len(all), strings.Join(shown, ", "))
	}
	var problems, ok []string
	for _, spec := range want {
		var matched []config.Datacenter
		for _, dc := range all {
			if spec.Matches(dc) {
				matched = append(matched, dc)
			}
		}
		switch len(matched) {
		case 0:
			problems = append(problems, fmt.Sprintf("%q not found%s", spec.Raw, suggestDatacenter(spec, all)))
		case 1:
			ok = append(ok, fmt.Sprintf("%s found (%s)", spec.Raw, describeDC(matched[0])))
		default:
			var paths []string
			for _, dc := range matched {
				paths = append(paths, strconv.Quote(dc.Path))
			}
			problems = append(problems, fmt.Sprintf("%q names %d datacenters (%s): CPI refuses such a name and Node labels cannot tell them apart; write the path of the one meant",
				spec.Raw, len(matched), strings.Join(paths, ", ")))
		}
	}
	found := slices.DeleteFunc(slices.Clone(all), func(dc config.Datacenter) bool {
		return !backends.Searched(want, dc)
	})
	if len(problems) > 0 {
		return found, Failed, strings.Join(problems, "; ")
	}
	return found, Passed, strings.Join(ok, "; ")
}

// describeDC shows a datacenter as each form names it.
func describeDC(dc config.Datacenter) string {
	if dc.Path == "/"+dc.Name {
		return fmt.Sprintf("%s, %s", dc.Name, dc.ID)
	}
	return fmt.Sprintf("%s, %s, %s", dc.Name, dc.ID, dc.Path)
}

// suggestDatacenter says what a spec that matched nothing may have meant:
// an ID that is some datacenter's name means that datacenter (by path);
// a path whose last element is a datacenter's name, that one's path;
// otherwise the nearest names, IDs or paths, in the spec's own form.
func suggestDatacenter(spec config.DatacenterSpec, all []config.Datacenter) string {
	var candidates []string
	for _, dc := range all {
		switch spec.Kind {
		case config.DatacenterByID:
			if dc.Name == spec.Value {
				return fmt.Sprintf(" as an ID, but a datacenter is named so: write %q", dc.Path)
			}
			candidates = append(candidates, dc.ID)
		case config.DatacenterByPath:
			if name, _ := spec.Name(); dc.Name == name {
				return fmt.Sprintf("; datacenter %s is at %q", dc.Name, dc.Path)
			}
			candidates = append(candidates, dc.Path)
		default:
			candidates = append(candidates, dc.Name)
		}
	}
	slices.Sort(candidates)
	return suggest(spec.Value, slices.Compact(candidates))
}

// tagCategories reports, per category, whether it exists, its tags and
// how many objects carry one.
func tagCategories(ctx context.Context, b *vsphere.Backend, want []string) (Verdict, string) {
	names, use, err := b.TagCategories(ctx, want)
	if err != nil {
		return Failed, fmt.Sprintf("listing tag categories: %v", err)
	}
	slices.Sort(names)
	verdict := Passed
	var details []string
	for _, c := range want {
		u, ok := use[c]
		switch {
		case !ok:
			verdict = Failed
			details = append(details, fmt.Sprintf("category %q not found%s", c, suggest(c, names)))
		case u.Objects == 0:
			verdict = Failed
			details = append(details, fmt.Sprintf("category %q: %d tag(s), attached to nothing: no Node would get this label", c, u.Tags))
		default:
			details = append(details, fmt.Sprintf("%q: %d tag(s) on %d object(s)", c, u.Tags, u.Objects))
		}
	}
	return verdict, strings.Join(details, "; ")
}

// privileges names the privileges the CCM needs (vsphere's
// RequiredPrivileges) that the login's user lacks on a datacenter the
// datacenters check found (n of them), as vCenter reports them.
func privileges(ctx context.Context, b *vsphere.Backend, user string, n int) (Verdict, string) {
	rep, err := b.MissingPrivileges(ctx)
	if err != nil {
		return Failed, fmt.Sprintf("reading %s's privileges: %v", user, err)
	}
	var problems []string
	for _, m := range rep.Missing {
		problems = append(problems, fmt.Sprintf("%s lacks %s on %s", rep.User, strings.Join(m.Privileges, ", "), m.Entity))
	}
	if len(problems) > 0 {
		return Failed, strings.Join(problems, "; ")
	}
	return Passed, fmt.Sprintf("%s holds %s on %d datacenter(s)", rep.User, strings.Join(vsphere.RequiredPrivileges(), ", "), n)
}

func vms(ctx context.Context, b *vsphere.Backend, dcs []config.Datacenter) (Verdict, string) {
	n, err := b.CountVMs(ctx, dcs)
	if err != nil {
		return Failed, fmt.Sprintf("listing VMs: %v", err)
	}
	if n == 0 {
		return Failed, "no VM visible to this login in the datacenters searched"
	}
	return Passed, fmt.Sprintf("%d visible in the datacenters searched", n)
}

// suggest names up to three of names nearest to want (by edit distance,
// case-insensitively), as "; nearest: a, b"; with none near, the first
// few names.
func suggest(want string, names []string) string {
	distance := func(n string) int { return editDistance(strings.ToLower(want), strings.ToLower(n)) }
	near := slices.DeleteFunc(slices.Clone(names), func(n string) bool { return distance(n) > max(3, len(want)/2) })
	if len(near) == 0 {
		if len(names) == 0 {
			return " (there are none)"
		}
		return fmt.Sprintf(" (there are: %s)", strings.Join(names[:min(len(names), 5)], ", "))
	}
	slices.SortStableFunc(near, func(a, b string) int { return cmp.Compare(distance(a), distance(b)) })
	var out []string
	for _, n := range near[:min(len(near), 3)] {
		out = append(out, strconv.Quote(n))
	}
	return "; nearest: " + strings.Join(out, ", ")
}

// editDistance is Levenshtein's, over bytes.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
