package config

import (
	"fmt"
	"os"
	"sort"
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

// envGlobal are CPI's global overrides and the key each sets.
func envGlobal(f *fileSchema) []struct {
	name, path string
	set        func(string) error
} {
	g := &f.Global
	str := func(p *string) func(string) error { return func(v string) error { *p = v; return nil } }
	return []struct {
		name, path string
		set        func(string) error
	}{
		{"VSPHERE_VCENTER", "global.server", str(&g.Server)},
		{"VSPHERE_VCENTER_PORT", "global.port", str(&g.Port)},
		{"VSPHERE_USER", "global.user", str(&g.User)},
		{"VSPHERE_PASSWORD", "global.password", func(v string) error { g.Password = Password(v); return nil }},
		{"VSPHERE_DATACENTER", "global.datacenters", func(v string) error { g.Datacenters = splitList(v); return nil }},
		{"VSPHERE_SECRET_NAME", "global.secretName", str(&g.SecretName)},
		{"VSPHERE_SECRET_NAMESPACE", "global.secretNamespace", str(&g.SecretNamespace)},
		{"VSPHERE_ROUNDTRIP_COUNT", "global.soapRoundtripCount", func(v string) error { return setUint(&g.SoapRoundtripCount, v) }},
		{"VSPHERE_INSECURE", "global.insecureFlag", func(v string) error { return setBool(&g.InsecureFlag, v) }},
		{"VSPHERE_SECRETS_DIRECTORY", "global.secretsDirectory", str(&g.SecretsDirectory)},
		{"VSPHERE_CAFILE", "global.caFile", str(&g.CAFile)},
		{"VSPHERE_THUMBPRINT", "global.thumbprint", str(&g.Thumbprint)},
		{"VSPHERE_LABEL_REGION", "labels.region", str(&f.Labels.Region)},
		{"VSPHERE_LABEL_ZONE", "labels.zone", str(&f.Labels.Zone)},
		{"VSPHERE_NODES_INTERNAL_NETWORK_SUBNET_CIDR", "nodes.internalNetworkSubnetCidr", str(&f.Nodes.InternalNetworkSubnetCIDR)},
		{"VSPHERE_NODES_EXTERNAL_NETWORK_SUBNET_CIDR", "nodes.externalNetworkSubnetCidr", str(&f.Nodes.ExternalNetworkSubnetCIDR)},
		{"VSPHERE_NODES_INTERNAL_VM_NETWORK_NAME", "nodes.internalVmNetworkName", str(&f.Nodes.InternalVMNetworkName)},
		{"VSPHERE_NODES_EXTERNAL_VM_NETWORK_NAME", "nodes.externalVmNetworkName", str(&f.Nodes.ExternalVMNetworkName)},
	}
}

// envVCenter are CPI's per-vCenter overrides, VCENTER_<id>_<suffix>, for
// the vCenter VSPHERE_VCENTER_<id> names.
func envVCenter(v *vcenterSection) []struct {
	suffix, key string
	set         func(string) error
} {
	str := func(p *string) func(string) error { return func(s string) error { *p = s; return nil } }
	return []struct {
		suffix, key string
		set         func(string) error
	}{
		{"USERNAME", "user", str(&v.User)},
		{"PASSWORD", "password", func(s string) error { v.Password = Password(s); return nil }},
		{"SERVER", "server", str(&v.Server)},
		{"PORT", "port", str(&v.Port)},
		{"INSECURE", "insecureFlag", func(s string) error { return setBool(&v.InsecureFlag, s) }},
		{"DATACENTERS", "datacenters", func(s string) error { v.Datacenters = splitList(s); return nil }},
		{"ROUNDTRIP", "soapRoundtripCount", func(s string) error { return setUint(&v.SoapRoundtripCount, s) }},
		{"CAFILE", "caFile", str(&v.CAFile)},
		{"THUMBPRINT", "thumbprint", str(&v.Thumbprint)},
		{"SECRET_NAME", "secretName", str(&v.SecretName)},
		{"SECRET_NAMESPACE", "secretNamespace", str(&v.SecretNamespace)},
		{"IP_FAMILY", "ipFamily", func(s string) error { v.IPFamily = splitList(s); return nil }},
	}
}

func setBool(p **bool, v string) error {
	b, err := strconv.ParseBool(v)
	if err != nil {
		return fmt.Errorf("not true or false")
	}
	*p = &b
	return nil
}

func setUint(p **uint, v string) error {
	n, err := strconv.ParseUint(v, 10, 32)
	if err != nil {
		return fmt.Errorf("not a whole number")
	}
	u := uint(n)
	*p = &u
	return nil
}

// apply sets what CPI's environment variables set, as its documentation
// says: a variable's value takes precedence over the file's. (CPI itself
// applies the global ones after it has handed global's values down to
// the vCenters, so there most of them change nothing; and it reads
// VCENTER_<id>_INSECURE, _ROUNDTRIP and _IP_FAMILY only when they are
// not set, that is never.) A vCenter is VSPHERE_VCENTER_<id>=<name> (its
// server, unless VCENTER_<id>_SERVER names one). A value that does not
// parse is skipped with a Notice, as CPI skips it. It returns a Notice
// per variable applied, naming it, never its value.
func (e Env) apply(f *fileSchema) []Notice {
	vars := map[string]string{}
	for _, kv := range e.Vars {
		if k, v, ok := strings.Cut(kv, "="); ok && v != "" {
			vars[k] = v
		}
	}
	var notices []Notice
	note := func(name, path string, err error) {
		if err != nil {
			notices = append(notices, Notice{Kind: NoticeEnv, Path: name, Reason: fmt.Sprintf("%s: skipped, %v", path, err)})
			return
		}
		notices = append(notices, Notice{Kind: NoticeEnv, Path: name, Reason: "sets " + path})
	}
	for _, o := range envGlobal(f) {
		if v, ok := vars[o.name]; ok {
			note(o.name, o.path, o.set(v))
		}
	}
	var ids []string
	for k := range vars {
		if id, ok := strings.CutPrefix(k, "VSPHERE_VCENTER_"); ok && id != "PORT" && id != "" {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	for _, id := range ids {
		name := vars["VSPHERE_VCENTER_"+id]
		if f.VCenter == nil {
			f.VCenter = map[string]*vcenterSection{}
		}
		v := f.VCenter[name]
		if v == nil {
			v = &vcenterSection{}
			f.VCenter[name] = v
		}
		note("VSPHERE_VCENTER_"+id, "vcenter."+name, nil)
		for _, o := range envVCenter(v) {
			if s, ok := vars["VCENTER_"+id+"_"+o.suffix]; ok {
				note("VCENTER_"+id+"_"+o.suffix, "vcenter."+name+"."+o.key, o.set(s))
			}
		}
		if v.Server == "" {
			v.Server = name
		}
	}
	if f.Global.SecretsDirectory == "" && e.DirExists != nil && e.DirExists(DefaultSecretsDirectory) {
		f.defaultSecretsDirectory = DefaultSecretsDirectory
		notices = append(notices, Notice{Kind: NoticeEnv, Path: "global.secretsDirectory",
			Reason: "CPI's default " + DefaultSecretsDirectory + " exists and the config names no secrets directory: it is used"})
	}
	return notices
}
