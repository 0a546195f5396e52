package cloud_test

// The model-based test of Rule 1 (rule1_model_test.go) again, smaller, over
// simulated vCenters and the real backend (backends/vsphere): its logins,
// sessions, instance UUIDs, breakers and timeouts. The federation is
// started once per test (simulators are slow to build) and every sequence
// starts it over from a known state: every proxy passing, every instance
// UUID the simulator's own, every VM readable. VMs a sequence destroyed
// stay destroyed, and moved ones stay where they went; the model only
// needs the truth.
//
// Size: rapid's -rapid.checks and -rapid.steps, or RAPID_CHECKS and
// RAPID_STEPS; by default a few short sequences (see TestRule1ModelVCsim).
// RULE1_SKIP leaves actions out, as in the in-memory model. A long run
// destroys most of the federation's 12 VMs: its later sequences create
// fewer Nodes of VMs.
//
// A failure tells the sequence as it ran. -rapid.seed replays it only
// roughly, and rapid's shrinking is rough too: the VMs earlier sequences
// destroyed stay destroyed, and the answers hang on timing (timeouts,
// breakers, reconnections).

import (
	"context"
	"flag"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2"
	"pgregory.net/rapid"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/backends"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/backends/vsphere"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/cloud"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config/credentials"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/discovery"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/test/vcsim"
)

// simNames are the config names a simulated vCenter may be given.
var simNames = []string{"east", "west", "north"}

// simWorld is the federation, shared by every sequence of a test.
type simWorld struct {
	fed          *vcsim.Federation
	proxies      []*vcsim.Proxy // in front of fed.VCenters[i]: server i
	instances    []string       // the simulators' own instance UUIDs
	destroyed    map[*vcsim.VM]bool
	off          map[*vcsim.VM]bool
	inaccessible map[*vcsim.VM]bool
	// What InstanceExists answered over the run, for the log: a run that
	// never concluded absence, or never met an error, checked little.
	present, absent, errored atomic.Int64
}

// server is the address of server i, as a config names it.
func (w *simWorld) server(i int) string {
	return fmt.Sprintf("%s:%d", w.proxies[i].Host(), w.proxies[i].Port())
}

// simAppliance is one vCenter: an instance at a server. A re-image puts
// another at the server; the old one keeps the VMs it held.
type simAppliance struct {
	server   int
	instance string
	uuids    map[string]string // BIOS UUID → VM name, the VMs it holds
}

func (a *simAppliance) String() string {
	return fmt.Sprintf("server %d (instance %s)", a.server, a.instance)
}

// simVCenter is one config entry. Several may name one server (CPI's
// tenants), each with its own datacenters and login: refused, its
// password is wrong, and that entry alone cannot log in.
type simVCenter struct {
	name        string
	server      int
	inventory   bool
	datacenters []string // as written; empty: all
	refused     bool
}

// simDatacenterSpecs are what an entry's datacenters may say of the
// simulators' DC0 and DC1: by name and by inventory path.
var simDatacenterSpecs = []string{"DC0", "/DC1", "DC1"}

// drawSimVCenter draws an entry named name: often another entry of a
// server cfg names already.
func (m *simModel) drawSimVCenter(t *rapid.T, name string, cfg []simVCenter) simVCenter {
	servers := m.freeServers(nil)
	if len(cfg) > 0 && rapid.Bool().Draw(t, name+" a tenant of a configured server") {
		servers = nil
		for _, vc := range cfg {
			servers = append(servers, vc.server)
		}
	}
	return simVCenter{
		name:        name,
		server:      rapid.SampledFrom(servers).Draw(t, name+" server"),
		inventory:   rapid.Bool().Draw(t, name+" inventory"),
		datacenters: rapid.SliceOfNDistinct(rapid.SampledFrom(simDatacenterSpecs), 0, 1, rapid.ID[string]).Draw(t, name+" datacenters"),
		refused:     rapid.IntRange(0, 4).Draw(t, name+" login refused") == 0,
	}
}

// simModel is one sequence: the truth and the CCM under test.
type simModel struct {
	w      *simWorld
	dir    string
	path   string
	client *fake.Clientset
	ctx    context.Context

	current        []*simAppliance // by server
	appliances     []*simAppliance
	everConfigured map[*simAppliance]bool
	cfg            []simVCenter
	fault          []string // by server: "" when passing

	cloud *cloud.Cloud
	stop  chan struct{}

	nodes  map[string]string // Node name → how it was made
	nextID int
	steps  *atomic.Int64
	story  []string
}

