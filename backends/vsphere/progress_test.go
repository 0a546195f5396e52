package vsphere

import (
	"testing"
	"time"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/backends"
)

// A retry's steps are no progress (issue 33): against a vCenter that
// accepts TCP and never answers TLS, the SOAP client dials again when the
// handshake times out (maxHandshake later). Counted, that dial's TCP
// connect moved Last and made the 5 s since the first one a "round trip":
// a stall window of 20 s, and every lookup waited for the dead vCenter
// again. A step further, or an answer, still is progress.
func TestConnectProgressIgnoresARetrysRepeatedSteps(t *testing.T) {
	s := &sessions{}
	s.noteProgress(phaseDialing)
	s.noteProgress(phaseTCP)
	first := progressOf(s)
	if first.Phase != phaseTCP || first.Last.IsZero() {
		t.Fatalf("after the first TCP connect: %+v", first)
	}
	time.Sleep(20 * time.Millisecond) // the handshake that times out
	s.noteProgress(phaseDialing)
	s.noteProgress(phaseTCP)
	if got := progressOf(s); got != first {
		t.Fatalf("a retry's dial and TCP connect changed the progress: %+v, was %+v", got, first)
	}

	s.noteProgress(phaseTLS)
	tls := progressOf(s)
	if tls.Phase != phaseTLS || !tls.Last.After(first.Last) || tls.RoundTrip < 20*time.Millisecond {
		t.Fatalf("a TLS handshake after the TCP connect: %+v, want phase %q, later than %v, a round trip of 20ms or more", tls, phaseTLS, first.Last)
	}
	s.noteProgress(phaseTCP) // another connection of the same attempt
	if got := progressOf(s); got != tls {
		t.Fatalf("a second connection's TCP connect after TLS changed the progress: %+v, was %+v", got, tls)
	}
	s.noteProgress(phaseAnswer)
	a1 := progressOf(s)
	time.Sleep(time.Millisecond)
	s.noteProgress(phaseAnswer)
	if a2 := progressOf(s); a1.Phase != phaseAnswer || !a2.Last.After(a1.Last) {
		t.Fatalf("answers are each progress: %+v then %+v", a1, a2)
	}
}

// progressOf is the first connection attempt's progress.
func progressOf(s *sessions) backends.ConnectProgress {
	_, p := s.reachState()
	return p
}
