package harness

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// ControlPlaneOptions shape a control plane.
type ControlPlaneOptions struct {
	// AssetsDir holds kube-apiserver and etcd; default Provision().
	AssetsDir string
	// Dir receives the apiserver's and etcd's output (apiserver.log,
	// etcd.log) and the admin kubeconfig; required.
	Dir string
	// StartTimeout per component; default 60s (2 cores, tests in parallel).
	StartTimeout time.Duration
}

// ControlPlane is a real kube-apiserver and etcd started through envtest,
// both on 127.0.0.1 only, with RBAC and service account token signing.
type ControlPlane struct {
	Env *envtest.Environment
	// Config, Client and Dynamic are the administrator (system:masters).
	Config  *rest.Config
	Client  kubernetes.Interface
	Dynamic dynamic.Interface
	// Mapper resolves kinds to resources, refreshing on a miss.
	Mapper *restmapper.DeferredDiscoveryRESTMapper
	// AdminKubeconfig is a kubeconfig file for Config (for kubectl).
	AdminKubeconfig string

	dir      string
	untrack  func()
	stopOnce sync.Once
	stopErr  error
	logs     []*os.File
}

// StartControlPlane starts etcd and kube-apiserver. The known-good flags for
// this apiserver without a controller manager or kubelets are set:
// --advertise-address=127.0.0.1, --endpoint-reconciler-type=none, and the
// TaintNodesByCondition admission plugin disabled (nothing here would ever
// remove its not-ready taint).
func StartControlPlane(opts ControlPlaneOptions) (_ *ControlPlane, err error) {
	if opts.Dir == "" {
		return nil, fmt.Errorf("harness: ControlPlaneOptions.Dir is required")
	}
	if opts.AssetsDir == "" {
		if opts.AssetsDir, err = Provision(); err != nil {
			return nil, err
		}
	}
	if opts.StartTimeout == 0 {
		opts.StartTimeout = 60 * time.Second
	}
	if err := os.MkdirAll(opts.Dir, 0o755); err != nil {
		return nil, err
	}
	cp := &ControlPlane{dir: opts.Dir}
	defer func() {
		if err != nil {
			_ = cp.Stop()
		}
	}()

	env := &envtest.Environment{
		BinaryAssetsDirectory:    opts.AssetsDir,
		ControlPlaneStartTimeout: opts.StartTimeout,
		// kube-apiserver drains clients on SIGTERM; past this it gets SIGKILL.
		ControlPlaneStopTimeout: 10 * time.Second,
	}
	cp.Env = env
	api := env.ControlPlane.GetAPIServer()
	etcd := &envtest.Etcd{}
	env.ControlPlane.Etcd = etcd
	api.Path, err = deathSignalWrapper(opts.Dir, opts.AssetsDir, "kube-apiserver")
	if err != nil {
		return nil, err
	}
	etcd.Path, err = deathSignalWrapper(opts.Dir, opts.AssetsDir, "etcd")
	if err != nil {
		return nil, err
	}
	api.Configure().
		Set("advertise-address", "127.0.0.1").
		Set("endpoint-reconciler-type", "none").
		Append("disable-admission-plugins", "TaintNodesByCondition")
	// Front-proxy (request header) authentication as kubeadm configures it,
	// so the extension-apiserver-authentication ConfigMap that components
	// with delegated authentication (the CCM's secure port) read is complete.
	// envtest writes its client CA to <CertDir>/client-cert-auth-ca.crt.
	api.CertDir = filepath.Join(opts.Dir, "pki")
	if err := os.MkdirAll(api.CertDir, 0o700); err != nil {
		return nil, err
	}
	api.Configure().
		Set("requestheader-client-ca-file", filepath.Join(api.CertDir, "client-cert-auth-ca.crt")).
		Set("requestheader-allowed-names", "front-proxy-client").
		Set("requestheader-username-headers", "X-Remote-User").
		Set("requestheader-group-headers", "X-Remote-Group").
		Set("requestheader-extra-headers-prefix", "X-Remote-Extra-")
	// Loopback only: envtest would pick ports on "localhost".
	apiPort, err := FreePort("127.0.0.1")
	if err != nil {
		return nil, err
	}
	api.SecureServing.Address = "127.0.0.1"
	api.SecureServing.Port = strconv.Itoa(apiPort)
	etcdPort, err := FreePort("127.0.0.1")
	if err != nil {
		return nil, err
	}
	peerPort, err := FreePort("127.0.0.1")
	if err != nil {
		return nil, err
	}
	etcd.URL = &url.URL{Scheme: "http", Host: "127.0.0.1:" + strconv.Itoa(etcdPort)}
	etcd.Configure().Set("listen-peer-urls", "http://127.0.0.1:"+strconv.Itoa(peerPort))
	if api.Out, err = cp.logFile("apiserver.log"); err != nil {
		return nil, err
	}
	api.Err = api.Out
	if etcd.Out, err = cp.logFile("etcd.log"); err != nil {
		return nil, err
	}
	etcd.Err = etcd.Out

	cp.untrack = track(func() { _ = cp.Stop() })
	cfg, err := env.Start()
	if err != nil {
		return nil, fmt.Errorf("harness: starting kube-apiserver and etcd (logs in %s): %w", opts.Dir, err)
	}
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = 200, 400
	cp.Config = cfg
	if cp.Client, err = kubernetes.NewForConfig(cfg); err != nil {
		return nil, err
	}
	if cp.Dynamic, err = dynamic.NewForConfig(cfg); err != nil {
		return nil, err
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, err
	}
	cp.Mapper = restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))
	cp.AdminKubeconfig = filepath.Join(opts.Dir, "admin.kubeconfig")
	if err := WriteKubeconfig(cp.AdminKubeconfig, cfg, "admin"); err != nil {
		return nil, err
	}
	return cp, nil
}

