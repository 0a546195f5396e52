package cloud

// Unit tests of the record of served vCenters (history.go), one decision
// at a time: each asserts what one branch decides, so that a comparison
// turned the other way (a mutation test's mutant) fails it. See
// test/mutation.sh.

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/discovery"
)

var histT0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func histServing(name, server string, port int, instance string, dcs ...string) serving {
	return serving{VCenter: config.VCenter{Name: name, Server: server, Port: port, Datacenters: dcs}, instance: instance}
}

func TestHistoryRecordIsAVCenter(t *testing.T) {
	cur := func(instance string) serving { return histServing("vc1", "VC.example.com", 443, instance) }
	for _, c := range []struct {
		name   string
		r      discovery.VCenterRecord
		cur    serving
		strict bool
		want   bool
	}{
		{"no instance recorded, strict", discovery.VCenterRecord{Server: "vc.example.com", Port: 443}, cur("x"), true, true},
		{"no instance recorded, none now", discovery.VCenterRecord{Server: "vc.example.com", Port: 443}, cur(""), true, true},
		{"instance not known now, lenient", discovery.VCenterRecord{Server: "vc.example.com", Port: 443, InstanceUUID: "x"}, cur(""), false, true},
		{"instance not known now, strict", discovery.VCenterRecord{Server: "vc.example.com", Port: 443, InstanceUUID: "x"}, cur(""), true, false},
		{"same instance", discovery.VCenterRecord{Server: "vc.example.com", Port: 443, InstanceUUID: "x"}, cur("x"), true, true},
		{"another instance", discovery.VCenterRecord{Server: "vc.example.com", Port: 443, InstanceUUID: "x"}, cur("y"), false, false},
		{"record of any port", discovery.VCenterRecord{Server: "vc.example.com", InstanceUUID: "x"}, cur("x"), true, true},
		{"another port", discovery.VCenterRecord{Server: "vc.example.com", Port: 8443, InstanceUUID: "x"}, cur("x"), false, false},
		{"another server", discovery.VCenterRecord{Server: "other.example.com", Port: 443}, cur("x"), false, false},
	} {
		if got := recordIs(c.r, c.cur, c.strict); got != c.want {
			t.Errorf("%s: recordIs(%+v, %+v, strict %v) = %v, want %v", c.name, c.r, c.cur, c.strict, got, c.want)
		}
	}
}

func TestHistoryFindUnitesEntriesOfOneVCenter(t *testing.T) {
	x := discovery.VCenterRecord{Server: "vc.example.com", Port: 443, InstanceUUID: "x"}
	// An entry answering as another appliance: the recorded one is not
	// served, whatever the other entry (unknown instance) says.
	if _, ok := find([]serving{histServing("a", "vc.example.com", 443, ""), histServing("b", "vc.example.com", 443, "y")}, x, false); ok {
		t.Fatal("found a recorded instance while an entry of its server answers as another")
	}
	// Entries of unknown or the same instance: served, as the union of
	// their datacenters.
	got, ok := find([]serving{
		histServing("other", "other.example.com", 443, "z", "dc9"),
		histServing("a", "vc.example.com", 443, "", "dc1"),
		histServing("b", "vc.example.com", 443, "x", "dc2", "dc1"),
	}, x, false)
	if !ok || got.Name != "a" || !slices.Equal(got.Datacenters, []string{"dc1", "dc2"}) {
		t.Fatalf("find = %+v, %v; want entry a serving dc1, dc2", got, ok)
	}
	// One entry serving every datacenter: every datacenter.
	got, ok = find([]serving{histServing("a", "vc.example.com", 443, "x", "dc1"), histServing("b", "vc.example.com", 443, "x")}, x, false)
	if !ok || got.Datacenters != nil {
		t.Fatalf("find = %+v, %v; want every datacenter", got, ok)
	}
	// A record without instance is served by an entry that answered.
	if _, ok := find([]serving{histServing("a", "vc.example.com", 443, "y")}, discovery.VCenterRecord{Server: "vc.example.com", Port: 443}, true); !ok {
		t.Fatal("a record without instance not found at its server")
	}
}

