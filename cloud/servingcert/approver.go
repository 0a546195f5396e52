package servingcert

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"golang.org/x/time/rate"
	certificatesv1 "k8s.io/api/certificates/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	certinformers "k8s.io/client-go/informers/certificates/v1"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	certlisters "k8s.io/client-go/listers/certificates/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	cloudproviderapi "k8s.io/cloud-provider/api"
	"k8s.io/klog/v2"
)

// ControllerName is the approver's name in --controllers; it runs only
// when named there (off by default), and only on the leader.
const ControllerName = "kubelet-serving-cert-approver"

// ReasonVCenterUnavailable is the Event on a request left pending because
// a vCenter that could hold the Node's VM did not answer.
const ReasonVCenterUnavailable = "VCenterUnavailable"

// ErrHeldByAnotherNode is wrapped by VMs.Guest's error when the VM the
// Node names is held by another Node (an identity claim, see the cloud's
// NodeIdentityConflict): the request is denied.
var ErrHeldByAnotherNode = errors.New("the VM is held by another Node")

// VMs finds a Node's VM in the vCenters (the cloud provider does).
type VMs interface {
	// Guest is node's VM as vCenter reports it, looked up by node's
	// providerID: nil, nil only when every vCenter that could hold it
	// answered that it is not there; an error when one could not answer
	// (the request stays pending), wrapping ErrHeldByAnotherNode when
	// another Node holds the VM.
	Guest(ctx context.Context, node *v1.Node) (*Guest, error)
}

// Options tune an Approver; zero values are defaults.
type Options struct {
	// NodeGrace is how long a request for a Node that does not exist
	// (yet: a kubelet may ask before its Node is registered) stays
	// pending before it is denied; default 5 minutes.
	NodeGrace time.Duration
	// LookupTimeout bounds one lookup of a Node's VM; default 30 s.
	LookupTimeout time.Duration
	// Recheck is how often a request for a Node not initialized yet is
	// looked at again; default 10 s.
	Recheck time.Duration
}

// Approver decides kubelet-serving CertificateSigningRequests (see the
// package doc). New builds it; Run starts it; the context stops it.
type Approver struct {
	client   kubernetes.Interface
	csrs     certlisters.CertificateSigningRequestLister
	nodes    corelisters.NodeLister
	synced   []cache.InformerSynced
	vms      VMs
	recorder record.EventRecorder
	metrics  *Metrics
	opts     Options
	queue    workqueue.TypedRateLimitingInterface[string]
	now      func() time.Time
}

// New builds an approver over the controllers' shared informers; it adds
// its handlers at once (the caller starts the factory after).
func New(client kubernetes.Interface, csrs certinformers.CertificateSigningRequestInformer, nodes coreinformers.NodeInformer,
	vms VMs, recorder record.EventRecorder, m *Metrics, opts Options) (*Approver, error) {
	const op = "servingcert.New"
	opts.NodeGrace = cmp.Or(opts.NodeGrace, 5*time.Minute)
	opts.Recheck = cmp.Or(opts.Recheck, 10*time.Second)
	opts.LookupTimeout = cmp.Or(opts.LookupTimeout, 30*time.Second)
	// The library's controller limiter, its per-item backoff capped at
	// maxRetry.
	limiter := workqueue.NewTypedMaxOfRateLimiter(
		workqueue.NewTypedItemExponentialFailureRateLimiter[string](5*time.Millisecond, maxRetry),
		&workqueue.TypedBucketRateLimiter[string]{Limiter: rate.NewLimiter(rate.Limit(10), 100)},
	)
	a := &Approver{client: client, csrs: csrs.Lister(), nodes: nodes.Lister(), vms: vms, recorder: recorder, metrics: m, opts: opts,
		synced: []cache.InformerSynced{csrs.Informer().HasSynced, nodes.Informer().HasSynced}, now: time.Now,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(limiter,
			workqueue.TypedRateLimitingQueueConfig[string]{Name: ControllerName})}
	enqueue := func(obj any) {
		if csr, ok := obj.(*certificatesv1.CertificateSigningRequest); ok && csr.Spec.SignerName == certificatesv1.KubeletServingSignerName {
			a.queue.Add(csr.Name)
		}
	}
	if _, err := csrs.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, obj any) { enqueue(obj) },
	}); err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	return a, nil
}

// maxRetry caps the wait before a request left pending by a vCenter that
// did not answer is looked at again: a vCenter known down fails each
// lookup at once, and the library's default limiter (doubling up to
// 1000 s) would then keep it waiting about as long again as the outage
// lasted.
const maxRetry = 30 * time.Second

// Run decides requests with workers goroutines until ctx ends, and waits
// for them.
func (a *Approver) Run(ctx context.Context, workers int) {
	defer utilruntime.HandleCrashWithContext(ctx)
	log := klog.FromContext(ctx).WithValues("controller", ControllerName)
	ctx = klog.NewContext(ctx, log)
	context.AfterFunc(ctx, a.queue.ShutDown)
	if !cache.WaitForNamedCacheSyncWithContext(ctx, a.synced...) {
		return
	}
	log.Info("Approving kubelet serving certificates against vCenter", "workers", workers)
	var wg wait.Group
	for range max(workers, 1) {
		wg.StartWithContext(ctx, func(ctx context.Context) {
			for a.next(ctx) {
			}
		})
	}
	wg.Wait()
}

