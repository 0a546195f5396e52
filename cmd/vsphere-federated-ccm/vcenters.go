package main

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"time"

	ccmconfig "k8s.io/cloud-provider/app/config"
	genericcontrollermanager "k8s.io/controller-manager/app"
	"k8s.io/klog/v2"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/cloud"
)

// VCentersPath is where the running CCM serves its vCenters' status.
const VCentersPath = "/vcenters"

// vcentersReport is the answer of VCentersPath.
type vcentersReport struct {
	Time     time.Time             `json:"time"`
	VCenters []cloud.VCenterStatus `json:"vcenters"`
}

// vcentersHandler answers GET VCentersPath from the provider's memory:
// never a call to vCenter, so it answers at once during any outage. A
// vCenter's row names the credential sources it refused
// (refusedCredentials), and when each is sent again unchanged.
func vcentersHandler(provider *cloud.Cloud) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		body, err := json.MarshalIndent(vcentersReport{Time: time.Now().UTC(), VCenters: provider.VCenterStatuses()}, "", "  ")
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(append(body, '\n'))
	})
}

// serveVCenters serves VCentersPath on its own port (--vcenters-port),
// with the secure port's certificate, TLS settings, delegated
// authentication and authorization (an RBAC rule for the non-resource URL
// /vcenters, as for /metrics), through the same handler chain
// (controller-manager's BuildHandlerChain). Port 0 serves nothing.
//
// Why its own port: k8s.io/cloud-provider's app.Run builds the secure
// port's mux itself (NewBaseHandler: /healthz with the controllers' and
// leader election's checks, /configz, /metrics, profiling) and starts
// serving it, with no way to add a path; replacing that server would mean
// rebuilding those health checks outside the library. So the library's
// server, and the liveness probe on /healthz, stay exactly as they are.
// It is called once, at start: a port asked for that cannot be served (out
// of range, no secure port to take the certificate from, or held by
// another process on the host network) is an error naming the flag, which
// main makes fatal. It serves until the process ends, as the library's own
// server does (stop is the command's stop channel).
func serveVCenters(c *ccmconfig.CompletedConfig, provider *cloud.Cloud, port int, stop <-chan struct{}) error {
	const op = "main.serveVCenters"
	if port == 0 {
		return nil
	}
	if port < 0 || port > 65535 {
		return fmt.Errorf("%s: --vcenters-port=%d: want 0 (off) or a port from 1 to 65535", op, port)
	}
	if c.SecureServing == nil || c.SecureServing.Listener == nil {
		return fmt.Errorf("%s: --vcenters-port=%d needs the secure port (--secure-port is 0): %s is served with its certificate, authentication and authorization", op, port, VCentersPath)
	}
	host, _, err := net.SplitHostPort(c.SecureServing.Listener.Addr().String())
	if err != nil {
		return fmt.Errorf("%s: --vcenters-port=%d: %w", op, port, err)
	}
	addr := net.JoinHostPort(host, strconv.Itoa(port))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("%s: --vcenters-port=%d: cannot listen on %s (with hostNetwork, another process of the host may hold the port: choose a free one): %w", op, port, addr, err)
	}
	serving := *c.SecureServing // the same certificate and TLS settings
	serving.Listener = ln
	mux := http.NewServeMux()
	mux.Handle(VCentersPath, vcentersHandler(provider))
	handler := genericcontrollermanager.BuildHandlerChain(mux, &c.Authorization, &c.Authentication)
	if _, _, err := serving.Serve(handler, 0, stop); err != nil {
		_ = ln.Close()
		return fmt.Errorf("%s: --vcenters-port=%d: %w", op, port, err)
	}
	klog.Background().Info("Serving the vCenters' status", "address", ln.Addr().String(), "path", VCentersPath)
	return nil
}
