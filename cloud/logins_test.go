package cloud

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config/credentials"
)

var (
	testState = types.NamespacedName{Namespace: "kube-system", Name: DefaultHistoryObject}
	testLease = types.NamespacedName{Namespace: "kube-system", Name: "cloud-controller-manager"}
)

func holdLease(t *testing.T, client kubernetes.Interface, holder string) {
	t.Helper()
	leases := client.CoordinationV1().Leases(testLease.Namespace)
	l, err := leases.Get(t.Context(), testLease.Name, metav1.GetOptions{})
	if err != nil {
		l = &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: testLease.Namespace, Name: testLease.Name}}
		l.Spec.HolderIdentity = &holder
		if _, err := leases.Create(t.Context(), l, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		return
	}
	l.Spec.HolderIdentity = &holder
	if _, err := leases.Update(t.Context(), l, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// loginVCenter accepts one password and counts, per replica, the logins
// it refused, with their times.
type loginVCenter struct {
	mu       sync.Mutex
	password string
	refused  map[string][]time.Time
	accepted map[string]int
}

func (v *loginVCenter) try(replica string) func(credentials.Served) error {
	return func(s credentials.Served) error {
		v.mu.Lock()
		defer v.mu.Unlock()
		if s.Password.Reveal() != v.password {
			v.refused[replica] = append(v.refused[replica], time.Now())
			return fmt.Errorf("login: %w", credentials.ErrRejected)
		}
		v.accepted[replica]++
		return nil
	}
}

// Three replicas, a stale password: only the leader's logins reach the
// vCenter, on the leader's schedule; once the password is right, the
// standbys follow the leader in.
func TestStandbysSendOnlyWhatTheLeaderLoggedInWith(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	client := fake.NewClientset()
	holdLease(t, client, "r1_abc")
	retry := credentials.Retry{After: 300 * time.Millisecond, Max: 2400 * time.Millisecond}
	cfg := &config.Config{}
	vcfg := config.VCenter{Name: "vc", Server: "vc.example.com", User: "ccm", Password: "stale"}
	vc := &loginVCenter{password: "right", refused: map[string][]time.Time{}, accepted: map[string]int{}}

	type replica struct {
		name   string
		ledger *credentials.Ledger
		logins *logins
	}
	var replicas []replica
	for _, name := range []string{"r1", "r2", "r3"} {
		r := replica{name: name, ledger: credentials.NewLedger()}
		r.logins = newLogins(client, testState, testLease, r.ledger)
		r.logins.readEvery = 20 * time.Millisecond
		r.ledger.Follow(r.logins)
		replicas = append(replicas, r)
	}
	// r1 takes the lease.
	var publishing sync.WaitGroup
	replicas[0].ledger.Lead(replicas[0].logins.changed)
	publishing.Go(func() { replicas[0].logins.publish(ctx) })
	defer publishing.Wait()
	defer cancel()

	chain := func(r replica, password string) *credentials.Chain {
		v := vcfg
		v.Password = config.Password(password)
		return credentials.ForVCenter(cfg, v, nil, r.ledger).WithRetry(retry)
	}
	loginAll := func(password string, until func() bool, d time.Duration) {
		t.Helper()
		chains := make([]*credentials.Chain, len(replicas))
		for i, r := range replicas {
			chains[i] = chain(r, password)
		}
		for end := time.Now().Add(d); time.Now().Before(end) && !until(); time.Sleep(10 * time.Millisecond) {
			for i, r := range replicas {
				_, _ = chains[i].Login(ctx, vc.try(r.name))
			}
		}
	}
	start := time.Now()
	loginAll("stale", func() bool { return false }, 3*time.Second)

	vc.mu.Lock()
	leader, standbys := vc.refused["r1"], len(vc.refused["r2"])+len(vc.refused["r3"])
	var offsets []string
	for _, at := range leader {
		offsets = append(offsets, at.Sub(start).Round(10*time.Millisecond).String())
	}
	vc.mu.Unlock()
	if standbys != 0 {
		t.Fatalf("standbys sent the stale password %d times; want none (the leader's logins were refused)", standbys)
	}
	window := retry.After * 3 / 2
	for i, at := range leader {
		n := 0
		for _, b := range leader[i:] {
			if b.Sub(at) < window {
				n++
			}
		}
		if n > 2 {
			t.Fatalf("%d refusals within %s from %s (all: %v)", n, window, offsets[i], offsets)
		}
	}
	// 0, 0.3, 0.9, 2.1 s (doubling): 4 in 3 s, give or take one.
	if len(leader) < 3 || len(leader) > 5 {
		t.Fatalf("leader refused at %v; want about 4 (its schedule)", offsets)
	}
	rec, _, err := replicas[1].logins.load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	acct := credentials.AccountOf("vc.example.com", credentials.Credentials{User: "ccm"}).String()
	if rec.Leader != "r1_abc" || rec.Accounts[acct].Refusals != len(leader) || !rec.Accounts[acct].Accepted.IsZero() {
		t.Fatalf("record %+v; want the leader r1_abc, %d refusals of %s", rec, len(leader), acct)
	}
	if err := replicas[1].logins.Backs(t.Context(), credentials.AccountOf("vc.example.com", credentials.Credentials{User: "ccm"}), time.Time{}); err == nil ||
		!strings.Contains(err.Error(), "refused the leader's last login") {
		t.Fatalf("standby's Backs = %v; want the leader's refusal named", err)
	}

	// The Secret now holds the right password: the leader logs in with it
	// at once, the standbys once they read its record.
	vc.mu.Lock()
	vc.password = "right"
	vc.mu.Unlock()
	all := func() bool {
		vc.mu.Lock()
		defer vc.mu.Unlock()
		return vc.accepted["r1"] > 0 && vc.accepted["r2"] > 0 && vc.accepted["r3"] > 0
	}
	fixed := time.Now()
	loginAll("right", all, 5*time.Second)
	if !all() {
		t.Fatalf("accepted logins %v 5 s after the fix; want every replica's", vc.accepted)
	}
	t.Logf("leader refused at %v; every replica logged in %s after the fix", offsets, time.Since(fixed).Round(time.Millisecond))
}

// A standby follows only the record of the Lease's current holder: one
// written by an earlier leader (before a restart of every replica) backs
// nothing.
func TestStandbyFollowsOnlyTheCurrentLeader(t *testing.T) {
	client := fake.NewClientset()
	ledger := credentials.NewLedger()
	lg := newLogins(client, testState, testLease, ledger)
	lg.readEvery = 0
	acct := credentials.AccountOf("vc", credentials.Credentials{User: "ccm"})

	if err := lg.Backs(t.Context(), acct, time.Time{}); err == nil || !strings.Contains(err.Error(), `held by ""`) {
		t.Fatalf("no Lease: %v; want no leader named", err)
	}
	// An old leader wrote the record and logged in.
	holdLease(t, client, "old")
	old := credentials.NewLedger()
	oldPub := newLogins(client, testState, testLease, old)
	old.Lead(nil)
	c := credentials.ForVCenter(&config.Config{}, config.VCenter{Server: "vc", User: "ccm", Password: "pw"}, nil, old)
	if _, err := c.Login(t.Context(), func(credentials.Served) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if err := oldPub.write(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := lg.Backs(t.Context(), acct, time.Time{}); err != nil {
		t.Fatalf("the current leader's login: %v; want backed", err)
	}
	if err := lg.Backs(t.Context(), acct, time.Now().Add(time.Hour)); err == nil || !strings.Contains(err.Error(), "predates") {
		t.Fatalf("credentials read after the leader's login: %v; want not backed", err)
	}
	// Every replica restarted: a new holder, which has written nothing.
	holdLease(t, client, "new")
	if err := lg.Backs(t.Context(), acct, time.Time{}); err == nil || !strings.Contains(err.Error(), `held by "new"`) {
		t.Fatalf("the record of an earlier leader: %v; want not backed, the new holder named", err)
	}
	other := credentials.AccountOf("vc", credentials.Credentials{User: "someone"})
	holdLease(t, client, "old")
	if err := lg.Backs(t.Context(), other, time.Time{}); err == nil || !strings.Contains(err.Error(), "has not logged in as") {
		t.Fatalf("an account the leader never used: %v", err)
	}
	// The state ConfigMap's other keys are kept.
	cm, err := client.CoreV1().ConfigMaps(testState.Namespace).Get(t.Context(), testState.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm.Data[historyKey] = `{"kept":true}`
	if _, err := client.CoreV1().ConfigMaps(testState.Namespace).Update(t.Context(), cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	holdLease(t, client, "newer")
	if err := oldPub.write(t.Context()); err != nil {
		t.Fatal(err)
	}
	cm, _ = client.CoreV1().ConfigMaps(testState.Namespace).Get(t.Context(), testState.Name, metav1.GetOptions{})
	if cm.Data[historyKey] != `{"kept":true}` || !strings.Contains(cm.Data[loginsKey], `"leader":"newer"`) {
		t.Fatalf("configmap data %v; want the history kept and the logins rewritten", cm.Data)
	}
	if strings.Contains(cm.Data[loginsKey], "pw") || strings.Contains(cm.Data[loginsKey], "ccm") {
		t.Fatalf("logins %s name a value", cm.Data[loginsKey])
	}
	if errors.Is(lg.Backs(t.Context(), acct, time.Time{}), credentials.ErrDeferred) {
		t.Fatal("Backs wraps ErrDeferred: the chain does")
	}
}

// A standby is told when the leader's login succeeds anew, so its backends
// log in then rather than at their next retry; it stops following once it
// leads.
func TestStandbyIsToldOfTheLeadersLogin(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	client := fake.NewClientset()
	holdLease(t, client, "leader")
	ledger := credentials.NewLedger()
	lg := newLogins(client, testState, testLease, ledger)
	lg.readEvery = 10 * time.Millisecond
	ledger.Follow(lg)
	told := make(chan struct{}, 10)
	done := make(chan struct{})
	go func() { defer close(done); lg.follow(ctx, func() { told <- struct{}{} }) }()

	leader := credentials.NewLedger()
	pub := newLogins(client, testState, testLease, leader)
	c := credentials.ForVCenter(&config.Config{}, config.VCenter{Server: "vc", User: "ccm", Password: "pw"}, nil, leader)
	login := func() {
		if _, err := c.Login(ctx, func(credentials.Served) error { return nil }); err != nil {
			t.Fatal(err)
		}
		if err := pub.write(ctx); err != nil {
			t.Fatal(err)
		}
	}
	login()
	select {
	case <-told:
	case <-time.After(5 * time.Second):
		t.Fatal("not told of the leader's login within 5 s")
	}
	time.Sleep(50 * time.Millisecond) // several reads, no new login
	if len(told) != 0 {
		t.Fatalf("told %d more times with no new login", len(told))
	}
	time.Sleep(time.Millisecond)
	login() // a later login: a new time
	select {
	case <-told:
	case <-time.After(5 * time.Second):
		t.Fatal("not told of the leader's second login")
	}
	ledger.Lead(nil)
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("still following 5 s after leading")
	}
}