// next decides one queued request; false once the queue shuts down.
func (a *Approver) next(ctx context.Context) bool {
	name, quit := a.queue.Get()
	if quit {
		return false
	}
	defer a.queue.Done(name)
	retry, err := a.sync(ctx, name)
	switch {
	case err != nil:
		klog.FromContext(ctx).Error(err, "Kubelet serving certificate request not decided; retried", "csr", name)
		a.queue.AddRateLimited(name)
	case retry > 0:
		a.queue.Forget(name)
		a.queue.AddAfter(name, retry)
	default:
		a.queue.Forget(name)
	}
	return true
}

// sync decides the request name once: approved, denied, or left pending
// (retry > 0, or an error: looked at again later).
func (a *Approver) sync(ctx context.Context, name string) (retry time.Duration, err error) {
	const op = "servingcert.sync"
	csr, err := a.csrs.Get(name)
	if apierrors.IsNotFound(err) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("%s: %w", op, err)
	}
	if csr.Spec.SignerName != certificatesv1.KubeletServingSignerName || decided(csr) {
		return 0, nil
	}
	log := klog.FromContext(ctx).WithValues("csr", name, "requester", csr.Spec.Username)
	r, d := parse(csr)
	if d != nil {
		return 0, a.decide(ctx, csr, d)
	}
	node, err := a.nodes.Get(r.node)
	if apierrors.IsNotFound(err) {
		age := a.now().Sub(csr.CreationTimestamp.Time)
		if age < a.opts.NodeGrace {
			log.V(2).Info("Node not registered yet; the request waits for it", "node", r.node)
			return max(a.opts.NodeGrace-age, time.Second) / 5, nil
		}
		return 0, a.decide(ctx, csr, deny(ReasonNoNode, "Node %q does not exist (%s after the request)", r.node, a.opts.NodeGrace))
	}
	if err != nil {
		return 0, fmt.Errorf("%s: %w", op, err)
	}
	if uninitialized(node) {
		// Its identity is not settled until the cloud-node controller
		// initialized it (no other Node holds its VM): wait, however long.
		log.V(2).Info("Node not initialized yet; the request waits for it", "node", r.node)
		return a.opts.Recheck, nil
	}
	if !strings.HasPrefix(node.Spec.ProviderID, "vsphere://") {
		return 0, a.decide(ctx, csr, deny(ReasonNoVM, "Node %q has providerID %q, not a vSphere VM's", node.Name, node.Spec.ProviderID))
	}
	lctx, cancel := context.WithTimeout(ctx, a.opts.LookupTimeout)
	defer cancel()
	g, err := a.vms.Guest(lctx, node)
	switch {
	case errors.Is(err, ErrHeldByAnotherNode):
		return 0, a.decide(ctx, csr, deny(ReasonIdentity, "Node %q: %v", node.Name, err))
	case err != nil:
		a.metrics.pending.Inc()
		a.recorder.Eventf(csr, v1.EventTypeWarning, ReasonVCenterUnavailable,
			"Left pending: the VM of Node %s could not be looked up (%v); retried", node.Name, err)
		return 0, fmt.Errorf("%s: node %s: %w", op, node.Name, err)
	case g == nil:
		return 0, a.decide(ctx, csr, deny(ReasonNoVM, "Node %q's VM (%s) is in no vCenter: every one that could hold it answered", node.Name, node.Spec.ProviderID))
	}
	return 0, a.decide(ctx, csr, judge(r, g))
}

// decide approves csr when d is nil, else denies it with d's reason and
// message, and counts the decision.
func (a *Approver) decide(ctx context.Context, csr *certificatesv1.CertificateSigningRequest, d *denial) error {
	const op = "servingcert.decide"
	cond := certificatesv1.CertificateSigningRequestCondition{
		Type: certificatesv1.CertificateApproved, Status: v1.ConditionTrue, Reason: ReasonApproved,
		Message: "The Node's own kubelet asked for its VM's guest addresses and names, as vCenter reports them", LastUpdateTime: metav1.NewTime(a.now()),
	}
	decision := "approved"
	if d != nil {
		cond.Type, cond.Reason, cond.Message, decision = certificatesv1.CertificateDenied, d.reason, d.message, "denied"
	}
	csr = csr.DeepCopy()
	csr.Status.Conditions = append(csr.Status.Conditions, cond)
	if _, err := a.client.CertificatesV1().CertificateSigningRequests().UpdateApproval(ctx, csr.Name, csr, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("%s: %s %s: %w", op, decision, csr.Name, err)
	}
	a.metrics.decisions.WithLabelValues(decision, cond.Reason).Inc()
	klog.FromContext(ctx).Info("Kubelet serving certificate request "+decision, "csr", csr.Name, "requester", csr.Spec.Username, "reason", cond.Reason, "message", cond.Message)
	return nil
}

// decided reports whether csr was approved or denied already (by anyone):
// a request is decided once.
func decided(csr *certificatesv1.CertificateSigningRequest) bool {
	for _, c := range csr.Status.Conditions {
		if c.Type == certificatesv1.CertificateApproved || c.Type == certificatesv1.CertificateDenied || c.Type == certificatesv1.CertificateFailed {
			return true
		}
	}
	return len(csr.Status.Certificate) > 0
}

// uninitialized reports whether node still carries the taint the cloud-node
// controller removes once it filled the Node in.
func uninitialized(node *v1.Node) bool {
	return slices.ContainsFunc(node.Spec.Taints, func(t v1.Taint) bool {
		return t.Key == cloudproviderapi.TaintExternalCloudProvider
	})
}
