package cloud

// AnnouncedUnmanaged is how many Nodes the unmanaged check remembers
// having announced.
func (c *Cloud) AnnouncedUnmanaged() int { return c.nodes.AnnouncedUnmanaged() }

// CountedConflicts is how many identity conflicts the claims check
// remembers having counted.
func (c *Cloud) CountedConflicts() int { return c.instances.CountedConflicts() }
