package cloud

// The leader's logins, shared with the standbys through the state
// ConfigMap, so that every replica together sends vCenter no more refused
// logins than one process does (credentials.Ledger): vSphere SSO locks an
// account out after 5 failed logins in 180 s, and a replica per
// control-plane node each sending a stale password would reach it.

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config/credentials"
)

// loginsKey is the state ConfigMap's key holding the leader's logins.
const loginsKey = "logins"

// loginRecord is what the leader writes: which Lease holder wrote it, and
// each account's last logins (times and counts only: never a value, nor a
// digest of one).
type loginRecord struct {
	Leader   string                  `json:"leader"`
	Accounts map[string]loginAccount `json:"accounts,omitempty"`
}

type loginAccount struct {
	Accepted time.Time `json:"accepted,omitzero"`
	Refused  time.Time `json:"refused,omitzero"`
	Refusals int       `json:"refusals,omitempty"`
}

// logins publishes the leader's ledger and, on a standby, reads the
// leader's: it is the standby ledger's credentials.Backing.
type logins struct {
	client kubernetes.Interface
	object types.NamespacedName // the state ConfigMap
	lease  types.NamespacedName // the leader-election Lease
	ledger *credentials.Ledger
	// readEvery is loginsReadEvery (shorter in tests).
	readEvery time.Duration

	mu   sync.Mutex
	read time.Time // when the record and the Lease were read last
	err  error     // why they could not be, then
	// holder is the Lease's holder at that read, rec the record.
	holder string
	rec    loginRecord
	// seen is when this replica first saw each account's current
	// acceptance and refusal (by its own clock: the leader's may differ).
	seen map[string]loginSeen
	// dirty is signalled when the leader's ledger changed.
	dirty chan struct{}
}

type loginSeen struct {
	accepted, refused         time.Time // the values seen
	acceptedSeen, refusedSeen time.Time // when first seen
}

var _ credentials.Backing = (*logins)(nil)

// loginsReadEvery bounds how often a standby reads the record: once per
// login attempt at most, and these come every second while a vCenter is
// down.
const loginsReadEvery = 2 * time.Second

func newLogins(client kubernetes.Interface, object, lease types.NamespacedName, ledger *credentials.Ledger) *logins {
	return &logins{client: client, object: object, lease: lease, ledger: ledger, readEvery: loginsReadEvery,
		seen: map[string]loginSeen{}, dirty: make(chan struct{}, 1)}
}

// Backs implements credentials.Backing.
func (l *logins) Backs(ctx context.Context, a credentials.Account, since time.Time) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.refreshLocked(ctx)
	if l.err != nil {
		return l.err
	}
	if l.holder == "" || l.rec.Leader != l.holder {
		return fmt.Errorf("the leader (Lease %s held by %q) has not published its logins in configmap %s yet", l.lease, l.holder, l.object)
	}
	acc, ok := l.rec.Accounts[a.String()]
	seen := l.seen[a.String()]
	switch {
	case !ok || acc.Accepted.IsZero() && acc.Refused.IsZero():
		return fmt.Errorf("the leader has not logged in as %s yet", a)
	case acc.Refused.After(acc.Accepted):
		return fmt.Errorf("vCenter refused the leader's last login as %s (%d in a row, last at %s)", a, acc.Refusals, acc.Refused.UTC().Format(time.RFC3339))
	case seen.acceptedSeen.Before(since):
		return fmt.Errorf("the leader's last login as %s predates these credentials", a)
	}
	return nil
}

// Refusal implements credentials.Backing.
func (l *logins) Refusal(a credentials.Account) (time.Time, int, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	acc, ok := l.rec.Accounts[a.String()]
	if !ok || !acc.Refused.After(acc.Accepted) {
		return time.Time{}, 0, false
	}
	return l.seen[a.String()].refusedSeen, acc.Refusals, true
}