func (cp *ControlPlane) logFile(name string) (*os.File, error) {
	f, err := os.Create(filepath.Join(cp.dir, name))
	if err != nil {
		return nil, err
	}
	cp.logs = append(cp.logs, f)
	return f, nil
}

// Stop stops kube-apiserver and etcd and removes their data; it is safe to
// call more than once.
func (cp *ControlPlane) Stop() error {
	cp.stopOnce.Do(func() {
		if cp.untrack != nil {
			cp.untrack()
		}
		if cp.Env != nil && cp.Config != nil {
			cp.stopErr = cp.Env.Stop()
		} else if cp.Env != nil {
			// A failed Start may have left etcd running.
			_ = cp.Env.ControlPlane.Stop()
		}
		for _, f := range cp.logs {
			_ = f.Close()
		}
	})
	return cp.stopErr
}

// ServiceAccountToken requests a token for namespace/name through the
// TokenRequest API, as the kubelet does for a Pod's projected token.
func (cp *ControlPlane) ServiceAccountToken(ctx context.Context, namespace, name string, ttl time.Duration) (string, error) {
	tr, err := cp.Client.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(ttl / time.Second))},
	}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("harness: token for serviceaccount %s/%s: %w", namespace, name, err)
	}
	return tr.Status.Token, nil
}

// ServiceAccountConfig is a client config authenticating with token only
// (no client certificate): what a Pod of that ServiceAccount gets.
func (cp *ControlPlane) ServiceAccountConfig(token string) *rest.Config {
	return &rest.Config{
		Host:            cp.Config.Host,
		BearerToken:     token,
		TLSClientConfig: rest.TLSClientConfig{CAData: cp.Config.CAData},
	}
}

// WriteKubeconfig writes cfg (host, CA, and a client certificate or bearer
// token) as a kubeconfig file with a single context.
func WriteKubeconfig(path string, cfg *rest.Config, user string) error {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["envtest"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos[user] = &clientcmdapi.AuthInfo{
		Token:                 cfg.BearerToken,
		ClientCertificateData: cfg.CertData,
		ClientKeyData:         cfg.KeyData,
	}
	kc.Contexts["envtest"] = &clientcmdapi.Context{Cluster: "envtest", AuthInfo: user}
	kc.CurrentContext = "envtest"
	return clientcmd.WriteToFile(*kc, path)
}

// deathSignalWrapper returns a script that execs the binary with a parent
// death signal (setpriv --pdeathsig KILL), so kube-apiserver and etcd die
// with the process that started them even when it never runs its cleanup
// (a test binary killed at its -timeout). Without setpriv it returns the
// binary itself.
func deathSignalWrapper(dir, assets, name string) (string, error) {
	bin := filepath.Join(assets, name)
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		return bin, nil
	}
	if err := exec.Command(setpriv, "--pdeathsig", "KILL", "--", "true").Run(); err != nil {
		return bin, nil // setpriv too old or not permitted: no wrapper
	}
	path := filepath.Join(dir, name+".sh")
	script := fmt.Sprintf("#!/bin/sh\nexec %s --pdeathsig KILL -- %s \"$@\"\n", shellQuote(setpriv), shellQuote(bin))
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		return "", err
	}
	return path, nil
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
