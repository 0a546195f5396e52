package vcsim

import (
	"net"
	"strconv"
	"testing"
)

// NewProxy is a Proxy in front of vc, listening on vc's own loopback
// address.
func (vc *VCenter) NewProxy() (*Proxy, error) {
	return NewProxy(vc.Host, net.JoinHostPort(vc.Host, strconv.Itoa(vc.Port)))
}

// StartProxied starts one simulated vCenter (o.VCenters is ignored) and
// a Proxy in front of it, both closed when t ends: the tests' fixture
// for a vCenter whose network they break.
func StartProxied(t testing.TB, o Options) (*VCenter, *Proxy) {
	t.Helper()
	o.VCenters = 1
	f, err := Start(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	vc := f.VCenters[0]
	p, err := vc.NewProxy()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return vc, p
}