func TestHistoryRetiringAgainExtendsTheRecord(t *testing.T) {
	rec := discovery.VCenterRecord{Server: "vc.example.com", Port: 443, InstanceUUID: "x"}
	h := &configHistory{History: discovery.History{
		Served: map[string]discovery.Served{"vc1": {VCenterRecord: rec}},
		Retired: []discovery.Retired{
			{VCenter: "vc1", VCenterRecord: rec, Datacenter: "dc7", Since: histT0, Until: histT0.Add(2 * time.Hour)},
			{VCenter: "vc1", VCenterRecord: rec, Since: histT0, Until: histT0.Add(time.Hour)},
		},
	}}
	now := histT0.Add(30 * time.Minute)
	if !h.update([]serving{histServing("vc2", "other.example.com", 443, "z")}, now, time.Hour) {
		t.Fatal("update reported no change")
	}
	if len(h.Retired) != 2 {
		t.Fatalf("retired %+v; want the two records, the whole vCenter's extended", h.Retired)
	}
	if r := h.Retired[1]; r.Datacenter != "" || !r.Since.Equal(histT0) || !r.Until.Equal(now.Add(time.Hour)) {
		t.Fatalf("whole vCenter's record %+v; want since %s until %s", r, histT0, now.Add(time.Hour))
	}
	if r := h.Retired[0]; r.Datacenter != "dc7" || !r.Until.Equal(histT0.Add(2*time.Hour)) {
		t.Fatalf("datacenter record %+v changed", r)
	}
	// The same record first in the list.
	h = &configHistory{History: discovery.History{
		Served:  map[string]discovery.Served{"vc1": {VCenterRecord: rec}},
		Retired: []discovery.Retired{{VCenter: "vc1", VCenterRecord: rec, Since: histT0, Until: histT0.Add(time.Hour)}},
	}}
	h.update(nil, now, time.Hour)
	if len(h.Retired) != 1 || !h.Retired[0].Until.Equal(now.Add(time.Hour)) {
		t.Fatalf("retired %+v; want one record until %s", h.Retired, now.Add(time.Hour))
	}
}

func TestHistoryUpdateRetiresWhatLeft(t *testing.T) {
	rec := discovery.VCenterRecord{Server: "vc.example.com", Port: 443, InstanceUUID: "x"}
	whole := func() *configHistory {
		return &configHistory{History: discovery.History{Served: map[string]discovery.Served{"vc1": {VCenterRecord: rec}}}}
	}
	// Served whole, still whole: nothing retired, nothing changed.
	h := whole()
	if h.update([]serving{histServing("vc1", "vc.example.com", 443, "x")}, histT0, time.Hour) {
		t.Fatalf("nothing changed, update reported a change: %+v", h)
	}
	if len(h.Retired) != 0 {
		t.Fatalf("served whole, still whole: retired %+v", h.Retired)
	}
	// Served whole, narrowed to dc1: every other datacenter retired.
	h = whole()
	if !h.update([]serving{histServing("vc1", "vc.example.com", 443, "x", "dc1")}, histT0, time.Hour) {
		t.Fatal("narrowed: update reported no change")
	}
	if len(h.Retired) != 1 || h.Retired[0].Datacenter != "*" || !h.Retired[0].Until.Equal(histT0.Add(time.Hour)) {
		t.Fatalf("narrowed to dc1: retired %+v; want \"*\" until %s", h.Retired, histT0.Add(time.Hour))
	}
	// Served dc1 and dc2, now dc2 only: dc1 retired.
	h = &configHistory{History: discovery.History{Served: map[string]discovery.Served{"vc1": {VCenterRecord: rec, Datacenters: []string{"dc1", "dc2"}}}}}
	h.update([]serving{histServing("vc1", "vc.example.com", 443, "x", "dc2")}, histT0, time.Hour)
	if len(h.Retired) != 1 || h.Retired[0].Datacenter != "dc1" {
		t.Fatalf("dc1 removed: retired %+v", h.Retired)
	}
	// An entry whose instance is not known now keeps the one recorded.
	h = whole()
	h.update([]serving{histServing("vc1", "vc.example.com", 443, "")}, histT0, time.Hour)
	if got := h.Served["vc1"].InstanceUUID; got != "x" {
		t.Fatalf("instance recorded for an entry not answering = %q, want x", got)
	}
}

