package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/pflag"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
	cloudprovider "k8s.io/cloud-provider"
	cloudproviderapi "k8s.io/cloud-provider/api"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/cloud"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/cloud/metadata"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/cloud/nodes"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/discovery"
)

const diagnoseUsageText = `Usage:
  vsphere-federated-ccm diagnose node NAME [flags]   one Node: its keys, each vCenter's answer, what the CCM would set, why it is tainted
  vsphere-federated-ccm diagnose nodes [flags]       one line per Node still tainted or whose lookup fails

Runs the CCM's own lookup once, with its config and credentials, and writes
nothing: no Node patch, no Event, no ConfigMap, nothing in vCenter. Exit code
1 when a Node would not initialize, 2 on bad arguments or no cluster access.

Flags:
`

func runDiagnose(args []string, build cloud.BuildInfo, stdout, stderr io.Writer) int {
	fs := pflag.NewFlagSet("diagnose", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	cloudConfig := fs.String("cloud-config", "/etc/cloud/vsphere.conf", "the CCM's --cloud-config (same parsing)")
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig; in-cluster (the Pod's ServiceAccount) when empty")
	output := fs.StringP("output", "o", "text", "text or json")
	timeout := fs.Duration("timeout", 2*time.Minute, "give up after this long")
	unmanaged := fs.String(unmanagedSelectorFlag, "", "the CCM's --"+unmanagedSelectorFlag+" (Nodes it leaves alone, besides the label "+nodes.LabelUnmanaged+"=true)")
	fs.Usage = func() { fmt.Fprint(stderr, diagnoseUsageText+fs.FlagUsages()) }
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	rest := fs.Args()
	var one string
	switch {
	case len(rest) == 2 && rest[0] == "node":
		one = rest[1]
	case len(rest) == 1 && rest[0] == "nodes":
	default:
		fs.Usage()
		return exitUsage
	}
	if *output != "text" && *output != "json" {
		fmt.Fprintf(stderr, "diagnose: -o %q: want text or json\n", *output)
		return exitUsage
	}

	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	d, err := newDiagnoser(ctx, *cloudConfig, *kubeconfig, *unmanaged, build)
	if err != nil {
		fmt.Fprintf(stderr, "diagnose: %v\n", err)
		return exitUsage
	}
	defer d.close()
	var rep operatorReport
	if one == "" {
		rep, err = d.diagnoseNodes(ctx)
	} else if node, getErr := d.client.CoreV1().Nodes().Get(ctx, one, metav1.GetOptions{}); getErr == nil {
		rep = d.node(ctx, node)
	} else {
		err = fmt.Errorf("node %s: %w", one, getErr)
	}
	if err != nil {
		fmt.Fprintf(stderr, "diagnose: %v\n", err)
		return exitUsage
	}
	return emit(stdout, *output == "json", rep)
}

// nodesReport is `diagnose nodes`' answer: of the Nodes checked, those
// still tainted or failing a lookup.
type nodesReport struct {
	Checked int           `json:"checked"`
	Nodes   []nodeSummary `json:"nodes"`
}

func (d *diagnoser) diagnoseNodes(ctx context.Context) (*nodesReport, error) {
	list, err := d.client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing nodes: %w", err)
	}
	rep := &nodesReport{Checked: len(list.Items)}
	for i := range list.Items {
		node := &list.Items[i]
		s := nodeSummary{Node: node.Name, Tainted: nodes.Uninitialized(node), Unmanaged: d.provider.Unmanaged(node)}
		if s.Unmanaged == "" {
			switch meta, err := d.provider.InstanceMetadata(ctx, node); {
			case errors.Is(err, cloudprovider.InstanceNotFound):
				s.Problem = "no vCenter has its VM: " + err.Error()
			case err != nil:
				s.Problem = err.Error()
			default:
				s.VCenter = meta.AdditionalLabels[nodes.LabelVCenter]
			}
		}
		if s.Tainted || s.Problem != "" {
			rep.Nodes = append(rep.Nodes, s)
		}
	}
	return rep, nil
}

func (rep *nodesReport) passed() bool {
	return !slices.ContainsFunc(rep.Nodes, func(s nodeSummary) bool { return s.Problem != "" })
}

func (rep *nodesReport) write(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "NODE\tTAINTED\tVCENTER\tPROBLEM\n")
	for _, s := range rep.Nodes {
		problem := s.Problem
		if s.Unmanaged != "" {
			problem = "unmanaged (" + s.Unmanaged + "): this CCM leaves it alone"
		} else if problem == "" {
			problem = "none now: the cloud-node controller initializes it at its next retry"
		}
		fmt.Fprintf(tw, "%s\t%v\t%s\t%s\n", s.Node, s.Tainted, cmp.Or(s.VCenter, "-"), problem)
	}
	_ = tw.Flush()
	fmt.Fprintf(w, "%d Nodes checked, %d listed (still tainted or failing)\n", rep.Checked, len(rep.Nodes))
}

