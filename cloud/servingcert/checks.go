// Package servingcert approves kubelet serving certificates against vCenter:
// a kubernetes.io/kubelet-serving CertificateSigningRequest is approved only
// when it comes from the Node it names, asks for what a kubelet asks for,
// and names only that Node's VM's guest addresses and host name as vCenter
// reports them; anything else is denied with the check that failed. Nothing
// in Kubernetes approves these requests (kube-controller-manager approves
// only client certificates), so clusters either run an approver that checks
// nothing or skip TLS to kubelets.
package servingcert

import (
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	certificatesv1 "k8s.io/api/certificates/v1"
)

// The request's fixed parts, as the kubelet's certificate manager makes
// them (k8s.io/kubernetes pkg/kubelet/certificate: a serving certificate
// for system:node:<name>, organisation system:nodes).
const (
	nodeUserPrefix = "system:node:"
	nodesGroup     = "system:nodes"
)

// Reasons name the check that decided a request: the condition's reason,
// and the metric's label.
const (
	ReasonApproved     = "VSphereVMVerified"
	ReasonRequester    = "RequesterNotTheNode"
	ReasonMalformed    = "MalformedRequest"
	ReasonSubject      = "SubjectNotTheNode"
	ReasonUsages       = "UsagesNotKubeletServing"
	ReasonNoSANs       = "NoSubjectAltNames"
	ReasonForbiddenSAN = "ForbiddenSubjectAltName"
	ReasonNoNode       = "NodeNotFound"
	ReasonNoVM         = "VMNotFound"
	ReasonIdentity     = "VMHeldByAnotherNode"
	ReasonIPSAN        = "IPNotOnVM"
	ReasonDNSSAN       = "DNSNameNotTheNode"
)

// denial is a check that failed: its reason and a message saying what was
// asked and what vCenter or the cluster holds.
type denial struct {
	reason, message string
}

func deny(reason, format string, args ...any) *denial {
	return &denial{reason: reason, message: fmt.Sprintf(format, args...)}
}

// request is what the checks read of a CSR: the Node it is for and the
// names it asks for.
type request struct {
	node string
	ips  []netip.Addr
	dns  []string
}

// kubeletUsages are the usages a kubelet asks for: digital signature and
// server auth, with key encipherment for an RSA key (the certificate
// manager's, pkg/kubelet/certificate's).
var kubeletUsages = []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageKeyEncipherment, certificatesv1.UsageServerAuth}

// parse runs the checks that need nothing but the CSR itself: who asked,
// for whom, for what.
func parse(csr *certificatesv1.CertificateSigningRequest) (*request, *denial) {
	user := csr.Spec.Username
	node, ok := strings.CutPrefix(user, nodeUserPrefix)
	if !ok || node == "" || !slices.Contains(csr.Spec.Groups, nodesGroup) {
		return nil, deny(ReasonRequester, "requested by %q (groups %v): only a Node's own kubelet (user system:node:<name>, group %s) gets a serving certificate", user, csr.Spec.Groups, nodesGroup)
	}
	block, _ := pem.Decode(csr.Spec.Request)
	if block == nil || block.Type != "CERTIFICATE REQUEST" {
		return nil, deny(ReasonMalformed, "spec.request holds no PEM CERTIFICATE REQUEST")
	}
	x, err := x509.ParseCertificateRequest(block.Bytes)
	if err != nil {
		return nil, deny(ReasonMalformed, "spec.request: %v", err)
	}
	if err := x.CheckSignature(); err != nil {
		return nil, deny(ReasonMalformed, "spec.request is not signed by its key: %v", err)
	}
	if x.Subject.CommonName != user || !slices.Equal(x.Subject.Organization, []string{nodesGroup}) {
		return nil, deny(ReasonSubject, "subject CN=%q O=%v: want CN=%q O=[%s], the requester", x.Subject.CommonName, x.Subject.Organization, user, nodesGroup)
	}
	for _, u := range csr.Spec.Usages {
		if !slices.Contains(kubeletUsages, u) {
			return nil, deny(ReasonUsages, "usage %q: a kubelet asks only for %v", u, kubeletUsages)
		}
	}
	if !slices.Contains(csr.Spec.Usages, certificatesv1.UsageServerAuth) || !slices.Contains(csr.Spec.Usages, certificatesv1.UsageDigitalSignature) {
		return nil, deny(ReasonUsages, "usages %v: a kubelet asks for %q and %q", csr.Spec.Usages, certificatesv1.UsageDigitalSignature, certificatesv1.UsageServerAuth)
	}
	if len(x.EmailAddresses) > 0 || len(x.URIs) > 0 {
		return nil, deny(ReasonForbiddenSAN, "email or URI names %v %v: a kubelet asks for DNS names and IPs only", x.EmailAddresses, x.URIs)
	}
	if len(x.DNSNames) == 0 && len(x.IPAddresses) == 0 {
		return nil, deny(ReasonNoSANs, "no DNS name and no IP: nothing for the certificate to vouch for")
	}
	r := &request{node: node, dns: x.DNSNames}
	for _, ip := range x.IPAddresses {
		a, ok := netip.AddrFromSlice(ip)
		if !ok {
			return nil, deny(ReasonMalformed, "IP name %v", ip)
		}
		r.ips = append(r.ips, a.Unmap())
	}
	return r, nil
}

// Guest is what vCenter reports of a Node's VM, read by the checks.
type Guest struct {
	// VM names it (vCenter, datacenter, name, UUID) for messages.
	VM string
	// IPs are the guest's addresses on every adapter.
	IPs []netip.Addr
	// HostName is the guest's host name (guest.hostName); "" when none.
	HostName string
}

// judge checks the names r asks for against the Node's VM g: every IP one
// of the guest's, every DNS name the Node's name or the guest's host name.
func judge(r *request, g *Guest) *denial {
	for _, ip := range r.ips {
		if !slices.Contains(g.IPs, ip) {
			return deny(ReasonIPSAN, "IP %s is not one of VM %s's guest addresses %v", ip, g.VM, g.IPs)
		}
	}
	for _, name := range r.dns {
		n := strings.TrimSuffix(strings.ToLower(name), ".")
		if n == strings.ToLower(r.node) || g.HostName != "" && n == strings.TrimSuffix(strings.ToLower(g.HostName), ".") {
			continue
		}
		return deny(ReasonDNSSAN, "DNS name %q is neither the Node's name %q nor VM %s's guest host name %q", name, r.node, g.VM, g.HostName)
	}
	return nil
}
