package config

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// DefaultSecretsDirectory is CPI's: used when it exists and the config
// names none.
const DefaultSecretsDirectory = "/etc/cloud/secrets"

// Env is the process environment a config is read in: CPI's VSPHERE_*
// overrides, and whether its default secrets directory exists. The zero
// Env has neither.
type Env struct {
	// Vars are the environment variables, as os.Environ gives them.
	Vars []string
	// DirExists reports whether a directory exists; nil: none does.
	DirExists func(path string) bool
}

// ProcessEnv is this process's environment.
func ProcessEnv() Env {
	return Env{Vars: os.Environ(), DirExists: func(path string) bool {
		st, err := os.Stat(path)
		return err == nil && st.IsDir()
	}}
}

// override is one of CPI's environment variables: its name (or, per
// vCenter, its suffix), the key it sets and how.
type override struct {
	name, path string
	set        func(string) error
}

// envGlobal are CPI's global overrides and the key each sets.
func envGlobal(f *fileSchema) []override {
	g := &f.Global
	return []override{
		{"VSPHERE_VCENTER", "global.server", server(&g.Server)},
		{"VSPHERE_VCENTER_PORT", "global.port", func(v string) error { return setPort(&g.Port, v) }},
		{"VSPHERE_USER", "global.user", str(&g.User)},
		{"VSPHERE_PASSWORD", "global.password", str((*string)(&g.Password))},
		{"VSPHERE_DATACENTER", "global.datacenters", func(v string) error { g.Datacenters = splitList(v); return nil }},
		{"VSPHERE_SECRET_NAME", "global.secretName", str(&g.SecretName)},
		{"VSPHERE_SECRET_NAMESPACE", "global.secretNamespace", str(&g.SecretNamespace)},
		{"VSPHERE_ROUNDTRIP_COUNT", "global.soapRoundtripCount", func(v string) error { return setUint(&g.SoapRoundtripCount, v) }},
		{"VSPHERE_INSECURE", "global.insecureFlag", func(v string) error { return setBool(&g.InsecureFlag, v) }},
		{"VSPHERE_SECRETS_DIRECTORY", "global.secretsDirectory", str(&g.SecretsDirectory)},
		{"VSPHERE_CAFILE", "global.caFile", str(&g.CAFile)},
		{"VSPHERE_THUMBPRINT", "global.thumbprint", func(v string) error { g.Thumbprint = splitList(v); return nil }},
		{"VSPHERE_LABEL_REGION", "labels.region", str(&f.Labels.Region)},
		{"VSPHERE_LABEL_ZONE", "labels.zone", str(&f.Labels.Zone)},
		{"VSPHERE_NODES_INTERNAL_NETWORK_SUBNET_CIDR", "nodes.internalNetworkSubnetCidr", func(v string) error { return setCIDRs(&f.Nodes.InternalNetworkSubnetCIDR, v) }},
		{"VSPHERE_NODES_EXTERNAL_NETWORK_SUBNET_CIDR", "nodes.externalNetworkSubnetCidr", func(v string) error { return setCIDRs(&f.Nodes.ExternalNetworkSubnetCIDR, v) }},
		{"VSPHERE_NODES_INTERNAL_VM_NETWORK_NAME", "nodes.internalVmNetworkName", str(&f.Nodes.InternalVMNetworkName)},
		{"VSPHERE_NODES_EXTERNAL_VM_NETWORK_NAME", "nodes.externalVmNetworkName", str(&f.Nodes.ExternalVMNetworkName)},
	}
}

// envVCenter are CPI's per-vCenter overrides, VCENTER_<id>_<suffix>, for
// the vCenter VSPHERE_VCENTER_<id> names, and the key of its section each sets.
func envVCenter(v *vcenterSection) []override {
	return []override{
		{"USERNAME", "user", str(&v.User)},
		{"PASSWORD", "password", str((*string)(&v.Password))},
		{"SERVER", "server", server(&v.Server)},
		{"PORT", "port", func(s string) error { return setPort(&v.Port, s) }},
		{"INSECURE", "insecureFlag", func(s string) error { return setBool(&v.InsecureFlag, s) }},
		{"DATACENTERS", "datacenters", func(s string) error { v.Datacenters = splitList(s); return nil }},
		{"ROUNDTRIP", "soapRoundtripCount", func(s string) error { return setUint(&v.SoapRoundtripCount, s) }},
		{"CAFILE", "caFile", str(&v.CAFile)},
		{"THUMBPRINT", "thumbprint", func(s string) error { v.Thumbprint = splitList(s); return nil }},
		{"SECRET_NAME", "secretName", str(&v.SecretName)},
		{"SECRET_NAMESPACE", "secretNamespace", str(&v.SecretNamespace)},
		{"IP_FAMILY", "ipFamily", func(s string) error { return setIPFamily(&v.IPFamily, s) }},
	}
}

// The setters below refuse a value the file's key would refuse, so that
// a variable is skipped with a Notice rather than make the config invalid
// (CPI skips a value that does not parse); their errors never quote it.

func str(p *string) func(string) error {
	return func(v string) error {
		*p = v
		return nil
	}
}

func server(p *string) func(string) error {
	return func(v string) error {
		if strings.TrimSpace(v) == "" {
			return errors.New("blank")
		}
		*p = v
		return nil
	}
}

func setPort(p *string, v string) error {
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil || n < 1 || n > 65535 {
		return errors.New("not a port number (1 to 65535)")
	}
	*p = strconv.Itoa(n)
	return nil
}

func setCIDRs(p *string, v string) error {
	for _, part := range splitList(v) {
		if _, err := netip.ParsePrefix(part); err != nil {
			return errors.New("not a comma-separated list of CIDRs")
		}
	}
	*p = v
	return nil
}

