package metadata

import "fmt"

// ZoneTagError is a located VM with no tag in a configured zone or region
// category on its host, resource pool or folders and what holds them:
// InstanceMetadata fails, so the Node stays tainted rather than join
// without its zone.
type ZoneTagError struct {
	VM string // the VM, as discovery.Result names it
	// Missing are the categories without a tag, e.g. `zone (category "k8s-zone")`.
	Missing []string
}

func (e *ZoneTagError) Error() string {
	return fmt.Sprintf("%s: no tag for %v on its host, resource pool or folders and what holds them", e.VM, e.Missing)
}
