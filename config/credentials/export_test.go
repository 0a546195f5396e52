package credentials

import "time"

// NewChainAt is NewChain with its own retry schedule and clock.
func NewChainAt(r Retry, now func() time.Time, links ...Source) *Chain {
	return newChain(links, "", nil, r, now)
}

// NewChainIn is a chain of server's links keeping its refusals in l, with
// its own retry schedule and clock.
func NewChainIn(l *Ledger, server string, r Retry, now func() time.Time, links ...Source) *Chain {
	return newChain(links, server, l, r, now)
}