func TestHistoryRetiredServedAgain(t *testing.T) {
	rec := discovery.VCenterRecord{Server: "vc.example.com", Port: 443, InstanceUUID: "x"}
	retired := func(dcs ...string) *configHistory {
		h := &configHistory{History: discovery.History{Served: map[string]discovery.Served{}}}
		for _, dc := range dcs {
			h.Retired = append(h.Retired, discovery.Retired{VCenter: "vc1", VCenterRecord: rec, Datacenter: dc, Since: histT0, Until: histT0.Add(time.Hour)})
		}
		return h
	}
	now := histT0.Add(time.Minute)
	// Whole again: forgotten.
	h := retired("", "dc1", "*")
	h.update([]serving{histServing("vc1", "vc.example.com", 443, "x")}, now, time.Hour)
	if len(h.Retired) != 0 {
		t.Fatalf("served whole again: retired %+v", h.Retired)
	}
	// Back with dc1 only: dc1 forgotten, dc2 kept, the whole vCenter's
	// record now every datacenter but those listed.
	h = retired("", "dc1", "dc2")
	h.update([]serving{histServing("vc1", "vc.example.com", 443, "x", "dc1")}, now, time.Hour)
	var dcs []string
	for _, r := range h.Retired {
		dcs = append(dcs, r.Datacenter)
	}
	if !slices.Equal(dcs, []string{"*", "dc2"}) {
		t.Fatalf("back with dc1: retired datacenters %q, want [* dc2]", dcs)
	}
	// Expired: gone whatever is served.
	h = retired("dc2")
	h.update(nil, histT0.Add(time.Hour), time.Hour)
	if len(h.Retired) != 0 {
		t.Fatalf("expired: retired %+v", h.Retired)
	}
	// Records made before identities were kept go by name.
	h = &configHistory{History: discovery.History{Retired: []discovery.Retired{
		{VCenter: "old", Since: histT0, Until: histT0.Add(time.Hour)},
		{VCenter: "gone", Since: histT0, Until: histT0.Add(time.Hour)},
	}}}
	h.update([]serving{histServing("old", "old.example.com", 443, "o"), histServing("vc2", "vc2.example.com", 443, "z")}, now, time.Hour)
	if len(h.Retired) != 1 || h.Retired[0].VCenter != "gone" {
		t.Fatalf("legacy records: retired %+v, want gone alone", h.Retired)
	}
}

func TestHistoryUnansweredInstance(t *testing.T) {
	vc := histServing("a", "vc.example.com", 443, "")
	was := discovery.Served{VCenterRecord: discovery.VCenterRecord{Server: "vc.example.com", Port: 443, InstanceUUID: "x"}}
	entry := func(name, instance string) serving { return histServing(name, "VC.example.com", 443, instance) }
	for _, c := range []struct {
		name    string
		had     bool
		current []serving
		want    string
	}{
		{"no entry answers", true, []serving{vc}, "x"},
		{"the others answer as recorded", true, []serving{vc, entry("b", "x")}, "x"},
		{"the others answer as another", true, []serving{vc, entry("b", "y")}, "y"},
		{"the others disagree", true, []serving{vc, entry("b", "x"), entry("c", "z")}, ""},
		{"another port answers", true, []serving{vc, histServing("p", "vc.example.com", 8443, "y")}, "x"},
		{"nothing recorded, one answers", false, []serving{vc, entry("b", "y"), entry("c", "y")}, "y"},
		{"nothing recorded, none answers", false, []serving{vc}, ""},
	} {
		if got := unanswered(was, c.had, vc, c.current); got != c.want {
			t.Errorf("%s: unanswered = %q, want %q", c.name, got, c.want)
		}
	}
}