func (r *nodeReport) passed() bool { return r.WouldInitialize }

// diagnoser is a provider built as the CCM builds its own
// (providerOptions, cloud.NewFromFile), readied with the cluster's client
// by Cloud.Inspect, which writes nothing.
type diagnoser struct {
	provider *cloud.Cloud
	client   kubernetes.Interface
	settled  bool // the record of vCenters served was read
}

func newDiagnoser(ctx context.Context, cloudConfig, kubeconfig, unmanaged string, build cloud.BuildInfo) (*diagnoser, error) {
	const op = "main.newDiagnoser"
	selector, err := parseUnmanagedSelector(unmanaged)
	if err != nil {
		return nil, err // names the flag
	}
	client, err := kubeClient(kubeconfig, build.UserAgent()+" (diagnose)")
	if err != nil {
		return nil, fmt.Errorf("%s: kubeconfig: %w", op, err)
	}
	opts := providerOptions(build, nil)
	opts.UnmanagedNodeSelector = selector
	logCalls(&opts)
	provider, err := cloud.NewFromFile(cloudConfig, opts)
	if err != nil {
		return nil, fmt.Errorf("%s: --cloud-config %s: %w", op, cloudConfig, err)
	}
	return &diagnoser{provider: provider, client: client, settled: provider.Inspect(ctx, client)}, nil
}

// close logs the sessions out and stops the provider's informers.
func (d *diagnoser) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	d.provider.Stop(ctx)
}

// nodeReport is `diagnose node NAME`'s answer.
type nodeReport struct {
	Node  string     `json:"node"`
	Keys  lookupKeys `json:"keys"`
	Claim string     `json:"claimedLocation,omitempty"`
	// Lookup is how the Node's VM is looked for and each vCenter's answer.
	Lookup  []vcenterAnswer `json:"lookup"`
	VM      *vmFound        `json:"vm,omitempty"`
	Problem string          `json:"lookupError,omitempty"`
	// WouldSet is what InstanceMetadata returns now (the cloud-node
	// controller writes it); MetadataError why it fails.
	WouldSet      *wouldSet      `json:"wouldSet,omitempty"`
	MetadataError string         `json:"metadataError,omitempty"`
	Exists        instanceAnswer `json:"instanceExists"`
	// DeletionHeld says why a Node whose VM every vCenter answered absent
	// is not deleted: held back by the grace or the freeze (nodeDeletion).
	DeletionHeld string                `json:"deletionHeld,omitempty"`
	Shutdown     instanceAnswer        `json:"instanceShutdown"`
	Tainted      bool                  `json:"uninitializedTaint"`
	TaintReason  string                `json:"taintReason,omitempty"`
	Events       []eventSummary        `json:"events"`
	EventsError  string                `json:"eventsError,omitempty"`
	VCenters     []cloud.VCenterStatus `json:"vcenters"`
	// Unmanaged says why the CCM leaves the Node alone (then nothing is
	// looked up).
	Unmanaged string `json:"unmanaged,omitempty"`
	// WouldInitialize: InstanceMetadata succeeds now.
	WouldInitialize bool     `json:"wouldInitialize"`
	Why             []string `json:"why"`
}