// refreshLocked reads the Lease and the record again when the last read
// is older than loginsReadEvery; it reports whether an account's login by
// the leader succeeded anew since the last read.
func (l *logins) refreshLocked(ctx context.Context) (anew bool) {
	now := time.Now()
	if !l.read.IsZero() && now.Sub(l.read) < l.readEvery {
		return false
	}
	l.read = now
	ctx, cancel := context.WithTimeout(ctx, loginsReadEvery)
	defer cancel()
	holder, err := l.holderOf(ctx)
	var rec loginRecord
	if err == nil {
		rec, _, err = l.load(ctx)
	}
	if l.err = err; err != nil {
		return false
	}
	l.holder, l.rec = holder, rec
	for k, acc := range rec.Accounts {
		s := l.seen[k]
		if !acc.Accepted.Equal(s.accepted) {
			s.accepted, s.acceptedSeen = acc.Accepted, now
			anew = anew || !acc.Accepted.IsZero()
		}
		if !acc.Refused.Equal(s.refused) {
			s.refused, s.refusedSeen = acc.Refused, now
		}
		l.seen[k] = s
	}
	return anew
}

// holderOf is the leader-election Lease's holder; "" when there is none.
func (l *logins) holderOf(ctx context.Context) (string, error) {
	lease, err := l.client.CoordinationV1().Leases(l.lease.Namespace).Get(ctx, l.lease.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("reading the leader's Lease %s: %w", l.lease, err)
	}
	return ptr.Deref(lease.Spec.HolderIdentity, ""), nil
}

// load reads the record and the ConfigMap holding it (nil: none yet).
func (l *logins) load(ctx context.Context) (loginRecord, *v1.ConfigMap, error) {
	var rec loginRecord
	cm, err := l.client.CoreV1().ConfigMaps(l.object.Namespace).Get(ctx, l.object.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return rec, nil, nil
	}
	if err != nil {
		return rec, nil, fmt.Errorf("reading configmap %s: %w", l.object, err)
	}
	if data := cm.Data[loginsKey]; data != "" {
		if err := json.Unmarshal([]byte(data), &rec); err != nil {
			return rec, nil, fmt.Errorf("configmap %s key %s: %w", l.object, loginsKey, err)
		}
	}
	return rec, cm, nil
}

// follow reads the leader's record every readEvery while this replica is
// a standby, and calls backed when the leader's login of an account
// succeeded anew (the credentials are read again: a backend waiting to
// log in does so now instead of at its next retry), until ctx ends or
// this replica leads.
func (l *logins) follow(ctx context.Context, backed func()) {
	t := time.NewTicker(l.readEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if l.ledger.Leading() {
			return
		}
		l.mu.Lock()
		anew := l.refreshLocked(ctx)
		l.mu.Unlock()
		if anew {
			backed()
		}
	}
}

// changed is the leader ledger's onChange: the record is written soon.
func (l *logins) changed() { signal(l.dirty) }

// publish writes the leader's record until ctx ends: at once (this
// replica now holds the Lease: the standbys wait for its word), then
// after every change of its ledger. A failed write is retried.
func (l *logins) publish(ctx context.Context) {
	log := klog.FromContext(ctx).WithValues("configmap", l.object, "key", loginsKey)
	l.changed()
	retryLoop(ctx, l.dirty, 5*time.Second, func() bool {
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		if err := l.write(wctx); err != nil && ctx.Err() == nil {
			log.Error(err, "Publishing the leader's vCenter logins failed; standbys log in only once it succeeds; retried")
			return false
		}
		return true
	})
}

// write stores the ledger's accounts under this replica's name as the
// Lease holds it.
func (l *logins) write(ctx context.Context) error {
	holder, err := l.holderOf(ctx)
	if err != nil {
		return err
	}
	rec := loginRecord{Leader: holder, Accounts: map[string]loginAccount{}}
	for a, st := range l.ledger.Accounts() {
		rec.Accounts[a.String()] = loginAccount(st)
	}
	data, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		_, cm, err := l.load(ctx)
		if err != nil {
			return err
		}
		if cm != nil && cm.Data[loginsKey] == string(data) {
			return nil
		}
		// The history's writer adds its keys to a ConfigMap created here.
		err = writeState(ctx, l.client, l.object, cm, nil, func(d map[string]string) { d[loginsKey] = string(data) })
		if apierrors.IsAlreadyExists(err) {
			return apierrors.NewConflict(v1.Resource("configmaps"), l.object.Name, err)
		}
		return err
	})
}
