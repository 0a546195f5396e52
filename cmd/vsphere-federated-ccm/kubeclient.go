package main

import (
	"fmt"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// kubeClient is the API client of the operator commands (validate,
// diagnose): --kubeconfig when set, else in-cluster (the Pod's
// ServiceAccount). userAgent names the command in the API server's
// audit log.
func kubeClient(kubeconfig, userAgent string) (kubernetes.Interface, error) {
	const op = "main.kubeClient"
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
		&clientcmd.ClientConfigLoadingRules{ExplicitPath: kubeconfig}, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	cfg.UserAgent = userAgent
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	return client, nil
}
