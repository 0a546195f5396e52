// Package discovery finds the VM behind a Node across every configured
// vCenter and datacenter. Each vCenter is asked in parallel, under its own
// request deadline and behind its own circuit breaker. The answer is exactly
// one of: found (one VM), confirmed absent (every vCenter answered and none
// has it), or an error naming each vCenter that could not answer. Absence is
// never inferred from an error, a timeout, an open breaker or a stale cache.
//
// # When a Node is deleted
//
// InstanceExists returns false (and the lifecycle controller deletes the
// Node) only through [Discoverer.Exists], the one place absence is
// concluded: every configured vCenter answered and none has the VM, and
// every guard it lists agrees. Anything else is an error, which the
// controllers retry: a vCenter that refuses, times out, fails to log in,
// is known down, is still connecting, or has an open breaker (a lookup
// that found nothing waits for every answer); a VM that exists only in a
// datacenter the config leaves out. So no Node is deleted while a vCenter
// or datacenter removed from the config is remembered (below; shorten
// retiredVCenterRetention, or delete the entry, to end it sooner), nor
// before that record has been read at start.
//
// The deletion policy (config nodeDeletion, deletion.go) applies last:
// while a vCenter that could hold the VM is frozen, or until the answers
// of absence span the longest minAbsence of those vCenters (default 30s,
// counted from the first absence since a VM of the Node's key was last
// seen: any answer that one exists starts it over, an error does not),
// absence is a DeletionHeldError, which cloud records as a
// NodeDeletionHeld Event. What is held is kept in memory by the Node's
// lookup key: a restart starts every span over, which only delays.
//
// InstanceShutdown is true only for a VM found powered off.
//
// # A vCenter is what it is, not its name
//
// Its identity is its server and port and, once it has answered, its
// instance UUID (ServiceContent.About.InstanceUuid). The record, the
// remembered locations, the duplicate index and the labels all go by it: a
// name repointed to another server (a migration, a typo naming the DR site),
// or an address answering as another appliance, retires the old vCenter
// exactly as a removal does, and a location remembered there is never read
// at its old reference on the new one; a rename of the same server retires
// nothing.
//
// # Several entries of one vCenter
//
// A config may name one server in several entries (CPI's tenants, each
// with its own credentials and datacenters). Each entry is its own
// target: its own backend and session, breaker and datacenters. A VM seen
// through two entries of one vCenter (one server, and no two instance
// UUIDs that differ) is one VM, never a duplicate, and never "also
// outside the configured datacenters": it is attributed to the first
// entry in config order (by name) that answered with it and serves its
// datacenter — the entry named by its vsphere-federated-ccm.io/vcenter
// label, whose login reads its tags. A remembered location is re-read
// through that first entry too; when it cannot answer, and another entry
// of that vCenter serves the datacenter, every entry is searched again. A
// UUID held by several entries of one vCenter is no twin; one held by two
// servers still is. Absence still needs every entry's answer: an entry
// whose own login is refused is an error, never absence, even when another
// entry of the same vCenter and datacenter answered.
//
// # Removed vCenters are remembered
//
// The CCM records the vCenters and datacenters it serves in the ConfigMap
// vsphere-federated-ccm-state (in its Pod's namespace, key vcenters.json).
// One that leaves the config — by an edit, or while the CCM was down — is
// retired for global.retiredVCenterRetention (default 168h); the record says
// since and until when. To forget one sooner, delete its entry from
// "retired". What the CCM learns (an edit, an instance UUID) is kept in
// memory and merged into every record it reads until a write of it
// succeeds: a write that fails never loses a retirement. The location labels
// are set at initialization and added to initialized Nodes that lack them
// (Nodes initialized by CPI get them at the first status pass); a name that
// is no valid label value (an INI section named by an IPv6 server, a name
// over 63 characters) is written as sha256-<40 hex digits> of it.
//
// # A dead vCenter costs the others nothing
//
// Each backend knows when its vCenter is down: its last connection-level
// event (connect, TLS handshake, login, keep-alive ping, the inventory
// watch's poll) failed. Lookups then answer at once for it ("vCenter known
// down"), and a background probe (at most one a second) notices when it is
// back. A lookup that found the VM does not wait for vCenters that are not
// known up (still connecting, or down); one that found nothing waits for a
// vCenter still connecting for the first time only while its connect
// progresses — each step beyond what the attempt reached, or any answer,
// within its stall window (250 ms, or 4 of its slowest round trips so far:
// a vCenter across a WAN is waited for) — and at most half its request
// timeout after a lookup first met it connecting. That wait is shared: a
// vCenter judged stalled is not waited for again until it answers or gets
// further, and a new dial, TCP connect or TLS handshake repeating what an
// attempt already reached is no progress (a black hole that accepts TCP
// and never finishes TLS, redialled every 5 s, looked alive before).
// Absence still needs every answer.
//
// What is known of one configured vCenter entry — its backend, breaker,
// request deadline, first connect and the probe of it while it is down —
// is its member's (package vcenter: a Member, which owns the probe's
// goroutine and stops it at Close). This package is the policy above it:
// which vCenters a lookup asks, how long it waits, and what the answers
// mean.
//
// Duplicates stay visible: the inventories' BIOS UUIDs are compared across
// vCenters every second, a twin gets a DuplicateVMUUID Event on its Nodes as
// soon as it appears, and a lookup that did not wait for the vCenter holding
// a twin is a duplicate error. A VM found while another vCenter cannot
// answer is served unless that vCenter has its inventory off (inventory:
// false) and has answered since it was configured: its UUIDs are never
// indexed, it could hold a twin, so such lookups fail while it is down. A
// vCenter whose inventory is on keeps its last indexed UUIDs while down; one
// never indexed (down since the CCM started, or down before its first scan)
// holds nobody up, and the twin check is blind to it until it is (/vcenters
// shows twinsIndexed).
//
// Measured (TestColdStartWithDeadVCenter, 30 Nodes, one of three vCenters
// black-holed, refusing or hanging in the TLS handshake from the CCM's
// start): the healthy vCenters' Nodes initialized within 0.06–0.19 s of the
// all-healthy time at one worker and at 0.8–1.6× of it at eight (before: 26×
// and 11–21×). In-process (cloud's TestDeadVCenterCostsTheOthersNothing,
// lookups starting 5 s into the dead vCenter's connect, when its first
// handshake times out and is redialled): healthy Nodes in 1 ms as with
// every vCenter up, at 1 and 8 workers (5.0 s before).
package discovery
