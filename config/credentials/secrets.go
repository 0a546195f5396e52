package credentials

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
)

// Secrets serves credentials from Kubernetes Secrets through one informer
// per referenced Secret, each limited to that Secret by a field selector so
// the CCM needs no cluster-wide (or even namespace-wide) read of Secrets.
// Watch makes the set of watched Secrets the config's.
type Secrets struct {
	client   kubernetes.Interface
	onChange func(namespace, name string)

	mu       sync.Mutex
	closed   bool
	watching map[SecretRef]*watchedSecret
	warned   map[SecretRef]string // resourceVersion whose ignored keys were logged
}

// SecretRef names a Secret.
type SecretRef struct{ Namespace, Name string }

func (r SecretRef) String() string { return r.Namespace + "/" + r.Name }

// watchedSecret is one Secret's informer and what stops it.
type watchedSecret struct {
	informer cache.SharedIndexInformer
	factory  informers.SharedInformerFactory
	stop     chan struct{}
}

// NewSecrets returns a Secret reader; its owner calls Close. onChange,
// when set, is called after a watched Secret is added, updated or deleted.
func NewSecrets(client kubernetes.Interface, onChange func(namespace, name string)) *Secrets {
	return &Secrets{client: client, onChange: onChange, watching: map[SecretRef]*watchedSecret{}, warned: map[SecretRef]string{}}
}

// Close stops every informer and waits for them; later reads fail.
func (s *Secrets) Close() {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.Watch(nil)
}

// Source returns the credentials of server held in Secret namespace/name.
func (s *Secrets) Source(namespace, name, server string) Source {
	return &secretSource{secrets: s, ref: SecretRef{Namespace: namespace, Name: name}, server: server}
}

// Watch starts the informers of the Secrets in keep that have none, and
// stops (and waits for) those of every other Secret: a Secret the config
// names is watched from then on, so its changes are seen before the
// first login; one it no longer names costs nothing. A later Source of a
// released Secret starts a new informer.
func (s *Secrets) Watch(keep []SecretRef) {
	for _, ref := range keep {
		_, _ = s.informer(ref)
	}
	s.mu.Lock()
	var released []*watchedSecret
	for ref, w := range s.watching {
		if !slices.Contains(keep, ref) {
			close(w.stop)
			released = append(released, w)
			delete(s.watching, ref)
			delete(s.warned, ref)
		}
	}
	s.mu.Unlock()
	for _, w := range released {
		w.factory.Shutdown()
	}
}

// Watching lists the Secrets with a running informer.
func (s *Secrets) Watching() []SecretRef {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := slices.Collect(maps.Keys(s.watching))
	slices.SortFunc(out, func(a, b SecretRef) int { return strings.Compare(a.String(), b.String()) })
	return out
}

var errStopped = errors.New("the Secret reader has stopped")

func (s *Secrets) informer(ref SecretRef) (cache.SharedIndexInformer, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, errStopped
	}
	if w, ok := s.watching[ref]; ok {
		return w.informer, nil
	}
	factory := informers.NewSharedInformerFactoryWithOptions(s.client, 10*time.Minute,
		informers.WithNamespace(ref.Namespace),
		informers.WithTweakListOptions(func(o *v1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", ref.Name).String()
		}))
	inf := factory.Core().V1().Secrets().Informer()
	if s.onChange != nil {
		notify := func(any) { s.onChange(ref.Namespace, ref.Name) }
		_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    notify,
			UpdateFunc: func(_, obj any) { notify(obj) },
			DeleteFunc: notify,
		})
	}
	w := &watchedSecret{informer: inf, factory: factory, stop: make(chan struct{})}
	factory.Start(w.stop)
	s.watching[ref] = w
	return inf, nil
}

type secretSource struct {
	secrets *Secrets
	ref     SecretRef
	server  string
}

func (s *secretSource) String() string { return "secret " + s.ref.String() }

func (s *secretSource) Get(ctx context.Context) (Credentials, error) {
	const op = "credentials.Secret.Get"
	inf, err := s.secrets.informer(s.ref)
	if err != nil {
		return Credentials{}, fmt.Errorf("%s: %s: %w", op, s, err)
	}
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		return Credentials{}, fmt.Errorf("%s: %s: not synced: %w", op, s, ctx.Err())
	}
	obj, ok, err := inf.GetStore().GetByKey(s.ref.String())
	if err != nil {
		return Credentials{}, fmt.Errorf("%s: %s: %w", op, s, err)
	}
	if !ok {
		return Credentials{}, fmt.Errorf("%s: %s not found: %w", op, s, ErrNoCredentials)
	}
	secret := obj.(*corev1.Secret)
	values := make(map[string]value, len(secret.Data))
	for k, v := range secret.Data {
		values[k] = value{data: v}
	}
	l := parseLayout(values, s.String())
	s.secrets.warnIgnored(s.ref, secret.ResourceVersion, l)
	c, err := l.lookup(s.server)
	if err != nil {
		return Credentials{}, fmt.Errorf("%s: %w", op, err)
	}
	return c, nil
}

// warnIgnored logs the keys of a Secret that CPI's layout does not
// understand, once per version of the Secret (CPI logs each as an error
// and otherwise ignores it; see layout.go).
func (s *Secrets) warnIgnored(ref SecretRef, version string, l *layout) {
	if len(l.notUnderstood) == 0 {
		return
	}
	s.mu.Lock()
	seen := s.warned[ref] == version
	s.warned[ref] = version
	s.mu.Unlock()
	if !seen {
		klog.Background().Info("Secret keys ignored: not part of CPI's credential layout", "secret", ref.String(), "keys", l.notUnderstood)
	}
}
