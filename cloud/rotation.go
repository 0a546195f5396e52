package cloud

// Credential rotation: every vCenter's credentials read again at each
// reload, a new session logged in before the old one is logged out.

import (
	"context"
	"fmt"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
)

// refreshCredentials lets every vCenter's backend pick up changed
// credentials, in parallel, each under its request deadline.
func (f *fleet) refreshCredentials(ctx context.Context) {
	cfg := f.cfg.Load()
	current := f.builtBackends()
	var wg sync.WaitGroup
	for _, vc := range cfg.VCenters {
		b, ok := current[vc.Name]
		if !ok {
			continue
		}
		wg.Go(func() {
			log := klog.FromContext(ctx).WithValues("vcenter", vc.Name)
			rctx, cancel := context.WithTimeout(ctx, vc.RequestTimeout)
			defer cancel()
			rotated, err := b.RefreshCredentials(rctx, vc.RequestTimeout)
			switch {
			case err != nil:
				log.Error(err, "Credentials could not be refreshed; the current session keeps serving")
				f.observeCredentials(vc.Name, "error")
				f.events.record(f.credentialsObject(vc), v1.EventTypeWarning, ReasonCredentialsFailed,
					fmt.Sprintf("vcenter %s: %v; the current session keeps serving", vc.Name, err))
			case rotated:
				log.Info("Credentials rotated: new session in use, the old one is logged out")
				f.observeCredentials(vc.Name, "rotated")
				f.events.record(f.credentialsObject(vc), v1.EventTypeNormal, ReasonCredentialsRotated,
					fmt.Sprintf("vcenter %s: logged in with the new credentials", vc.Name))
			}
		})
	}
	wg.Wait()
}

func (f *fleet) observeCredentials(vcenter, result string) {
	f.opts.Metrics.credentials.WithLabelValues(vcenter, result).Inc()
}
