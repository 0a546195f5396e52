package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/backends"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/cloud"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config/credentials"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/test/backendtest"
)

// /vcenters answers GET with every configured vCenter's status as JSON,
// from memory (a vCenter down is reported, not asked), and only GET/HEAD.
func TestVCentersHandler(t *testing.T) {
	fleet := map[string]*backendtest.Backend{"vcA": backendtest.New(), "vcB": backendtest.New()}
	fleet["vcB"].SetReachability(backends.ConnDown, errors.New("dial tcp: connection refused"))
	cfg, err := config.Parse([]byte("global:\n  user: u\n  password: secret-pw\nvcenter:\n  vcA:\n    server: a.example.com\n  vcB:\n    server: b.example.com\n"))
	if err != nil {
		t.Fatal(err)
	}
	c := cloud.New(cfg, cloud.Options{NewBackend: func(vc config.VCenter, _ credentials.Source) backends.Backend { return fleet[vc.Name] }})
	stop := make(chan struct{})
	c.Start(nil, stop)
	t.Cleanup(func() {
		close(stop)
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		c.Stop(ctx)
	})
	h := vcentersHandler(c)

	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, VCentersPath, nil))
	if rec.Code != http.StatusOK || rec.Header().Get("Content-Type") != "application/json" {
		t.Fatalf("GET: %d %s", rec.Code, rec.Header().Get("Content-Type"))
	}
	if strings.Contains(rec.Body.String(), "secret-pw") {
		t.Fatalf("the password is in the answer:\n%s", rec.Body)
	}
	var got vcentersReport
	if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if len(got.VCenters) != 2 || got.VCenters[0].Name != "vcA" || got.VCenters[0].Reachability != "up" ||
		got.VCenters[1].Reachability != "down" || got.VCenters[1].LastError != "dial tcp: connection refused" || got.VCenters[1].Breaker != "closed" {
		t.Errorf("GET: %+v", got.VCenters)
	}
	if fleet["vcB"].Calls() != 0 || fleet["vcB"].Probes() != 0 {
		t.Error("/vcenters asked a vCenter")
	}

	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, VCentersPath, nil))
	if rec.Code != http.StatusMethodNotAllowed {
		t.Errorf("POST: %d, want 405", rec.Code)
	}
}

// diagnose's arguments: usage errors exit 2, help exits 0, and a config
// that does not load is an error before anything is asked.
func TestDiagnoseArguments(t *testing.T) {
	for args, want := range map[string]int{
		"":                                exitUsage,
		"node":                            exitUsage,
		"node a b":                        exitUsage,
		"pods":                            exitUsage,
		"nodes -o yaml":                   exitUsage,
		"--help":                          exitOK,
		"node a --bogus=1":                exitUsage,
		"nodes --kubeconfig=/nonexistent": exitUsage,
	} {
		var out, errOut bytes.Buffer
		if got := runDiagnose(strings.Fields(args), cloud.BuildInfo{Version: "test"}, &out, &errOut); got != want {
			t.Errorf("diagnose %s: exit %d, want %d (stderr %s)", args, got, want, errOut.String())
		}
		if out.Len() != 0 {
			t.Errorf("diagnose %s: wrote a report: %s", args, out.String())
		}
	}
}