// lookupKeys are the Node's keys a lookup can use, as the report shows them.
type lookupKeys struct {
	ProviderID        string   `json:"providerID,omitempty"`
	SystemUUID        string   `json:"systemUUID,omitempty"`
	SystemUUIDSwapped string   `json:"systemUUIDSwapped,omitempty"`
	Name              string   `json:"name"`
	IPs               []string `json:"ips,omitempty"`
	// Used names the searches the lookup makes, in order (discovery's
	// own list: later ones only while none has found the VM).
	Used string `json:"used"`
}

type vcenterAnswer struct {
	Lookup       string   `json:"lookup"`
	VCenter      string   `json:"vcenter"`
	Answer       string   `json:"answer"` // found, absent or error
	Found        []string `json:"found,omitempty"`
	Error        string   `json:"error,omitempty"`
	Pass         string   `json:"from"`
	LatencyMS    float64  `json:"latencyMs"`
	Breaker      string   `json:"breaker"`
	Reachability string   `json:"reachability"`
}

type vmFound struct {
	VCenter    string `json:"vcenter"`
	Datacenter string `json:"datacenter"`
	Name       string `json:"name"`
	ID         string `json:"id"`
	UUID       string `json:"biosUUID"`
	PowerState string `json:"powerState"`
}

type wouldSet struct {
	ProviderID   string            `json:"providerID"`
	InstanceType string            `json:"instanceType"`
	Zone         string            `json:"zone,omitempty"`
	Region       string            `json:"region,omitempty"`
	Addresses    []string          `json:"addresses"`
	Labels       map[string]string `json:"labels,omitempty"`
}

// instanceAnswer is what InstanceExists or InstanceShutdown returned.
type instanceAnswer struct {
	Value  *bool  `json:"value,omitempty"` // nil: an error
	Error  string `json:"error,omitempty"`
	Reason string `json:"reason"`
}

type eventSummary struct {
	Last    time.Time `json:"lastTimestamp"`
	Type    string    `json:"type"`
	Reason  string    `json:"reason"`
	Count   int32     `json:"count"`
	Source  string    `json:"source"`
	Message string    `json:"message"`
}

// node is the report on node: unless the CCM leaves it alone, the CCM's
// lookup of it, run once; then its Events and the vCenters now.
func (d *diagnoser) node(ctx context.Context, node *v1.Node) *nodeReport {
	r := &nodeReport{Node: node.Name, Tainted: nodes.Uninitialized(node), Keys: lookupKeys{
		ProviderID: node.Spec.ProviderID, SystemUUID: node.Status.NodeInfo.SystemUUID, Name: node.Name}}
	if u, err := discovery.NormalizeUUID(r.Keys.SystemUUID); err == nil && discovery.SwapByteOrder(u) != u {
		r.Keys.SystemUUIDSwapped = discovery.SwapByteOrder(u)
	}
	for _, a := range node.Status.Addresses {
		if (a.Type == v1.NodeInternalIP || a.Type == v1.NodeExternalIP) && !slices.Contains(r.Keys.IPs, a.Address) {
			r.Keys.IPs = append(r.Keys.IPs, a.Address)
		}
	}
	if why := d.provider.Unmanaged(node); why != "" {
		r.unmanaged(why)
	} else {
		d.lookUp(ctx, node, r)
	}
	r.Events, r.EventsError = d.events(ctx, node.Name)
	r.VCenters = d.provider.VCenterStatuses()
	return r
}

