package credentials

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// Secrets serves credentials from Kubernetes Secrets through one informer
// per referenced Secret, each limited to that Secret by a field selector so
// the CCM needs no cluster-wide (or even namespace-wide) read of Secrets.
type Secrets struct {
	client   kubernetes.Interface
	stop     <-chan struct{}
	onChange func(namespace, name string)

	mu       sync.Mutex
	watching map[string]cache.SharedIndexInformer // namespace/name
}

// NewSecrets returns a Secret reader; informers stop when stop closes.
// onChange, when set, is called after a watched Secret is added, updated or
// deleted.
func NewSecrets(client kubernetes.Interface, stop <-chan struct{}, onChange func(namespace, name string)) *Secrets {
	return &Secrets{client: client, stop: stop, onChange: onChange, watching: map[string]cache.SharedIndexInformer{}}
}

// Source returns the credentials of server held in Secret namespace/name.
func (s *Secrets) Source(namespace, name, server string) Source {
	return &secretSource{secrets: s, namespace: namespace, name: name, server: server}
}

func (s *Secrets) informer(namespace, name string) cache.SharedIndexInformer {
	key := namespace + "/" + name
	s.mu.Lock()
	defer s.mu.Unlock()
	if inf, ok := s.watching[key]; ok {
		return inf
	}
	factory := informers.NewSharedInformerFactoryWithOptions(s.client, 10*time.Minute,
		informers.WithNamespace(namespace),
		informers.WithTweakListOptions(func(o *v1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", name).String()
		}))
	inf := factory.Core().V1().Secrets().Informer()
	if s.onChange != nil {
		notify := func(any) { s.onChange(namespace, name) }
		_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    notify,
			UpdateFunc: func(_, obj any) { notify(obj) },
			DeleteFunc: notify,
		})
	}
	factory.Start(s.stop)
	s.watching[key] = inf
	return inf
}

type secretSource struct {
	secrets                 *Secrets
	namespace, name, server string
}

func (s *secretSource) String() string { return "secret " + s.namespace + "/" + s.name }

func (s *secretSource) Get(ctx context.Context) (Credentials, error) {
	const op = "credentials.Secret.Get"
	inf := s.secrets.informer(s.namespace, s.name)
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		return Credentials{}, fmt.Errorf("%s: %s: not synced: %w", op, s, ctx.Err())
	}
	obj, ok, err := inf.GetStore().GetByKey(s.namespace + "/" + s.name)
	if err != nil {
		return Credentials{}, fmt.Errorf("%s: %s: %w", op, s, err)
	}
	if !ok {
		return Credentials{}, fmt.Errorf("%s: %s not found", op, s)
	}
	secret := obj.(*corev1.Secret)
	return fromValues(string(secret.Data[UsernameKey(s.server)]), string(secret.Data[PasswordKey(s.server)]), s.String(), s.server)
}
