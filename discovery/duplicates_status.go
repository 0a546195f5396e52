package discovery

import "slices"

// Duplicates lists, sorted, the BIOS UUIDs the duplicate index holds in
// more than one vCenter now, from memory: no vCenter is asked. Their
// Nodes' lookups fail (DuplicateError) until one of the VMs is changed.
func (d *Discoverer) Duplicates() []string {
	x := d.duplicates
	x.mu.Lock()
	defer x.mu.Unlock()
	out := make([]string, 0, len(x.twins))
	for u := range x.twins {
		out = append(out, u)
	}
	slices.Sort(out)
	return out
}
