package discovery

// The deletion policy (config.NodeDeletion): after every guard concluded
// absence, a frozen vCenter or a grace not yet spanned still keeps the
// Node. Exists applies it last; any answer that a VM exists starts the
// grace over.

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/utils/clock"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/discovery/vcenter"
)

// Why a DeletionHeldError holds a Node back.
const (
	HeldGrace  = "grace"
	HeldFrozen = "frozen"
)

// DeletionHeldError is absence concluded by every vCenter and every
// guard, held back by the deletion policy: a vCenter that could hold the
// VM is frozen, or the VM has not been confirmed absent for its
// minAbsence yet. The Node is kept, and asked about again.
type DeletionHeldError struct {
	What   string
	Reason string // HeldGrace or HeldFrozen
	// VCenters are the frozen vCenters (HeldFrozen), or those whose
	// minAbsence has not passed yet (HeldGrace); Keys the keys that froze
	// them ("vcenter.a.nodeDeletion", "global.nodeDeletion").
	VCenters []string
	Keys     []string
	// Since is the first answer of absence in this run of them; Absent
	// how long ago that was; MinAbsence the grace that applies.
	Since      time.Time
	Absent     time.Duration
	MinAbsence time.Duration
}

func (e *DeletionHeldError) Error() string {
	if e.Reason == HeldFrozen {
		return fmt.Sprintf("%s: not found in any vCenter, but deletion is frozen for %s (%s), which could hold it; not deleting while it is",
			e.What, vcentersNamed(e.VCenters), e.Freezes())
	}
	return fmt.Sprintf("%s: its VM was confirmed absent %s ago; reported absent after %s of absence (nodeDeletion.minAbsence of %s); not deleting yet",
		e.What, roundForPeople(e.Absent), roundForPeople(e.MinAbsence), vcentersNamed(e.VCenters))
}

// Freezes names the keys that froze deletion as the config sets them:
// "vcenter.a.nodeDeletion: frozen, global.nodeDeletion: frozen".
func (e *DeletionHeldError) Freezes() string {
	keys := make([]string, len(e.Keys))
	for i, k := range e.Keys {
		keys[i] = k + ": frozen"
	}
	return strings.Join(keys, ", ")
}

func vcentersNamed(names []string) string {
	if len(names) == 1 {
		return "vcenter " + names[0]
	}
	return "vcenters " + strings.Join(names, ", ")
}

// roundForPeople rounds d to seconds, or to milliseconds under one.
func roundForPeople(d time.Duration) time.Duration {
	if d < time.Second {
		return d.Round(time.Millisecond)
	}
	return d.Round(time.Second)
}

// HeldNodes counts the Nodes one vCenter's deletion policy holds back
// now, by reason.
type HeldNodes struct{ Grace, Frozen int }

// Nodes is how many Nodes it holds back.
func (h HeldNodes) Nodes() int { return h.Grace + h.Frozen }

// holds remembers, by lookup key (the location cache's: the Node's
// providerID), when each VM was first confirmed absent in the current
// run of such answers, and why its Node is held back.
type holds struct {
	clock clock.PassiveClock
	mu    sync.Mutex
	by    map[string]*hold
	// pruned is when pruneLocked last looked at every entry.
	pruned time.Time
}

type hold struct{ since, last time.Time }

// holdsForget is the least time an entry is kept without an answer of
// absence; each is kept at least 10× the longest grace too. A Node not
// asked about for that long (Ready again, or deleted by someone else)
// is forgotten; asked again, its grace starts over.
const holdsForget = 10 * time.Minute

// seen forgets key's absence: a VM answering to it exists.
func (h *holds) seen(key string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.by, key)
}

// absent applies the policy of vcs, every vCenter that could hold the VM,
// to an absence concluded for key: nil when the Node may go.
func (h *holds) absent(key, what string, vcs []*vcenter.Member) error {
	now := h.clock.Now()
	var grace time.Duration
	var frozen, keys []string
	for _, v := range vcs {
		grace = max(grace, v.NodeDeletion.MinAbsence)
		if v.NodeDeletion.Frozen {
			frozen = append(frozen, v.Name)
			if k := v.NodeDeletion.FrozenBy; k != "" && !slices.Contains(keys, k) {
				keys = append(keys, k)
			}
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.pruneLocked(now, vcs)
	e := h.by[key]
	if e == nil {
		e = &hold{since: now}
		h.by[key] = e
	}
	e.last = now
	absentFor := now.Sub(e.since)
	if len(frozen) > 0 {
		// The grace runs on under a freeze: the answers of absence
		// still span it.
		if len(keys) == 0 {
			keys = []string{"nodeDeletion"}
		}
		return &DeletionHeldError{What: what, Reason: HeldFrozen, VCenters: frozen, Keys: keys, Since: e.since, Absent: absentFor, MinAbsence: grace}
	}
	if absentFor >= grace {
		delete(h.by, key)
		return nil
	}
	var holding []string
	for _, v := range vcs {
		if v.NodeDeletion.MinAbsence > absentFor {
			holding = append(holding, v.Name)
		}
	}
	return &DeletionHeldError{What: what, Reason: HeldGrace, VCenters: holding, Since: e.since, Absent: absentFor, MinAbsence: grace}
}

// pruneLocked drops the entries no answer of absence refreshed for
// holdsForget or 10× the longest grace of vcs, whichever is longer. It
// looks at most once a minute: every NotReady Node is asked about each
// few seconds.
func (h *holds) pruneLocked(now time.Time, vcs []*vcenter.Member) {
	if now.Sub(h.pruned) < time.Minute {
		return
	}
	h.pruned = now
	after := holdsForget
	for _, v := range vcs {
		after = max(after, 10*v.NodeDeletion.MinAbsence)
	}
	for k, e := range h.by {
		if now.Sub(e.last) > after {
			delete(h.by, k)
		}
	}
}

// count lists, for each of vcs, the Nodes it holds back now, by the
// policy now: an edit shows at once, before those Nodes are asked about
// again.
func (h *holds) count(vcs []*vcenter.Member) []HeldNodes {
	h.mu.Lock()
	defer h.mu.Unlock()
	now := h.clock.Now()
	h.pruneLocked(now, vcs)
	frozen := slices.ContainsFunc(vcs, func(v *vcenter.Member) bool { return v.NodeDeletion.Frozen })
	out := make([]HeldNodes, len(vcs))
	for i, v := range vcs {
		for _, e := range h.by {
			switch {
			case frozen && v.NodeDeletion.Frozen:
				out[i].Frozen++
			case !frozen && v.NodeDeletion.MinAbsence > now.Sub(e.since):
				out[i].Grace++
			}
		}
	}
	return out
}

// vmSeen reports a lookup's answer saying a VM of its key exists: found,
// found twice, found outside the configured datacenters, or found while
// another vCenter could not answer. Any of them starts the grace over.
func vmSeen(res *Result, err error) bool {
	if res != nil {
		return true
	}
	var dup *DuplicateError
	var outside *OutsideError
	var lookup *LookupError
	return errors.As(err, &dup) || errors.As(err, &outside) || (errors.As(err, &lookup) && lookup.Found != nil)
}