// lookUp runs the CCM's lookup of node once (its calls logged), then what
// each controller would ask: InstanceMetadata, InstanceExists,
// InstanceShutdown.
func (d *diagnoser) lookUp(ctx context.Context, node *v1.Node, r *nodeReport) {
	if searches, err := d.provider.Searches(node); err != nil {
		r.Keys.Used = "none: " + err.Error()
	} else {
		r.Keys.Used = strings.Join(searches, ", then ")
	}
	if vc, dc := node.Labels[nodes.LabelVCenter], node.Labels[nodes.LabelDatacenter]; vc != "" {
		r.Claim = "vcenter " + vc
		if server := node.Labels[nodes.LabelServer]; server != "" {
			r.Claim += " (server " + server + ")"
		}
		if dc != "" {
			r.Claim += " datacenter " + dc
		}
	}
	var calls callLog
	res, lookupErr := d.provider.Locate(context.WithValue(ctx, callLogKey{}, &calls), node)
	r.Lookup = calls.report(lookupErr, d.provider.VCenterStatuses())
	if lookupErr != nil {
		r.Problem = lookupErr.Error()
	}
	if res != nil {
		r.VM = &vmFound{VCenter: res.VCenter, Datacenter: res.VM.Ref.Datacenter, Name: res.VM.Name, ID: res.VM.Ref.ID, UUID: res.VM.UUID, PowerState: string(res.VM.PowerState)}
	}

	meta, metaErr := d.provider.InstanceMetadata(ctx, node)
	if metaErr != nil {
		r.MetadataError = metaErr.Error()
	} else {
		w := &wouldSet{ProviderID: meta.ProviderID, InstanceType: meta.InstanceType, Zone: meta.Zone, Region: meta.Region, Labels: meta.AdditionalLabels}
		for _, a := range meta.NodeAddresses {
			w.Addresses = append(w.Addresses, fmt.Sprintf("%s %s", a.Type, a.Address))
		}
		r.WouldSet = w
	}
	r.WouldInitialize = metaErr == nil

	exists, err := d.provider.InstanceExists(ctx, node)
	r.Exists = answerOf(exists, err, "cannot be decided: the Node is kept (never deleted on an error) and asked again",
		"its VM exists",
		"every vCenter answered that its VM is not there: the cloud-node-lifecycle controller deletes the Node once it is NotReady")
	if held, ok := errors.AsType[*discovery.DeletionHeldError](err); ok {
		// What holds it back, and until when.
		vcs := strings.Join(held.VCenters, ", ")
		r.DeletionHeld = fmt.Sprintf("held back by the grace: its VM was confirmed absent %s ago by this diagnosis; the running CCM reports it absent once it has been absent for %s (nodeDeletion.minAbsence of %s) without being found in between",
			held.Absent.Round(time.Second), held.MinAbsence, vcs)
		if held.Reason == discovery.HeldFrozen {
			r.DeletionHeld = fmt.Sprintf("held back by the freeze of %s (%s), until the freeze is lifted",
				vcs, held.Freezes())
		}
		r.Exists.Reason = "every vCenter answered that its VM is not there, but the Node is " + r.DeletionHeld
	}
	shutdown, err := d.provider.InstanceShutdown(ctx, node)
	r.Shutdown = answerOf(shutdown, err, "cannot be decided: no shutdown taint is added or removed until it can",
		"its VM is powered off: a NotReady Node gets the node.cloudprovider.kubernetes.io/shutdown taint",
		"its VM is not powered off")

	r.Why = d.explain(r, lookupErr, metaErr)
	if r.Tainted {
		if metaErr != nil {
			r.TaintReason = "InstanceMetadata fails, so the cloud-node controller keeps it and retries with backoff: " + metaErr.Error()
		} else {
			r.TaintReason = "InstanceMetadata succeeds now: the cloud-node controller removes it at its next retry (a vCenter's return re-queues it within a second)"
		}
	}
}

