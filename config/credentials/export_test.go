package credentials

import "time"

// NewChainAt is NewChain with its own retry schedule and clock.
func NewChainAt(r Retry, now func() time.Time, links ...Source) *Chain {
	return newChain(links, r, now)
}

// NewChainIn is a chain of server's links keeping its refusals in l, with
// its own retry schedule and clock.
func NewChainIn(l *Ledger, server string, r Retry, now func() time.Time, links ...Source) *Chain {
	c := newChain(links, r, now)
	c.server, c.ledger = server, l
	return c
}
