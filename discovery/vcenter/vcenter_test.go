package vcenter

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sony/gobreaker/v2"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/backends"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/test/backendtest"
)

type noObserver struct{}

func (noObserver) Call(string, string, time.Duration, error) {}
func (noObserver) BreakerState(string, gobreaker.State)      {}

func member(b backends.Backend) *Member {
	return New(Target{Name: "vc1", Server: "vc1:443", Backend: b, RequestTimeout: time.Hour, ConsecutiveFailures: 5, OpenTimeout: time.Minute},
		Options{Observer: noObserver{}, ProbeInterval: time.Millisecond, ConnectWait: 250 * time.Millisecond})
}

func find(m *Member) error {
	_, err := Call(context.Background(), m, "find", func(ctx context.Context, b backends.Backend) ([]backends.VM, error) {
		return b.Find(ctx, backends.Query{By: backends.ByName, Values: []string{"x"}})
	})
	return err
}

// The probe of a vCenter known down is its member's: Close ends one that
// hangs (its request timeout an hour away) and waits for it, and none
// starts after. A successor goes on with the same probe.
func TestCloseEndsTheProbeAndWaits(t *testing.T) {
	b := backendtest.New()
	b.SetReachability(backends.ConnDown, errors.New("connection refused"))
	b.Hang(true)
	m := member(b)
	if err := find(m); !errors.Is(err, ErrVCenterDown) {
		t.Fatalf("err = %v, want ErrVCenterDown", err)
	}
	for b.Probes() == 0 {
		time.Sleep(time.Millisecond)
	}
	n := m.Successor(m.Target)
	time.Sleep(5 * time.Millisecond)
	if err := find(n); !errors.Is(err, ErrVCenterDown) {
		t.Fatalf("successor: err = %v, want ErrVCenterDown", err)
	}
	if got := b.Probes(); got != 1 {
		t.Fatalf("%d probes while one hangs, also through a successor; want 1", got)
	}
	done := make(chan struct{})
	go func() { n.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not end the hanging probe")
	}
	time.Sleep(5 * time.Millisecond)
	_ = find(m)
	_ = find(n)
	if got := b.Probes(); got != 1 {
		t.Fatalf("%d probes after Close; want still 1", got)
	}
}
