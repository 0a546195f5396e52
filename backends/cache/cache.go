// Package cache is a small, concurrency-safe map whose entries expire.
package cache

import (
	"sync"
	"time"
)

// TTL maps K to V; an entry is served for ttl after it was set.
type TTL[K comparable, V any] struct {
	ttl time.Duration
	now func() time.Time

	mu      sync.Mutex
	entries map[K]entry[V]
	sweepAt int // sweep expired entries when the map reaches this size
}

type entry[V any] struct {
	value V
	at    time.Time
}

// NewTTL returns an empty cache.
func NewTTL[K comparable, V any](ttl time.Duration) *TTL[K, V] {
	return &TTL[K, V]{ttl: ttl, now: time.Now, entries: map[K]entry[V]{}}
}

// Get returns the live value of k.
func (c *TTL[K, V]) Get(k K) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[k]
	if !ok || c.now().Sub(e.at) >= c.ttl {
		var zero V
		return zero, false
	}
	return e.value, true
}

// Set stores v under k. Expired entries are swept whenever the map has
// doubled since the last sweep, so it stays bounded by what was used lately.
func (c *TTL[K, V]) Set(k K, v V) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	if len(c.entries) >= c.sweepAt {
		for key, e := range c.entries {
			if now.Sub(e.at) >= c.ttl {
				delete(c.entries, key)
			}
		}
		c.sweepAt = max(64, 2*len(c.entries))
	}
	c.entries[k] = entry[V]{value: v, at: now}
}

// Delete forgets k.
func (c *TTL[K, V]) Delete(k K) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.entries, k)
}

// Len counts entries, expired ones included.
func (c *TTL[K, V]) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.entries)
}
