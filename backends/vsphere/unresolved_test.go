package vsphere_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/backends/vsphere"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config"
)

// A config.VCenter whose defaults were never resolved (no RequestTimeout,
// no Port) is refused at construction, naming the vCenter and the field,
// instead of falling back to a default of the backend's own.
func TestNewRefusesUnresolvedConfig(t *testing.T) {
	resolved := config.VCenter{Name: "vc-a", Server: "vc-a.example.com"}.WithDefaults()
	for _, tc := range []struct {
		name  string
		field string
		edit  func(*config.VCenter)
	}{
		{"no requestTimeout", "RequestTimeout", func(v *config.VCenter) { v.RequestTimeout = 0 }},
		{"no port", "Port", func(v *config.VCenter) { v.Port = 0 }},
		{"no requestsPerSecond", "RequestsPerSecond", func(v *config.VCenter) { v.RequestsPerSecond = 0 }},
		{"no requestBurst", "RequestBurst", func(v *config.VCenter) { v.RequestBurst = 0 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := resolved
			tc.edit(&cfg)
			msg := func() (msg string) {
				defer func() {
					if r := recover(); r != nil {
						msg = fmt.Sprint(r)
					}
				}()
				b := vsphere.New(vsphere.Options{Config: cfg})
				_ = b.Close(context.Background())
				return ""
			}()
			if !strings.Contains(msg, "vc-a") || !strings.Contains(msg, tc.field) {
				t.Fatalf("New with %s: panic %q, want one naming vc-a and %s", tc.name, msg, tc.field)
			}
		})
	}
	// The same config, resolved, is accepted.
	b := vsphere.New(vsphere.Options{Config: resolved})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = b.Close(ctx)
}