// unmanaged is the report on a Node the CCM leaves alone: nothing is
// looked up.
func (r *nodeReport) unmanaged(why string) {
	r.Unmanaged = why
	r.Lookup = []vcenterAnswer{}
	r.WouldInitialize = true // nothing of this CCM's holds it back
	yes, no := true, false
	r.Exists = instanceAnswer{Value: &yes, Reason: "unmanaged: reported present without asking vCenter, never deleted"}
	r.Shutdown = instanceAnswer{Value: &no, Reason: "unmanaged: reported running without asking vCenter"}
	if r.Tainted {
		if r.Keys.ProviderID == "" {
			r.TaintReason = "unmanaged, without a providerID: the cloud-node controller initializes no Node without one; set kubelet --provider-id, or register it without --cloud-provider=external's taint"
		} else {
			r.TaintReason = "unmanaged: the cloud-node controller removes it at its next retry, keeping the Node's providerID and addresses"
		}
	}
	r.Why = []string{"unmanaged (" + why + "): this CCM leaves it alone"}
}

// explain says, in words, what each vCenter's answer means for the Node,
// from the errors' types (never their text).
func (d *diagnoser) explain(r *nodeReport, lookupErr, metaErr error) []string {
	var why []string
	failed := map[string]string{}
	for _, a := range r.Lookup {
		if a.Answer == "error" {
			failed[a.VCenter] = a.Error
		}
	}
	for _, n := range slices.Sorted(maps.Keys(failed)) {
		if r.VM != nil {
			why = append(why, fmt.Sprintf("%s did not answer: %s; not needed, the VM was found in %s (a duplicate in %s cannot be ruled out until it answers)", n, failed[n], r.VM.VCenter, n))
			continue
		}
		why = append(why, fmt.Sprintf("%s did not answer: %s; the Node is kept and retried", n, failed[n]))
	}
	if dup, ok := errors.AsType[*discovery.DuplicateError](lookupErr); ok {
		vms := make([]string, len(dup.Matches))
		for i, m := range dup.Matches {
			vms[i] = m.String()
		}
		why = append(why, "the same BIOS UUID is held by several VMs ("+strings.Join(vms, " and ")+"): the CCM refuses to choose; the Node stays tainted and is never deleted until one is removed or changed")
	}
	if _, ok := errors.AsType[*discovery.OutsideError](lookupErr); ok {
		why = append(why, "its VM exists only in a datacenter the config leaves out: not served, not deleted")
	}
	if _, ok := errors.AsType[*metadata.ZoneTagError](metaErr); ok {
		why = append(why, "its VM has no zone or region tag in the configured categories (on its host, cluster, datacenter, resource pool or folders): the Node stays tainted rather than join without its zone")
	}
	if lookupErr == nil && r.VM == nil {
		why = append(why, "no vCenter has its VM (see instanceExists for whether that is confirmed absence)")
	}
	if r.DeletionHeld != "" {
		why = append(why, "not deleted: "+r.DeletionHeld)
	}
	if !d.settled {
		why = append(why, "the record of the vCenters served before (ConfigMap "+d.provider.HistoryObject().String()+") could not be read: until it is, no VM is reported gone")
	}
	switch {
	case metaErr == nil && r.Tainted:
		why = append(why, "would initialize now: InstanceMetadata succeeds")
	case metaErr == nil:
		why = append(why, "initialized, and InstanceMetadata succeeds")
	case r.Tainted:
		why = append(why, "would not initialize: "+metaErr.Error())
	default:
		why = append(why, "initialized, but its status refresh fails: "+metaErr.Error())
	}
	return why
}

// answerOf is InstanceExists' or InstanceShutdown's answer v, err, with
// the reason for an error, for true or for false.
func answerOf(v bool, err error, onErr, onTrue, onFalse string) instanceAnswer {
	switch {
	case err != nil:
		return instanceAnswer{Error: err.Error(), Reason: onErr}
	case v:
		return instanceAnswer{Value: &v, Reason: onTrue}
	}
	return instanceAnswer{Value: &v, Reason: onFalse}
}