func setIPFamily(p *StringList, v string) error {
	fams := splitList(v)
	for _, fam := range fams {
		if fam = strings.ToLower(fam); fam != IPv4 && fam != IPv6 {
			return errors.New("not ipv4, ipv6 or both")
		}
	}
	*p = fams
	return nil
}

func setBool(p **bool, v string) error {
	b, err := strconv.ParseBool(v)
	if err != nil {
		return errors.New("not true or false")
	}
	*p = &b
	return nil
}

func setUint(p **uint, v string) error {
	n, err := strconv.ParseUint(v, 10, 32)
	if err != nil {
		return errors.New("not a whole number")
	}
	*p = new(uint(n))
	return nil
}

// serviceLinkID matches the ids of VSPHERE_VCENTER_<id> the kubelet sets
// for a Service named vsphere-vcenter or vsphere-vcenter-… in the Pod's
// namespace (its "service links", unless the Pod sets enableServiceLinks:
// false): the Service's name upper-cased, then _SERVICE_HOST,
// _SERVICE_PORT, _SERVICE_PORT_<port name>, _PORT, _PORT_<n>_<protocol>
// and that followed by _PROTO, _PORT or _ADDR.
var serviceLinkID = regexp.MustCompile(`(^|_)(SERVICE_HOST|SERVICE_PORT(_[A-Z0-9_]+)?|PORT(_[0-9]+_(TCP|UDP|SCTP)(_(PROTO|PORT|ADDR))?)?)$`)

// serviceLinkValue reports whether v has the shape of the kubelet's link
// variables' values, <protocol>://<address>:<port>: no server, port or
// credential of CPI's is written so.
func serviceLinkValue(v string) bool {
	scheme, addr, ok := strings.Cut(v, "://")
	if !ok {
		return false
	}
	switch strings.ToLower(scheme) {
	case "tcp", "udp", "sctp":
	default:
		return false
	}
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	_, err = strconv.ParseUint(port, 10, 16)
	return err == nil
}

// Why a variable the kubelet set for a Service is not read.
const (
	serviceLinkValueSkipped = "skipped, the value of a Kubernetes service link (the kubelet sets it for a Service in this namespace unless the Pod sets enableServiceLinks: false)"
	serviceLinkNameSkipped  = "skipped, not a vCenter: named as the kubelet names a Service's variables (for a Service vsphere-vcenter… in this namespace, unless the Pod sets enableServiceLinks: false)"
)

// apply sets what CPI's environment variables set, as its documentation
// says: a variable's value takes precedence over the file's. (CPI itself
// applies the global ones after it has handed global's values down to
// the vCenters, so there most of them change nothing; and it reads
// VCENTER_<id>_INSECURE, _ROUNDTRIP and _IP_FAMILY only when they are
// not set, that is never.) A vCenter is VSPHERE_VCENTER_<id>=<name> (its
// server, unless VCENTER_<id>_SERVER names one). A value its key would
// refuse is skipped with a Notice, as CPI skips one that does not parse,
// and so is what the kubelet sets for a Service named vsphere-vcenter…
// (CPI reads those as overrides and vCenters: its config turns invalid
// or gains vCenters named tcp, 443, the Service's address, with global's
// credentials). It returns a Notice per variable applied or skipped,
// naming it, never its value.
func (e Env) apply(f *fileSchema) []Notice {
	vars := map[string]string{}
	for _, kv := range e.Vars {
		if k, v, ok := strings.Cut(kv, "="); ok && v != "" {
			vars[k] = v
		}
	}
	var notices []Notice
	note := func(name, reason string) {
		notices = append(notices, Notice{Kind: NoticeEnv, Path: name, Reason: reason})
	}
	// set applies variable name, when set, to the key at path.
	set := func(name, path string, set func(string) error) {
		v, ok := vars[name]
		if !ok {
			return
		}
		if serviceLinkValue(v) {
			note(name, path+": "+serviceLinkValueSkipped)
		} else if err := set(v); err != nil {
			note(name, fmt.Sprintf("%s: skipped, %v", path, err))
		} else {
			note(name, "sets "+path)
		}
	}
	for _, o := range envGlobal(f) {
		set(o.name, o.path, o.set)
	}
	var ids []string
	for k := range vars {
		if id, ok := strings.CutPrefix(k, "VSPHERE_VCENTER_"); ok && id != "PORT" && id != "" {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	for _, id := range ids {
		variable, name := "VSPHERE_VCENTER_"+id, vars["VSPHERE_VCENTER_"+id]
		switch {
		case serviceLinkID.MatchString(id):
			note(variable, serviceLinkNameSkipped)
			continue
		case serviceLinkValue(name):
			note(variable, "vcenter: "+serviceLinkValueSkipped)
			continue
		case strings.TrimSpace(name) == "":
			note(variable, "vcenter: skipped, blank")
			continue
		}
		if f.VCenter == nil {
			f.VCenter = map[string]*vcenterSection{}
		}
		v := f.VCenter[name]
		if v == nil {
			v = &vcenterSection{}
			f.VCenter[name] = v
		}
		note(variable, "sets vcenter."+name)
		for _, o := range envVCenter(v) {
			set("VCENTER_"+id+"_"+o.name, "vcenter."+name+"."+o.path, o.set)
		}
		if v.Server == "" {
			v.Server = name
		}
	}
	if f.Global.SecretsDirectory == "" && e.DirExists != nil && e.DirExists(DefaultSecretsDirectory) {
		f.defaultSecretsDirectory = DefaultSecretsDirectory
		note("global.secretsDirectory",
			"CPI's default "+DefaultSecretsDirectory+" exists and the config names no secrets directory: it is used")
	}
	return notices
}
