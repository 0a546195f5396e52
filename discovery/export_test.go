package discovery

// Shorthands of the tests for what the fleet does with Members.

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