func (m *simModel) note(format string, args ...any) {
	m.story = append(m.story, fmt.Sprintf(format, args...))
}

func (m *simModel) describeConfig() string {
	var parts []string
	for _, vc := range m.cfg {
		p := fmt.Sprintf("%s=server %d (inventory %t", vc.name, vc.server, vc.inventory)
		if len(vc.datacenters) > 0 {
			p += ", datacenters " + strings.Join(vc.datacenters, ",")
		}
		if vc.refused {
			p += ", login refused"
		}
		parts = append(parts, p+")")
	}
	return "{" + strings.Join(parts, " ") + "}"
}

func (m *simModel) do(name string, f func()) {
	n := len(m.story)
	f()
	m.steps.Add(1)
	head := name + " → config " + m.describeConfig()
	for i, f := range m.fault {
		if f != "" {
			head += fmt.Sprintf("; server %d %s", i, f)
		}
	}
	m.story = slices.Insert(m.story, n, head)
}

// newSimModel restores the world to its known state and starts a CCM over
// a drawn config.
func newSimModel(t *rapid.T, w *simWorld, steps *atomic.Int64) *simModel {
	for i, vc := range w.fed.VCenters {
		if err := w.proxies[i].SetMode(vcsim.Pass); err != nil {
			t.Fatal(err)
		}
		vc.SetInstanceUUID(w.instances[i])
	}
	for vm := range w.inaccessible {
		if vc := w.fed.VCenter(vm.VCenter); vc != nil && !w.destroyed[vm] {
			vc.MakeAccessible(vm)
		}
	}
	clear(w.inaccessible)
	dir, err := os.MkdirTemp("", "rule1-vcsim-")
	if err != nil {
		t.Fatal(err)
	}
	m := &simModel{
		w: w, dir: dir, path: filepath.Join(dir, "vsphere.conf"), client: fake.NewClientset(),
		ctx:            klog.NewContext(context.Background(), logr.Discard()),
		everConfigured: map[*simAppliance]bool{}, fault: make([]string, len(w.proxies)),
		nodes: map[string]string{}, steps: steps,
	}
	t.Cleanup(func() {
		m.stopCloud()
		_ = os.RemoveAll(dir)
	})
	for i, vc := range w.fed.VCenters {
		a := &simAppliance{server: i, instance: w.instances[i], uuids: map[string]string{}}
		for _, vm := range vc.VMs {
			if !w.destroyed[vm] {
				a.uuids[vm.UUID] = vm.Name
			}
		}
		m.current = append(m.current, a)
		m.appliances = append(m.appliances, a)
	}
	names := rapid.SliceOfNDistinct(rapid.SampledFrom(simNames), 1, 3, rapid.ID[string]).Draw(t, "initial vCenters")
	var cfg []simVCenter
	for _, n := range names {
		cfg = append(cfg, m.drawSimVCenter(t, n, cfg))
	}
	m.writeConfig(t, cfg)
	// Nodes from the start: a sequence is short, and a Node is what the
	// check holds against the truth.
	for range rapid.IntRange(0, 3).Draw(t, "initial Nodes") {
		m.nodeCreate(t)
	}
	m.startCloud(t)
	return m
}

func (m *simModel) freeServers(cfg []simVCenter) []int {
	var out []int
	for i := range m.w.proxies {
		if !slices.ContainsFunc(cfg, func(vc simVCenter) bool { return vc.server == i }) {
			out = append(out, i)
		}
	}
	return out
}

func (m *simModel) render(cfg []simVCenter) string {
	var b strings.Builder
	b.WriteString("global:\n  insecureFlag: true\n  requestTimeout: 1s\n  nodeDeletion: {minAbsence: 0s}\n  breaker:\n    consecutiveFailures: 2\n    openTimeout: 100ms\nvcenter:\n")
	for _, vc := range cfg {
		sim := m.w.fed.VCenters[vc.server]
		password := sim.Password
		if vc.refused {
			password += "-wrong"
		}
		fmt.Fprintf(&b, "  %s:\n    server: %s\n    port: %d\n    user: %q\n    password: %q\n    inventory: %t\n",
			vc.name, m.w.proxies[vc.server].Host(), m.w.proxies[vc.server].Port(), sim.User, password, vc.inventory)
		if len(vc.datacenters) > 0 {
			fmt.Fprintf(&b, "    datacenters: [%q]\n", vc.datacenters[0])
		}
	}
	return b.String()
}

