package discovery_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/discovery"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/test/backendtest"
)

// A Target's settings come resolved from the config: one missing is a
// bug, refused naming the field, not a default of discovery's own (the
// breaker once tripped after 5 failures when ConsecutiveFailures was 0).
func TestSetVCentersRequiresSettings(t *testing.T) {
	valid := discovery.Target{Name: "vc1", Server: "vc1:443", Backend: backendtest.New(),
		RequestTimeout: time.Second, ConsecutiveFailures: 5, OpenTimeout: time.Minute}
	d := discovery.New([]discovery.Target{valid}, discovery.Options{})
	t.Cleanup(d.Close)
	for _, tc := range []struct {
		field string
		edit  func(*discovery.Target)
	}{
		{"Server", func(v *discovery.Target) { v.Server = "" }},
		{"RequestTimeout", func(v *discovery.Target) { v.RequestTimeout = 0 }},
		{"ConsecutiveFailures", func(v *discovery.Target) { v.ConsecutiveFailures = 0 }},
		{"OpenTimeout", func(v *discovery.Target) { v.OpenTimeout = 0 }},
	} {
		t.Run(tc.field, func(t *testing.T) {
			v := valid
			tc.edit(&v)
			msg := func() (msg string) {
				defer func() {
					if r := recover(); r != nil {
						msg = fmt.Sprint(r)
					}
				}()
				d.SetVCenters([]discovery.Target{v})
				return ""
			}()
			if want := "Target vc1 has no " + tc.field; !strings.Contains(msg, want) {
				t.Fatalf("SetVCenters without %s: panic %q, want one saying %q", tc.field, msg, want)
			}
		})
	}
}