// events lists the Node's recent Events from this CCM, newest first: the
// provider's own (reasons nodes.ReasonLookupFailed, ReasonDuplicateUUID,
// ReasonZoneTagMissing, ReasonNoNodeAddress) or the library's controllers
// acting on Nodes.
func (d *diagnoser) events(ctx context.Context, node string) ([]eventSummary, string) {
	sel := fields.AndSelectors(fields.OneTermEqualSelector("involvedObject.kind", "Node"),
		fields.OneTermEqualSelector("involvedObject.name", node)).String()
	list, err := d.client.CoreV1().Events(metav1.NamespaceAll).List(ctx, metav1.ListOptions{FieldSelector: sel})
	if err != nil {
		return []eventSummary{}, err.Error()
	}
	out := []eventSummary{}
	for i := range list.Items {
		e := &list.Items[i]
		src := cmp.Or(e.Source.Component, e.ReportingController)
		if src != "vsphere-federated-ccm" && !strings.Contains(src, "cloud-node") &&
			!strings.Contains(src, "cloud-controller-manager") {
			continue
		}
		last := e.LastTimestamp.Time
		if last.IsZero() {
			last = e.EventTime.Time
		}
		out = append(out, eventSummary{Last: last.UTC(), Type: e.Type, Reason: e.Reason, Count: max(e.Count, 1), Source: src, Message: e.Message})
	}
	slices.SortFunc(out, func(a, b eventSummary) int { return b.Last.Compare(a.Last) })
	return out[:min(len(out), 10)], ""
}

// nodeSummary is one line of `diagnose nodes`.
type nodeSummary struct {
	Node    string `json:"node"`
	Tainted bool   `json:"uninitializedTaint"`
	VCenter string `json:"vcenter,omitempty"`
	Problem string `json:"problem,omitempty"`
	// Unmanaged says why the CCM leaves the Node alone.
	Unmanaged string `json:"unmanaged,omitempty"`
}

// write prints r for people; an error that repeats the lookup error is
// not printed again (-o json has every message whole).
func (r *nodeReport) write(w io.Writer) {
	p := func(format string, a ...any) { fmt.Fprintf(w, format+"\n", a...) }
	short := func(msg string) string {
		if r.Problem != "" && strings.Contains(msg, r.Problem) {
			return strings.Replace(msg, r.Problem, "(the lookup error above)", 1)
		}
		return msg
	}
	p("Node %s", r.Node)
	p("  keys: providerID %s, systemUUID %s (byte-swapped %s), name %s, IPs %s",
		cmp.Or(r.Keys.ProviderID, "-"), cmp.Or(r.Keys.SystemUUID, "-"), cmp.Or(r.Keys.SystemUUIDSwapped, "-"),
		r.Keys.Name, cmp.Or(strings.Join(r.Keys.IPs, " "), "-"))
	if r.Unmanaged != "" {
		p("  unmanaged (%s): this CCM leaves it alone: no lookup, no write, no error", r.Unmanaged)
	} else {
		r.writeLookup(w, p, short)
	}
	p("  InstanceExists:   %s", short(r.Exists.text()))
	p("  InstanceShutdown: %s", short(r.Shutdown.text()))
	if r.Tainted {
		p("  tainted %s: %s", cloudproviderapi.TaintExternalCloudProvider, short(r.TaintReason))
	} else {
		p("  not tainted %s (initialized)", cloudproviderapi.TaintExternalCloudProvider)
	}
	switch {
	case r.EventsError != "":
		p("  events: cannot list: %s", r.EventsError)
	case len(r.Events) == 0:
		p("  events: none from this CCM")
	default:
		p("  recent events from this CCM:")
		for _, e := range r.Events {
			p("    %s  %s %s (x%d, %s): %s", e.Last.Format(time.RFC3339), e.Type, e.Reason, e.Count, e.Source, e.Message)
		}
	}
	p("  vCenters now:")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "    VCENTER\tCONNECTION\tBREAKER\tSESSION\tINVENTORY\tNODE DELETION\tLAST ERROR\n")
	for _, v := range r.VCenters {
		session, inv := "-", "off"
		if v.Session != nil {
			session = fmt.Sprintf("%.0fs (%s)", v.Session.AgeSeconds, v.Session.Credentials)
		}
		for _, rc := range v.RefusedCredentials {
			session += fmt.Sprintf(" [%s refused %d time(s)", rc.Source, rc.Refusals)
			if rc.Retry.IsZero() {
				session += ", not sent again until it changes]"
			} else {
				session += ", sent again unchanged at " + rc.Retry.Format(time.RFC3339) + "]"
			}
		}
		if v.Inventory != nil {
			inv = "out of service"
			if v.Inventory.InService {
				inv = fmt.Sprintf("%d VMs", v.Inventory.VMs)
			}
		}
		policy := "after " + v.NodeDeletion.MinAbsence + " of absence"
		if v.NodeDeletion.Frozen {
			policy = "frozen (" + v.NodeDeletion.FrozenBy + ")"
		}
		if v.NodeDeletion.HeldNodes > 0 {
			policy += fmt.Sprintf(", %d held", v.NodeDeletion.HeldNodes)
		}
		fmt.Fprintf(tw, "    %s\t%s\t%s\t%s\t%s\t%s\t%s\n",
			v.Name, v.Reachability, v.Breaker, session, inv, policy, cmp.Or(v.LastError, "-"))
	}
	_ = tw.Flush()
	p("  verdict:")
	for _, s := range r.Why {
		p("    - %s", short(s))
	}
}

