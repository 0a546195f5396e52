package main

import (
	"context"
	"maps"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/cloud-provider/app"
	ccmconfig "k8s.io/cloud-provider/app/config"
	genericcontrollermanager "k8s.io/controller-manager/app"
	"k8s.io/controller-manager/controller"
	"k8s.io/klog/v2"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/cloud/servingcert"
)

// servingCertWorkers decide kubelet serving certificate requests: one
// lookup each, most answered from the inventories.
const servingCertWorkers = 2

// controllers are the cloud-provider's controllers and the kubelet serving
// certificate approver, which runs only when --controllers names it (like
// every controller, on the leader alone). provider is the one Initialize
// is called on: read when the controllers start, after it is set.
func controllers(provider func() servingcert.VMs, m *servingcert.Metrics) map[string]app.ControllerInitFuncConstructor {
	out := maps.Clone(app.DefaultInitFuncConstructors)
	out[servingcert.ControllerName] = app.ControllerInitFuncConstructor{
		// With --use-service-account-credentials, its own ServiceAccount
		// (the chart binds the approval rights to it only when enabled).
		InitContext: app.ControllerInitContext{ClientName: servingcert.ControllerName},
		Constructor: func(initContext app.ControllerInitContext, cc *ccmconfig.CompletedConfig, _ cloudprovider.Interface) app.InitFunc {
			return func(ctx context.Context, _ genericcontrollermanager.ControllerContext) (controller.Interface, bool, error) {
				client := cc.ClientBuilder.ClientOrDie(initContext.ClientName)
				broadcaster := record.NewBroadcaster(record.WithContext(ctx))
				broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events("")})
				recorder := broadcaster.NewRecorder(scheme.Scheme, v1.EventSource{Component: servingcert.ControllerName})
				a, err := servingcert.New(client, cc.SharedInformers.Certificates().V1().CertificateSigningRequests(),
					cc.SharedInformers.Core().V1().Nodes(), provider(), recorder, m, servingcert.Options{})
				if err != nil {
					broadcaster.Shutdown()
					return nil, false, err
				}
				go func() {
					defer broadcaster.Shutdown()
					a.Run(klog.NewContext(ctx, klog.FromContext(ctx)), servingCertWorkers)
				}()
				return nil, true, nil
			}
		},
	}
	return out
}