func TestHistoryMergeKeepsWhatEitherHeld(t *testing.T) {
	rec := discovery.VCenterRecord{Server: "vc.example.com", Port: 443, InstanceUUID: "x"}
	other := discovery.VCenterRecord{Server: "other.example.com", Port: 443}
	o := &configHistory{History: discovery.History{
		Served: map[string]discovery.Served{
			"vc1": {VCenterRecord: rec, Datacenters: []string{"dc2", "dc1"}},
			"vc2": {VCenterRecord: other},
			"vc3": {VCenterRecord: rec, Datacenters: []string{"dc1"}},
			"vc4": {VCenterRecord: rec},
			"vc5": {VCenterRecord: rec, Datacenters: []string{"dc5"}},
		},
		Retired: []discovery.Retired{
			{VCenter: "old", VCenterRecord: rec, Datacenter: "dc1", Since: histT0, Until: histT0.Add(2 * time.Hour)},
			{VCenter: "old", VCenterRecord: rec, Datacenter: "dc2", Since: histT0, Until: histT0.Add(time.Hour)},
			{VCenter: "old", VCenterRecord: other, Datacenter: "dc1", Since: histT0, Until: histT0.Add(time.Hour)},
			{VCenter: "older", VCenterRecord: rec, Datacenter: "dc1", Since: histT0, Until: histT0.Add(time.Hour)},
		},
	}}
	h := &configHistory{}
	h.merge(&configHistory{History: discovery.History{Served: map[string]discovery.Served{
		"vc1": {VCenterRecord: rec, Datacenters: []string{"dc1"}},
		"vc2": {VCenterRecord: rec},
		"vc3": {VCenterRecord: rec},
		"vc4": {VCenterRecord: rec, Datacenters: []string{"dc4"}},
	}, Retired: []discovery.Retired{
		{VCenter: "old", VCenterRecord: rec, Datacenter: "dc1", Since: histT0, Until: histT0.Add(time.Hour)},
		{VCenter: "old", VCenterRecord: rec, Datacenter: "dc2", Since: histT0, Until: histT0.Add(3 * time.Hour)},
	}}})
	h.merge(o)
	want := map[string]discovery.Served{
		"vc1":                   {VCenterRecord: rec, Datacenters: []string{"dc1", "dc2"}},
		"vc2":                   {VCenterRecord: rec},
		"vc2@other.example.com": {VCenterRecord: other},
		"vc3":                   {VCenterRecord: rec},
		"vc4":                   {VCenterRecord: rec},
		"vc5":                   {VCenterRecord: rec, Datacenters: []string{"dc5"}},
	}
	if len(h.Served) != len(want) {
		t.Fatalf("served %+v, want %+v", h.Served, want)
	}
	for k, w := range want {
		if g, ok := h.Served[k]; !ok || g.VCenterRecord != w.VCenterRecord || !slices.Equal(g.Datacenters, w.Datacenters) {
			t.Errorf("served[%s] = %+v, want %+v", k, g, w)
		}
	}
	type key struct{ vcenter, server, dc string }
	until := map[key]time.Time{}
	for _, r := range h.Retired {
		k := key{r.VCenter, r.Server, r.Datacenter}
		if _, dup := until[k]; dup {
			t.Fatalf("retired twice: %+v in %+v", k, h.Retired)
		}
		until[k] = r.Until
	}
	for k, u := range map[key]time.Time{
		{"old", rec.Server, "dc1"}:   histT0.Add(2 * time.Hour),
		{"old", rec.Server, "dc2"}:   histT0.Add(3 * time.Hour),
		{"old", other.Server, "dc1"}: histT0.Add(time.Hour),
		{"older", rec.Server, "dc1"}: histT0.Add(time.Hour),
	} {
		if !until[k].Equal(u) {
			t.Errorf("retired %+v until %s, want %s", k, until[k], u)
		}
	}
	if len(until) != 4 {
		t.Fatalf("retired %+v, want 4 records", h.Retired)
	}
}

