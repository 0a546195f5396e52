package discovery

import "time"

// Shorthands of the tests for what the fleet does with Members, and what
// only tests read.

// SetVCenters uses the entries vcs, closing the members dropped.
func (d *Discoverer) SetVCenters(vcs []Target) {
	next, dropped := d.Members().Next(vcs)
	d.Use(next)
	for _, v := range dropped {
		v.Close()
	}
}

// SetHistory uses the record h, or none known (unknown).
func (d *Discoverer) SetHistory(h History, unknown string) {
	d.Use(d.Members().WithHistory(h, unknown))
}

// Close closes the members in use.
func (d *Discoverer) Close() { d.Members().Close() }

// Remaining is how long the grace still holds the Node (0 when frozen).
func (e *DeletionHeldError) Remaining() time.Duration {
	if e.Reason == HeldFrozen {
		return 0
	}
	return max(e.MinAbsence-e.Absent, 0)
}

// size counts entries, expired ones not yet swept included.
func (c *locationCache) size() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.entries)
}
