package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/backends"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/cloud"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config/credentials"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/test/poll"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/test/vcsim"
)

// Issue 20 (account lockout), through the running provider: vCenter
// refuses the config's login and the Secret after it is missing. Reloads
// (each refreshes every vCenter's credentials) and connection attempts
// send the refused login once, not at each of them, and /vcenters names
// the refused source; the Secret, once created, logs in.
func TestVCentersShowsRefusedCredentials(t *testing.T) {
	fed, err := vcsim.Start(vcsim.Options{VCenters: 1, Datacenters: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fed.Close)
	vc := fed.VCenters[0]
	const refused = "pw-inline-refused"
	yaml := fmt.Sprintf("global:\n  insecureFlag: true\n  requestTimeout: 5s\n  secretName: vsphere-creds\n  secretNamespace: kube-system\n"+
		"vcenter:\n  %s:\n    server: %s\n    port: %d\n    user: %q\n    password: %q\n", vc.Name, vc.Host, vc.Port, vc.User, refused)
	cfg, err := config.Parse([]byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	client := fake.NewClientset()
	before, _ := vc.SOAPCalls()
	var mu sync.Mutex
	var built []backends.Backend
	newBackend := vsphereBackends("", nil)
	c := cloud.New(cfg, cloud.Options{NewBackend: func(vc config.VCenter, creds credentials.Source) backends.Backend {
		b := newBackend(vc, creds)
		mu.Lock()
		defer mu.Unlock()
		built = append(built, b)
		return b
	}})
	stop := make(chan struct{})
	c.Start(client, stop)
	t.Cleanup(func() {
		close(stop)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		c.Stop(ctx)
	})
	ctx := t.Context()
	// connect probes each vCenter once (a login when it has none), as
	// lookups would, and as diagnose does (discovery.Connect).
	connect := func() {
		mu.Lock()
		bs := slices.Clone(built)
		mu.Unlock()
		for _, b := range bs {
			pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			_ = b.Probe(pctx)
			cancel()
		}
	}
	loginsSince := func() int64 {
		after, _ := vc.SOAPCalls()
		return after["Login"] - before["Login"]
	}

	const reloads = 12
	for range reloads {
		c.Reload(ctx)
		connect()
	}
	if n := loginsSince(); n != 1 {
		t.Fatalf("%d reloads and connection attempts: %d Login calls, want 1 (the config's, refused once)", reloads, n)
	}
	st := getVCenters(t, c, refused)
	if !slices.Equal(refusedSources(st), []string{"config file"}) || st.Session != nil || st.Reachability != "down" {
		t.Fatalf("/vcenters row = %+v; want the config file refused, no session", st)
	}

	// The Secret is created: it is read, tried once, and logs in.
	if _, err := client.CoreV1().Secrets("kube-system").Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "vsphere-creds"},
		Data:       map[string][]byte{credentials.UsernameKey(vc.Host): []byte(vc.User), credentials.PasswordKey(vc.Host): []byte(vc.Password)},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if !(poll.Schedule{Every: 50 * time.Millisecond, Within: 15 * time.Second}).Holds(func() bool {
		if st = getVCenters(t, c, refused); st.Session != nil {
			return true
		}
		connect()
		return false
	}) {
		t.Fatalf("no session with the Secret's login: %+v", st)
	}
	if st.Session.Credentials != "secret kube-system/vsphere-creds" || !slices.Equal(refusedSources(st), []string{"config file"}) {
		t.Fatalf("/vcenters row = %+v, session %+v", st, st.Session)
	}
	if n := loginsSince(); n != 2 {
		t.Fatalf("%d Login calls, want 2 (the config's refused once, the Secret's)", n)
	}
}

// getVCenters is the single row of /vcenters, checked to hold no password.
func getVCenters(t *testing.T, c *cloud.Cloud, password string) cloud.VCenterStatus {
	t.Helper()
	rec := httptest.NewRecorder()
	vcentersHandler(c).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, VCentersPath, nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("GET %s: %d", VCentersPath, rec.Code)
	}
	if strings.Contains(rec.Body.String(), password) {
		t.Fatalf("the password is in the answer:\n%s", rec.Body)
	}
	var got vcentersReport
	if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if len(got.VCenters) != 1 {
		t.Fatalf("GET: %+v", got.VCenters)
	}
	return got.VCenters[0]
}

// refusedSources names the row's refused credential sources.
func refusedSources(st cloud.VCenterStatus) []string {
	var out []string
	for _, r := range st.RefusedCredentials {
		out = append(out, r.Source)
	}
	return out
}