// The instances discovery compares answers with are every entry's, of
// the records that know their port. (How a retired record names its
// vCenter, default port and case included: discovery's
// TestRetiredNamesWhatLeft; the records are handed over as they are.)
func TestHistoryInstances(t *testing.T) {
	h := &configHistory{History: discovery.History{
		Served: map[string]discovery.Served{
			"a":      {VCenterRecord: discovery.VCenterRecord{Server: "vc.example.com", Port: 443, InstanceUUID: "y"}},
			"b":      {VCenterRecord: discovery.VCenterRecord{Server: "vc.example.com", Port: 443, InstanceUUID: "x"}},
			"c":      {VCenterRecord: discovery.VCenterRecord{Server: "vc.example.com", Port: 443, InstanceUUID: "x"}},
			"silent": {VCenterRecord: discovery.VCenterRecord{Server: "silent.example.com", Port: 443}},
			"legacy": {VCenterRecord: discovery.VCenterRecord{Server: "legacy.example.com", InstanceUUID: "l"}},
		},
	}}
	if got := h.Instances(); len(got) != 1 || !slices.Equal(got["vc.example.com:443"], []string{"x", "y"}) {
		t.Fatalf("instances %v, want vc.example.com:443 as [x y] alone", got)
	}
}

// histStore is a ConfigMap record over a fake cluster, counting writes.
func histStore(t *testing.T, objects ...runtime.Object) (configMapHistory, *fake.Clientset) {
	t.Helper()
	client := fake.NewClientset(objects...)
	return configMapHistory{client: client, object: types.NamespacedName{Namespace: "kube-system", Name: DefaultHistoryObject}, write: true}, client
}

func writesOf(client *fake.Clientset) int {
	n := 0
	for _, a := range client.Actions() {
		if a.GetVerb() == "create" || a.GetVerb() == "update" {
			n++
		}
	}
	return n
}

func histConfigMap(data map[string]string) *v1.ConfigMap {
	return &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: DefaultHistoryObject}, Data: data}
}

func TestHistoryConfigMapLoad(t *testing.T) {
	ctx := context.Background()
	s, _ := histStore(t)
	h, cm, err := s.load(ctx)
	if err != nil || cm != nil || len(h.Served) != 0 || !strings.Contains(h.cutoff.Why, "does not exist") {
		t.Fatalf("no ConfigMap: load = %+v, %v, %v", h, cm, err)
	}
	// No record key: an empty record, and the cutoff as held.
	s, _ = histStore(t, histConfigMap(map[string]string{legacyCutoffKey: "2026-01-02T03:04:05Z"}))
	h, cm, err = s.load(ctx)
	if err != nil || cm == nil || len(h.Served) != 0 || !h.cutoff.At.Equal(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)) {
		t.Fatalf("cutoff only: load = %+v, %v, %v", h, cm, err)
	}
	// A record.
	rec, _ := json.Marshal(configHistory{History: discovery.History{Served: map[string]discovery.Served{"vc1": {VCenterRecord: discovery.VCenterRecord{Server: "vc.example.com", Port: 443}}}}})
	s, _ = histStore(t, histConfigMap(map[string]string{historyKey: string(rec), legacyCutoffKey: "yesterday"}))
	h, _, err = s.load(ctx)
	if err != nil || h.Served["vc1"].Server != "vc.example.com" {
		t.Fatalf("record: load = %+v, %v", h, err)
	}
	if !h.cutoff.At.IsZero() || !strings.Contains(h.cutoff.Why, "RFC 3339") {
		t.Fatalf("unparsable cutoff read as %+v", h.cutoff)
	}
	// A record that does not parse is an error.
	s, _ = histStore(t, histConfigMap(map[string]string{historyKey: "{"}))
	if _, _, err := s.load(ctx); err == nil || !strings.Contains(err.Error(), historyKey) {
		t.Fatalf("bad record: err = %v", err)
	}
	// The cluster failing is an error, from record too.
	s, client := histStore(t)
	client.PrependReactor("get", "configmaps", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("apiserver down")
	})
	if _, _, err := s.record(ctx, &configHistory{}, false, nil, time.Hour, histT0); err == nil || !strings.Contains(err.Error(), "apiserver down") {
		t.Fatalf("record with the cluster failing: err = %v", err)
	}
	if hasCutoff(nil) {
		t.Fatal("hasCutoff(nil)")
	}
}

