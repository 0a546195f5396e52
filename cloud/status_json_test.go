package cloud_test

import (
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/backends"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/cloud"
)

// The /vcenters JSON is a documented contract (cmd/vsphere-federated-ccm
// README): its field names stay as they are, whatever type serves them.
// Now that the backend's own Status is embedded, a tag renamed there, or
// a field added to it, would change the endpoint: every field set, the
// keys are exactly these, and the backend's reachability and connect
// progress are served flat, not as objects of their own.
func TestVCenterStatusJSONFieldNames(t *testing.T) {
	now := time.Now().UTC()
	st := cloud.VCenterStatus{Name: "vc1", Server: "vc1.example.com", Reachability: "down", Since: now, LastError: "dial tcp: refused",
		Status: backends.Status{
			State: backends.State{
				Reachability: backends.Reachability{State: backends.ConnDown, Err: errors.New("dial tcp: refused"), Since: now},
				Connect:      backends.ConnectProgress{Phase: "dialing", Last: now},
				InstanceUUID: "uuid",
				Inventoried:  true,
			},
			Inventory:          &backends.InventoryStatus{InService: true, VMs: 1, Updates: 1},
			Session:            &backends.Session{LoggedIn: now, AgeSeconds: 1, Credentials: "config file"},
			RefusedCredentials: []backends.RefusedCredentials{{Source: "secret", Refusals: 1, Last: now, Retry: now}},
			Budget:             &backends.BudgetStatus{RequestsPerSecond: 1, RequestBurst: 1, Waits: 1, Rejections: 1},
			Certificate:        &backends.Certificate{NotAfter: now, ExpiresInSeconds: 1, Subject: "CN=vc1", Issuer: "CN=ca", SHA256Thumbprint: "AA:BB"},
		},
		Breaker: "open", TwinsIndexed: true, NodeDeletion: cloud.NodeDeletionStatus{MinAbsence: "30s", Frozen: true, FrozenBy: "vcenter.vc1.nodeDeletion", HeldNodes: 1}}
	b, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{
		"":                   {"breaker", "budget", "certificate", "instanceUUID", "inventory", "lastError", "name", "nodeDeletion", "reachability", "refusedCredentials", "server", "session", "since", "twinsIndexed"},
		"session":            {"ageSeconds", "credentials", "loggedIn"},
		"inventory":          {"inService", "updates", "vms"},
		"refusedCredentials": {"lastRefused", "refusals", "retry", "source"},
		"budget":             {"rejections", "requestBurst", "requestsPerSecond", "waits"},
		"certificate":        {"expiresInSeconds", "issuer", "notAfter", "sha256Thumbprint", "subject"},
		"nodeDeletion":       {"frozen", "frozenBy", "heldNodes", "minAbsence"},
	}
	for path, keys := range want {
		obj := got
		if path != "" {
			switch v := got[path].(type) {
			case map[string]any:
				obj = v
			case []any:
				obj, _ = v[0].(map[string]any)
			}
		}
		if k := slices.Sorted(maps.Keys(obj)); !slices.Equal(k, keys) {
			t.Errorf("/vcenters %q keys %v; want %v\n%s", path, k, keys, b)
		}
	}
	if got["reachability"] != "down" {
		t.Errorf("reachability %v; want the string \"down\"\n%s", got["reachability"], b)
	}
}