func (m *simModel) writeConfig(t rapid.TB, cfg []simVCenter) {
	content := m.render(cfg)
	if _, err := config.Parse([]byte(content)); err != nil {
		t.Fatalf("the model's config does not parse: %v\n%s", err, content)
	}
	writeModelFile(t, m.path, content)
	m.cfg = cfg
	m.markConfigured()
}

func (m *simModel) markConfigured() {
	for _, vc := range m.cfg {
		m.everConfigured[m.current[vc.server]] = true
	}
}

func (m *simModel) options() cloud.Options {
	return cloud.Options{
		NewBackend: func(vc config.VCenter, creds credentials.Source) backends.Backend {
			return vsphere.New(vsphere.Options{Config: vc, Credentials: creds, Inventory: vc.Inventory, Heartbeat: time.Second})
		},
		Discovery:     discovery.Options{ConnectWait: 500 * time.Millisecond, ProbeInterval: 100 * time.Millisecond},
		DuplicateScan: 200 * time.Millisecond,
		RecoveryPoll:  100 * time.Millisecond,
	}
}

func (m *simModel) startCloud(t rapid.TB) {
	c, err := cloud.NewFromFile(m.path, m.options())
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	m.stop = make(chan struct{})
	startLeader(c, m.client, m.stop)
	m.cloud = c
	m.markConfigured()
	c.Reload(m.ctx)
}

func (m *simModel) stopCloud() {
	if m.cloud == nil {
		return
	}
	close(m.stop)
	// Short: a black-holed vCenter's logout waits.
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	m.cloud.Stop(ctx)
	m.cloud = nil
}

// ---- operations ----

func (m *simModel) actions() map[string]func(*rapid.T) {
	a := map[string]func(*rapid.T){
		"EditAdd":      m.editAdd,
		"EditRemove":   m.editRemove,
		"EditRename":   m.editRename,
		"EditRepoint":  m.editRepoint,
		"EditLogin":    m.editLogin,
		"Restart":      func(t *rapid.T) { m.stopCloud(); m.startCloud(t) },
		"ProxyFault":   m.proxyFault,
		"ProxyHeal":    m.proxyHeal,
		"Reimage":      m.reimage,
		"VMDestroy":    m.vmDestroy,
		"VMPower":      m.vmPower,
		"VMMove":       m.vmMove,
		"VMUnreadable": m.vmUnreadable,
		"NodeCreate":   m.nodeCreate,
	}
	for name, f := range a {
		a[name] = func(t *rapid.T) { m.do(name, func() { f(t) }) }
	}
	for _, name := range strings.Split(os.Getenv("RULE1_SKIP"), ",") {
		delete(a, strings.TrimSpace(name))
	}
	a[""] = func(t *rapid.T) { m.check(t) }
	return a
}

func (m *simModel) edit(t rapid.TB, cfg []simVCenter) {
	m.writeConfig(t, cfg)
	m.cloud.Reload(m.ctx)
}

func (m *simModel) freeNames() []string {
	return slices.DeleteFunc(slices.Clone(simNames), func(n string) bool {
		return slices.ContainsFunc(m.cfg, func(vc simVCenter) bool { return vc.name == n })
	})
}

func (m *simModel) editAdd(t *rapid.T) {
	names := m.freeNames()
	if len(names) == 0 {
		t.Skip("every name configured")
	}
	m.edit(t, append(slices.Clone(m.cfg), m.drawSimVCenter(t, rapid.SampledFrom(names).Draw(t, "name"), m.cfg)))
}

// editLogin breaks or mends an entry's password: that entry's login is
// refused, the others of its server log in.
func (m *simModel) editLogin(t *rapid.T) {
	cfg := slices.Clone(m.cfg)
	i := rapid.IntRange(0, len(cfg)-1).Draw(t, "vCenter")
	cfg[i].refused = !cfg[i].refused
	m.edit(t, cfg)
}

func (m *simModel) editRemove(t *rapid.T) {
	if len(m.cfg) < 2 {
		t.Skip("a config needs a vCenter")
	}
	i := rapid.IntRange(0, len(m.cfg)-1).Draw(t, "vCenter")
	m.edit(t, slices.Delete(slices.Clone(m.cfg), i, i+1))
}

