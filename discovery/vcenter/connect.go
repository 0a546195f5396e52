package vcenter

// A vCenter's first connect, as calls judge whether to wait for it: a
// first connect to a black hole takes seconds, and a lookup waiting on it
// each time would hold its worker as long, while one across a WAN
// answers step by step and is worth waiting for.

import (
	"fmt"
	"slices"
	"time"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/backends"
)

// unready is the error of a vCenter a call should not wait for: known
// down, or still connecting for the first time and stalled (connecting):
// no progress for longer than its stall window, judged stalled before
// and no progress since, or waited for as long as any lookup may. Both
// start a background probe, which for a backend without an inventory is
// what connects it.
func (m *Member) unready(now time.Time) error {
	st := m.Backend.State()
	r := st.Reachability
	switch r.State {
	case backends.ConnDown:
		m.connected()
		m.probeLater()
		return fmt.Errorf("%w since %s: %v", ErrVCenterDown, r.Since.UTC().Format(time.RFC3339), r.Err) //nolint:errorlint // the backend's error is shown, not wrapped: this error's kind is ErrVCenterDown
	case backends.ConnUnknown:
		m.connectingSince.CompareAndSwap(0, now.UnixNano())
		if c := m.connecting(st, now); c.stalled(now) {
			m.stalled.Store(&stallMark{last: c.last, phase: c.phase})
			m.probeLater()
			m.refusedConnecting.Store(true)
			return fmt.Errorf("%w %s", ErrVCenterConnecting, c.describe(now))
		}
	default:
		m.connected()
	}
	return nil
}

// StalledAt is when m's first connect counts as stalled unless it
// progresses (see Options.ConnectWait): when a lookup waiting for it
// stops. It is now or earlier once judged stalled; meaningful only while
// m is connecting (backends.ConnUnknown).
func (m *Member) StalledAt(now time.Time) time.Time {
	return m.connecting(m.Backend.State(), now).stalledAt()
}

// GaveUp records that a lookup stopped waiting for m's answer at now.
// While m is still connecting it is owed that lookup (UpAfterRefusing),
// and a connect stalled by now is judged so: the next lookup does not
// wait for it either.
func (m *Member) GaveUp(now time.Time) {
	st := m.Backend.State()
	if st.Reachability.State != backends.ConnUnknown {
		return
	}
	m.refusedConnecting.Store(true)
	if c := m.connecting(st, now); c.stalled(now) {
		m.stalled.Store(&stallMark{last: c.last, phase: c.phase})
	}
}

// connected forgets m's first connect: it ended, up or down.
func (m *Member) connected() {
	m.connectingSince.Store(0)
	m.stalled.Store(nil)
}

// stallMark is how far a connect judged stalled had got: its last
// progress and the phase it reached then.
type stallMark struct {
	last  time.Time
	phase string
}

// progressedSince reports whether a connect now at c has progressed
// since m: reported progress later than m, of a phase further than m's,
// or an answer. The same step again (a new dial, a TCP connect once more:
// a retry after a handshake that timed out) is no progress, whatever the
// backend makes of it: a vCenter that accepts TCP and never answers must
// not look alive again at each retry (issue 33).
func (m *stallMark) progressedSince(c connectState) bool {
	return c.last.After(m.last) &&
		(c.phase == phaseAnswering || slices.Index(connectPhases, c.phase) > slices.Index(connectPhases, m.phase))
}

// phaseAnswering is the phase of a connect that got an answer: each one
// is progress.
const phaseAnswering = "answering"

// connectPhases are the phases of backends.ConnectProgress in the order a
// connect reaches them; none reported ranks below them all.
var connectPhases = []string{"dialing", "tcp connected", "tls done", phaseAnswering}

// connectState is how a vCenter's first connection attempt is going, as
// a lookup judges whether to wait for it.
type connectState struct {
	since time.Time // connecting since: its backend was made or a lookup first met it so
	met   time.Time // a lookup first met it connecting
	last  time.Time // since, or the attempt's last progress when later
	phase string
	// window is how long a silence may last before it is a stall:
	// ConnectWait, or more for a vCenter far away (stallRoundTrips of
	// its slowest answer so far).
	window time.Duration
	// until is the latest any lookup waits for it, however it
	// progresses: half its request timeout (at least ConnectWait) after
	// a lookup first met it connecting. Counted from then, not from each
	// lookup's start, so that a connect that crawls on (a login that
	// answers step by step and never ends) costs the lookups that much
	// once, not each of them as much again.
	until time.Time
	// judged: a lookup judged it stalled at last, and it has made no
	// progress since. A vCenter that only seems to move (a retry dialing
	// again) is not waited for again.
	judged bool
}

// stallRoundTrips scales a vCenter's slowest answer during its connect
// into its stall window: each step of a connect (TCP, TLS, each request
// of the login) is one round trip plus the vCenter's own time, which
// varies (a login takes longer than reading the service content).
const stallRoundTrips = 4

func (m *Member) connecting(st backends.State, now time.Time) connectState {
	met := now
	if ns := m.connectingSince.Load(); ns != 0 {
		met = time.Unix(0, ns)
	}
	since := met
	if r := st.Reachability; !r.Since.IsZero() && r.Since.Before(since) {
		since = r.Since // connecting since the backend was made
	}
	c := connectState{since: since, met: met, last: since, window: m.opts.ConnectWait,
		until: met.Add(max(m.opts.ConnectWait, m.RequestTimeout/2))}
	switch p := st.Connect; {
	case p.Last.IsZero():
		// No attempt yet (a backend without an inventory connects on
		// first use): the call about to be made starts it.
		c.last = now
	case p.Last.After(c.last):
		c.last, c.phase = p.Last, p.Phase
	}
	c.window = max(c.window, stallRoundTrips*st.Connect.RoundTrip)
	if mark := m.stalled.Load(); mark != nil && !mark.progressedSince(c) {
		c.judged = true
	}
	return c
}

// stalledAt is when the attempt counts as stalled, unless it progresses.
func (c connectState) stalledAt() time.Time {
	if c.judged {
		return c.last
	}
	if t := c.last.Add(c.window); t.Before(c.until) {
		return t
	}
	return c.until
}

func (c connectState) stalled(now time.Time) bool { return !now.Before(c.stalledAt()) }

func (c connectState) describe(now time.Time) string {
	took := now.Sub(c.since).Round(time.Millisecond)
	progress := "without progress"
	if c.phase != "" {
		progress = fmt.Sprintf("its last progress (%s) was %s ago", c.phase, now.Sub(c.last).Round(time.Millisecond))
	}
	switch {
	case c.judged:
		return fmt.Sprintf("for %s; %s, judged stalled then, none since", took, progress)
	case !now.Before(c.until):
		return fmt.Sprintf("for %s; %s, waited for as long as lookups may (%s after a lookup first met it connecting)",
			took, progress, c.until.Sub(c.met).Round(time.Millisecond))
	case c.phase == "":
		return fmt.Sprintf("for %s without progress", took)
	}
	return fmt.Sprintf("for %s; %s, beyond its stall window %s", took, progress, c.window.Round(time.Millisecond))
}