func TestHistoryConfigMapRecord(t *testing.T) {
	ctx := context.Background()
	current := []serving{histServing("vc1", "vc.example.com", 443, "x")}
	s, client := histStore(t)
	h, saved, err := s.record(ctx, &configHistory{}, false, current, time.Hour, histT0.Add(300*time.Millisecond))
	if err != nil || !saved || writesOf(client) != 1 {
		t.Fatalf("first record = %v, %v after %d writes; want saved by one create", saved, err, writesOf(client))
	}
	if want := histT0.Add(time.Second); !h.cutoff.At.Equal(want) {
		t.Fatalf("cutoff %s, want %s", h.cutoff.At, want)
	}
	cm, err := client.CoreV1().ConfigMaps("kube-system").Get(ctx, DefaultHistoryObject, metav1.GetOptions{})
	if err != nil || !strings.Contains(cm.Data[historyKey], "vc.example.com") || cm.Data[legacyCutoffKey] != "2026-03-01T12:00:01Z" {
		t.Fatalf("ConfigMap %+v, %v", cm, err)
	}
	// Unchanged: nothing written, saved.
	_, saved, err = s.record(ctx, h, false, current, time.Hour, histT0.Add(time.Minute))
	if err != nil || !saved || writesOf(client) != 1 {
		t.Fatalf("unchanged record = %v, %v after %d writes; want saved without a write", saved, err, writesOf(client))
	}
	// Changed: updated, the cutoff kept.
	_, saved, err = s.record(ctx, h, false, nil, time.Hour, histT0.Add(2*time.Minute))
	if err != nil || !saved || writesOf(client) != 2 {
		t.Fatalf("changed record = %v, %v after %d writes; want one update", saved, err, writesOf(client))
	}
	cm, _ = client.CoreV1().ConfigMaps("kube-system").Get(ctx, DefaultHistoryObject, metav1.GetOptions{})
	if cm.Data[legacyCutoffKey] != "2026-03-01T12:00:01Z" || !strings.Contains(cm.Data[historyKey], `"retired"`) {
		t.Fatalf("ConfigMap after the change: %+v", cm.Data)
	}
	// A ConfigMap without data: the record and the cutoff added.
	s, client = histStore(t, histConfigMap(nil))
	if _, saved, err := s.record(ctx, &configHistory{}, false, current, time.Hour, histT0); err != nil || !saved || writesOf(client) != 1 {
		t.Fatalf("record into an empty ConfigMap = %v, %v after %d writes", saved, err, writesOf(client))
	}
	cm, _ = client.CoreV1().ConfigMaps("kube-system").Get(ctx, DefaultHistoryObject, metav1.GetOptions{})
	if cm.Data[historyKey] == "" || cm.Data[legacyCutoffKey] != "2026-03-01T12:00:00Z" {
		t.Fatalf("ConfigMap without data, after: %+v", cm.Data)
	}
	// A write failing: known, not saved.
	s, client = histStore(t, histConfigMap(map[string]string{legacyCutoffKey: "2026-01-01T00:00:00Z"}))
	client.PrependReactor("update", "configmaps", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(v1.Resource("configmaps"), DefaultHistoryObject, errors.New("no"))
	})
	h, saved, err = s.record(ctx, &configHistory{}, false, current, time.Hour, histT0)
	if err != nil || saved || h.Served["vc1"].InstanceUUID != "x" {
		t.Fatalf("write refused: record = %+v, %v, %v; want it known, not saved", h, saved, err)
	}
}