func (m *simModel) editRename(t *rapid.T) {
	names := m.freeNames()
	if len(names) == 0 {
		t.Skip("no free name")
	}
	cfg := slices.Clone(m.cfg)
	i := rapid.IntRange(0, len(cfg)-1).Draw(t, "vCenter")
	cfg[i].name = rapid.SampledFrom(names).Draw(t, "new name")
	m.edit(t, cfg)
}

// editRepoint gives an entry another server, maybe one another entry
// names (it becomes a tenant there).
func (m *simModel) editRepoint(t *rapid.T) {
	cfg := slices.Clone(m.cfg)
	i := rapid.IntRange(0, len(cfg)-1).Draw(t, "vCenter")
	servers := slices.DeleteFunc(m.freeServers(nil), func(s int) bool { return s == cfg[i].server })
	cfg[i].server = rapid.SampledFrom(servers).Draw(t, "new server")
	m.edit(t, cfg)
}

func (m *simModel) proxyFault(t *rapid.T) {
	i := rapid.IntRange(0, len(m.w.proxies)-1).Draw(t, "server")
	f := rapid.SampledFrom([]string{"refused", "black hole"}).Draw(t, "fault")
	mode := vcsim.Refuse
	if f == "black hole" {
		mode = vcsim.Blackhole
	}
	if err := m.w.proxies[i].SetMode(mode); err != nil {
		t.Fatal(err)
	}
	m.fault[i] = f
}

func (m *simModel) proxyHeal(t *rapid.T) {
	var faulty []int
	for i, f := range m.fault {
		if f != "" {
			faulty = append(faulty, i)
		}
	}
	if len(faulty) == 0 {
		t.Skip("no fault")
	}
	i := rapid.SampledFrom(faulty).Draw(t, "server")
	if err := m.w.proxies[i].SetMode(vcsim.Pass); err != nil {
		t.Fatal(err)
	}
	m.fault[i] = ""
}

// reimage puts another appliance at a server: another instance UUID,
// every session ended (the appliance rebooted). The simulator keeps its
// VMs, so the new appliance holds them too; the old one keeps them in the
// truth whatever happens to them later.
func (m *simModel) reimage(t *rapid.T) {
	i := rapid.IntRange(0, len(m.w.proxies)-1).Draw(t, "server")
	m.nextID++
	id := fmt.Sprintf("5f0a7c1e-%04x-4000-8000-%012x", i, m.nextID)
	vc := m.w.fed.VCenters[i]
	vc.SetInstanceUUID(id)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := vc.TerminateSessions(ctx); err != nil {
		t.Fatalf("re-image server %d: %v", i, err)
	}
	a := &simAppliance{server: i, instance: id, uuids: maps.Clone(m.current[i].uuids)}
	m.current[i] = a
	m.appliances = append(m.appliances, a)
	m.markConfigured()
	m.note("  server %d re-imaged: now instance %s", i, id)
}

// liveVMs are the VMs not destroyed, in a stable order.
func (m *simModel) liveVMs() []*vcsim.VM {
	var out []*vcsim.VM
	for _, vm := range m.w.fed.AllVMs() {
		if !m.w.destroyed[vm] {
			out = append(out, vm)
		}
	}
	return out
}

func (m *simModel) pickVM(t *rapid.T) (*vcsim.VM, int) {
	vms := m.liveVMs()
	if len(vms) == 0 {
		t.Skip("no VM")
	}
	return m.withServer(t, vms[rapid.IntRange(0, len(vms)-1).Draw(t, "vm")])
}

// pickNamedVM draws a live VM, mostly one a Node is named after: that is
// where a wrongful absence would show.
func (m *simModel) pickNamedVM(t *rapid.T) (*vcsim.VM, int) {
	if named := m.namedVMs(); len(named) > 0 && rapid.Bool().Draw(t, "a Node's VM") {
		return m.withServer(t, named[rapid.IntRange(0, len(named)-1).Draw(t, "Node's vm")])
	}
	return m.pickVM(t)
}

// withServer returns vm with the index of the server it is at now.
func (m *simModel) withServer(t *rapid.T, vm *vcsim.VM) (*vcsim.VM, int) {
	i := slices.IndexFunc(m.w.fed.VCenters, func(vc *vcsim.VCenter) bool { return vc.Name == vm.VCenter })
	if i < 0 {
		t.Fatalf("vm %s of no vCenter", vm.Name)
	}
	return vm, i
}

