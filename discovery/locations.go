package discovery

import (
	"sync"
	"time"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/backends"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config"
)

// location is where a VM was found: its vCenter (its name then, for
// messages, and what it is), its reference there and its datacenter (by
// name, ID and path, as the configured datacenters match it).
type location struct {
	vcenter string
	where   Identity
	ref     backends.VMRef
	dc      config.Datacenter
}

// locationCache remembers, for a TTL, where each lookup key's VM was last
// found. Setting a key again rewrites its entry in place: a retired location
// is refreshed on every ask (every few seconds by the lifecycle controller)
// and must cost one entry, not one per ask as a heap of expiries would.
type locationCache struct {
	ttl time.Duration
	now func() time.Time

	mu      sync.Mutex
	entries map[string]rememberedLocation
	sweepAt int // sweep expired entries when the map reaches this size
}

type rememberedLocation struct {
	location
	at time.Time
}

func newLocationCache(ttl time.Duration) *locationCache {
	return &locationCache{ttl: ttl, now: time.Now, entries: map[string]rememberedLocation{}}
}

// get returns key's location if it was set within the TTL.
func (c *locationCache) get(key string) (location, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[key]
	if !ok || c.now().Sub(e.at) >= c.ttl {
		return location{}, false
	}
	return e.location, true
}

// set remembers loc under key from now. Expired entries are swept whenever
// the map has doubled since the last sweep, so it stays bounded by what was
// set within one TTL.
func (c *locationCache) set(key string, loc location) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	if len(c.entries) >= c.sweepAt {
		for k, e := range c.entries {
			if now.Sub(e.at) >= c.ttl {
				delete(c.entries, k)
			}
		}
		c.sweepAt = max(64, 2*len(c.entries))
	}
	c.entries[key] = rememberedLocation{location: loc, at: now}
}

func (c *locationCache) forget(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.entries, key)
}
