package harness

import (
	"net"
	"sort"
	"strconv"
	"sync"
)

// Everything the harness starts that outlives a call (control planes, CCM
// processes, simulators) is tracked here, so Shutdown can stop it all even
// when the caller never gets to its own cleanup (a test binary about to hit
// its -timeout, a demo interrupted by a signal).
var (
	liveMu sync.Mutex
	liveID int
	live   = map[int]func(){}
)

// track registers stop and returns the function that unregisters it.
func track(stop func()) (untrack func()) {
	liveMu.Lock()
	defer liveMu.Unlock()
	liveID++
	id := liveID
	live[id] = stop
	return func() {
		liveMu.Lock()
		defer liveMu.Unlock()
		delete(live, id)
	}
}

// Shutdown stops everything the harness started that is still running,
// newest first. Normal cleanup (Env.Close, CCM.Stop, ControlPlane.Stop) makes
// it a no-op; it exists for watchdogs and signal handlers.
func Shutdown() {
	liveMu.Lock()
	var ids []int
	for id := range live {
		ids = append(ids, id)
	}
	stops := live
	live = map[int]func(){}
	liveMu.Unlock()
	// Newest first: CCMs before the control plane they talk to.
	sort.Sort(sort.Reverse(sort.IntSlice(ids)))
	for _, id := range ids {
		stops[id]()
	}
}

// FreePort returns a TCP port that was free on host a moment ago.
func FreePort(host string) (int, error) {
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	_, p, _ := net.SplitHostPort(ln.Addr().String())
	return strconv.Atoi(p)
}