// writeLookup prints the lookup's part of the report: the keys used, each
// vCenter's answer, the VM, what InstanceMetadata would set.
func (r *nodeReport) writeLookup(w io.Writer, p func(string, ...any), short func(string) string) {
	p("  looked up by: %s", r.Keys.Used)
	if r.Claim != "" {
		p("  its labels place it in: %s", r.Claim)
	}
	p("  each vCenter's answer:")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "    VCENTER\tANSWER\tFROM\tLATENCY\tBREAKER\tCONNECTION\tLOOKUP\tDETAIL\n")
	for _, a := range r.Lookup {
		detail := a.Error
		if len(a.Found) > 0 {
			detail = strings.Join(a.Found, "; ")
		}
		fmt.Fprintf(tw, "    %s\t%s\t%s\t%.1fms\t%s\t%s\t%s\t%s\n",
			a.VCenter, a.Answer, a.Pass, a.LatencyMS, a.Breaker, a.Reachability, a.Lookup, cmp.Or(detail, "-"))
	}
	_ = tw.Flush()
	if r.VM != nil {
		p("  VM: vcenter %s, datacenter %s, %q (%s), BIOS UUID %s, %s", r.VM.VCenter, r.VM.Datacenter, r.VM.Name, r.VM.ID, r.VM.UUID, r.VM.PowerState)
	} else {
		p("  VM: none")
	}
	if r.Problem != "" {
		p("  lookup error: %s", r.Problem)
	}
	if s := r.WouldSet; s != nil {
		p("  would set:")
		p("    providerID     %s", s.ProviderID)
		p("    instance type  %s", s.InstanceType)
		p("    zone           %s", cmp.Or(s.Zone, "-"))
		p("    region         %s", cmp.Or(s.Region, "-"))
		p("    addresses      %s", strings.Join(s.Addresses, ", "))
		labels := make([]string, 0, len(s.Labels))
		for k, v := range s.Labels {
			labels = append(labels, k+"="+v)
		}
		slices.Sort(labels)
		p("    labels         %s", strings.Join(labels, ", "))
	} else {
		p("  InstanceMetadata: error: %s", short(r.MetadataError))
	}
}

func (v instanceAnswer) text() string {
	if v.Value == nil {
		return "error (" + v.Reason + "): " + v.Error
	}
	return fmt.Sprintf("%v (%s)", *v.Value, v.Reason)
}
