package credentials

import "time"

// NewChainAt is NewChain with its own retry schedule and clock.
func NewChainAt(r Retry, now func() time.Time, links ...Source) *Chain {
	return newChain(links, r, now)
}