// vmDestroy destroys a VM, mostly one a Node names.
func (m *simModel) vmDestroy(t *rapid.T) {
	vm, i := m.pickNamedVM(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := m.w.fed.VCenters[i].Destroy(ctx, vm); err != nil {
		t.Fatalf("destroy %s: %v", vm.Name, err)
	}
	m.w.destroyed[vm] = true
	delete(m.w.inaccessible, vm)
	delete(m.current[i].uuids, vm.UUID)
	m.note("  vm %s (uuid %s) destroyed in %s", vm.Name, vm.UUID, m.current[i])
}

// namedVMs are the live VMs some Node is named after, in a stable order.
func (m *simModel) namedVMs() []*vcsim.VM {
	return slices.DeleteFunc(m.liveVMs(), func(vm *vcsim.VM) bool { _, ok := m.nodes[vm.Name]; return !ok })
}

func (m *simModel) vmPower(t *rapid.T) {
	vm, i := m.pickVM(t)
	if m.w.inaccessible[vm] {
		t.Skip("an unreadable VM cannot be powered")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	vc := m.w.fed.VCenters[i]
	var err error
	if m.w.off[vm] {
		err = vc.PowerOn(ctx, vm)
	} else {
		err = vc.PowerOff(ctx, vm)
	}
	if err != nil {
		t.Fatalf("power %s: %v", vm.Name, err)
	}
	m.w.off[vm] = !m.w.off[vm]
	m.note("  vm %s powered off: %t", vm.Name, m.w.off[vm])
}

// vmMove moves a VM, mostly one a Node names, to a datacenter of any
// vCenter (its own for another datacenter), as a cross-vCenter vMotion or
// a failover re-registering it does: a twin for a moment, never a moment
// without it. The truth follows it to the appliance at the target's
// server; a target never configured may take the VM out of the CCM's
// sight, and then absence is right.
func (m *simModel) vmMove(t *rapid.T) {
	vm, from := m.pickNamedVM(t)
	to := rapid.IntRange(0, len(m.w.fed.VCenters)-1).Draw(t, "to server")
	target := m.w.fed.VCenters[to]
	dc := rapid.SampledFrom([]string{"DC0", "DC1"}).Draw(t, "to datacenter")
	if to == from && dc == vm.Datacenter {
		t.Skip("already there")
	}
	hosts := target.Hosts(dc)
	if len(hosts) == 0 {
		t.Skip("no host there")
	}
	host := rapid.SampledFrom(hosts).Draw(t, "to host")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := m.w.fed.Move(ctx, vm, target, dc, host); err != nil {
		if strings.Contains(err.Error(), "no VM to clone") {
			t.Skip(err.Error())
		}
		t.Fatalf("move %s: %v", vm.Name, err)
	}
	// The clone is readable and powered on, whatever the VM was.
	delete(m.w.inaccessible, vm)
	m.w.off[vm] = false
	delete(m.current[from].uuids, vm.UUID)
	m.current[to].uuids[vm.UUID] = vm.Name
	m.note("  vm %s (uuid %s) moved from server %d to %s %s", vm.Name, vm.UUID, from, m.current[to], dc)
}

// vmUnreadable makes a VM, mostly one a Node names, inaccessible (its
// files unreachable: its UUID cannot be read, a search by UUID misses it)
// or readable again. It exists all along: CPI deletes its Node (#642).
func (m *simModel) vmUnreadable(t *rapid.T) {
	vm, i := m.pickNamedVM(t)
	vc := m.w.fed.VCenters[i]
	if m.w.inaccessible[vm] {
		vc.MakeAccessible(vm)
		delete(m.w.inaccessible, vm)
	} else {
		vc.MakeInaccessible(vm)
		m.w.inaccessible[vm] = true
	}
	m.note("  vm %s unreadable: %t", vm.Name, m.w.inaccessible[vm])
}

var simNodeShapes = []string{
	"providerID in the VM's byte order",
	"providerID in the kubelet's byte order",
	"system UUID only (as a kubelet registers it)",
	"bare metal: a system UUID no VM has, no providerID",
}

func (m *simModel) nodeCreate(t *rapid.T) {
	shape := rapid.SampledFrom(simNodeShapes).Draw(t, "Node shape")
	node := &v1.Node{}
	if shape == simNodeShapes[3] {
		m.nextID++
		node.Name = fmt.Sprintf("bm%d", m.nextID)
		node.Status.NodeInfo.SystemUUID = fmt.Sprintf("b0000000-0000-4000-8000-%012x", m.nextID)
	} else {
		vm, _ := m.pickVM(t)
		node.Name = vm.Name
		switch shape {
		case simNodeShapes[0]:
			node.Spec.ProviderID = discovery.ProviderID(vm.UUID)
		case simNodeShapes[1]:
			node.Spec.ProviderID = discovery.ProviderID(vm.SystemUUID())
		case simNodeShapes[2]:
			node.Status.NodeInfo.SystemUUID = vm.SystemUUID()
		}
	}
	if node.Spec.ProviderID == "" {
		node.Spec.Taints = uninitializedTaint()
	}
	nodes := m.client.CoreV1().Nodes()
	if _, ok := m.nodes[node.Name]; ok {
		if err := nodes.Delete(m.ctx, node.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := nodes.Create(m.ctx, node, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	m.nodes[node.Name] = shape
	m.note("  node %s: %s (providerID %q, system UUID %q)", node.Name, shape, node.Spec.ProviderID, node.Status.NodeInfo.SystemUUID)
}

// ---- the check ----

// check asks InstanceExists for every Node and holds every (false, nil)
// against the truth; a Node rightly found gone is deleted. Then it does
// what the cloud-node controller does for uninitialized Nodes.
func (m *simModel) check(t rapid.TB) {
	m.markConfigured()
	nodes, answers := askExists(t, m.ctx, m.cloud, m.client)
	var alive []*v1.Node
	for i := range nodes {
		n := &nodes[i]
		switch {
		case answers[i].ok:
			m.w.present.Add(1)
		case answers[i].err != nil:
			m.w.errored.Add(1)
		default:
			m.w.absent.Add(1)
		}
		if answers[i].ok || answers[i].err != nil {
			alive = append(alive, n)
			continue
		}
		if why := m.wrongAbsence(n); why != "" {
			t.Fatalf("Rule 1 broken over simulated vCenters: InstanceExists(%s) = false, nil: the Node would be deleted, but %s\n%s\nthe sequence (%d steps into the run):\n  %s",
				n.Name, why, m.describeNode(n), m.steps.Load(), strings.Join(m.story, "\n  "))
		}
		if err := m.client.CoreV1().Nodes().Delete(m.ctx, n.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		delete(m.nodes, n.Name)
		m.note("  node %s deleted (its VM is rightly gone)", n.Name)
	}
	for _, fresh := range initializeNodes(t, m.ctx, m.cloud, m.client, alive) {
		m.nodes[fresh.Name] += ", initialized by the cloud-node controller"
		m.note("  node %s initialized: providerID %q labels %v", fresh.Name, fresh.Spec.ProviderID, fresh.Labels)
	}
}

// wrongAbsence says why (false, nil) is wrong for n; "" when absence
// holds: its providerID is a vsphere one and no appliance ever configured
// holds a VM of its UUID in either byte order.
func (m *simModel) wrongAbsence(n *v1.Node) string {
	if !strings.HasPrefix(n.Spec.ProviderID, discovery.ProviderPrefix) {
		return fmt.Sprintf("it has no vsphere providerID (%q)", n.Spec.ProviderID)
	}
	u, err := discovery.ParseProviderID(n.Spec.ProviderID)
	if err != nil {
		return fmt.Sprintf("its providerID does not parse: %v", err)
	}
	if held := m.holding(u, true); len(held) > 0 {
		return "its VM exists: " + strings.Join(held, "; ")
	}
	return ""
}

func (m *simModel) holding(u string, configuredOnly bool) []string {
	var out []string
	for _, a := range m.appliances {
		if configuredOnly && !m.everConfigured[a] {
			continue
		}
		for _, id := range []string{u, discovery.SwapByteOrder(u)} {
			name, ok := a.uuids[id]
			if !ok {
				continue
			}
			var notes []string
			if m.current[a.server] != a {
				notes = append(notes, "re-imaged away: the server answers as "+m.current[a.server].instance+" now")
			}
			if !m.everConfigured[a] {
				notes = append(notes, "never configured")
			}
			if id != u {
				notes = append(notes, "UUID in the other byte order")
			}
			s := fmt.Sprintf("vm %s uuid %s in %s", name, id, a)
			if len(notes) > 0 {
				s += " [" + strings.Join(notes, ", ") + "]"
			}
			out = append(out, s)
		}
	}
	return out
}

func (m *simModel) describeNode(n *v1.Node) string {
	var b strings.Builder
	fmt.Fprintf(&b, "  node %s: %s\n  providerID %q systemUUID %q labels %v\n", n.Name, m.nodes[n.Name], n.Spec.ProviderID, n.Status.NodeInfo.SystemUUID, n.Labels)
	held := []string{"none"}
	if u, err := discovery.ParseProviderID(n.Spec.ProviderID); err == nil {
		if h := m.holding(u, false); len(h) > 0 {
			held = h
		}
	}
	fmt.Fprintf(&b, "  VMs the world knows for it: %s\n", strings.Join(held, "; "))
	fmt.Fprintf(&b, "  config now: %s\n", m.describeConfig())
	var servers []string
	for i := range m.w.proxies {
		servers = append(servers, fmt.Sprintf("server %d = %s (%s)", i, m.w.server(i), m.w.fed.VCenters[i].Name))
	}
	fmt.Fprintf(&b, "  servers: %s\n", strings.Join(servers, ", "))
	var ever []string
	for _, a := range m.appliances {
		if m.everConfigured[a] {
			ever = append(ever, a.String())
		}
	}
	fmt.Fprintf(&b, "  vCenters ever configured: %s", strings.Join(ever, ", "))
	return b.String()
}

// TestRule1ModelVCsim is TestRule1Model over simulated vCenters and the
// real backend: a Node is answered (false, nil) only when its providerID
// names a VM no vCenter the CCM was ever configured with holds. Small by
// default (a simulated vCenter answers in milliseconds, a fault costs a
// request timeout): rapid's own defaults are set only when neither flag
// nor environment asks for more.
func TestRule1ModelVCsim(t *testing.T) {
	if testing.Short() {
		// rapid runs a fifth of its checks under -short: none of the
		// default four, so the federation would start for nothing.
		t.Skip("a fifth of four sequences is none")
	}
	fed, err := vcsim.Start(vcsim.Options{VCenters: 3, Datacenters: 2, MachinesPerPool: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fed.Close)
	w := &simWorld{fed: fed, destroyed: map[*vcsim.VM]bool{}, off: map[*vcsim.VM]bool{}, inaccessible: map[*vcsim.VM]bool{}}
	for _, vc := range fed.VCenters {
		p, err := vc.NewProxy()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(p.Close)
		w.proxies = append(w.proxies, p)
		w.instances = append(w.instances, vc.InstanceUUID())
	}
	rapidDefault(t, "checks", "RAPID_CHECKS", "4")
	rapidDefault(t, "steps", "RAPID_STEPS", "10")
	var sequences, steps atomic.Int64
	start := time.Now()
	t.Cleanup(func() {
		d := time.Since(start)
		t.Logf("%d sequences, %d steps in %s: %.0f sequences/min, %.0f steps/min",
			sequences.Load(), steps.Load(), d.Round(time.Millisecond),
			float64(sequences.Load())/d.Minutes(), float64(steps.Load())/d.Minutes())
		t.Logf("InstanceExists answered: present %d, error %d, absent %d (each absence held against the truth)",
			w.present.Load(), w.errored.Load(), w.absent.Load())
	})
	rapid.Check(t, func(rt *rapid.T) {
		m := newSimModel(rt, w, &steps)
		sequences.Add(1) // not counting the draws rapid discards
		rt.Repeat(m.actions())
	})
}

// rapidDefault sets rapid's flag -rapid.<name> to value for this test when
// neither the command line nor env (which rapid reads itself) set it; the
// package's other rapid tests keep rapid's defaults.
func rapidDefault(t *testing.T, name, env, value string) {
	f := flag.Lookup("rapid." + name)
	if f == nil {
		t.Fatalf("rapid has no flag -rapid.%s", name)
	}
	set := false
	flag.Visit(func(g *flag.Flag) { set = set || g == f })
	if _, ok := os.LookupEnv(env); ok || set {
		return
	}
	old := f.Value.String()
	if err := f.Value.Set(value); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Value.Set(old) })
}
