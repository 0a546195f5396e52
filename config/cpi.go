package config

import (
	"cmp"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
)

// cpiOnlyKey is why a key CPI's config carries has no effect here, or ""
// when it is not one: sections read by CPI components this CCM does not
// run, the in-tree provider's sections CPI skips too, and keys of CPI's
// templates that nothing reads.
func cpiOnlyKey(path string) string {
	switch path {
	case "nsxt", "loadBalancer", "loadBalancerClass", "route":
		return "read by CPI's NSX-T, load-balancer and route controllers, which this CCM does not run"
	case "workspace", "disk", "network":
		return "a section of the in-tree vSphere provider's config; CPI skips it too"
	case "global.serviceAccount":
		return "in CPI's config templates; CPI does not read it either"
	case "global.apiDisable", "global.apiBinding":
		return "configures CPI's own API server, which this CCM does not have"
	}
	return ""
}

// unknownKey is the Notice for key under path, which names no field of
// fields: CPI's (ignored) or unknown, with the key meant when a
// kebab-case or differently cased spelling of one (CPI's YAML reader
// ignores those too).
func unknownKey(path, key string, fields map[string]reflect.Type, line int) Notice {
	full := join(path, shown(key))
	if reason := cpiOnlyKey(join(path, key)); reason != "" {
		return Notice{Kind: NoticeIgnored, Path: full, Line: line, Reason: reason}
	}
	reason := "neither CPI nor this CCM reads it; ignored"
	if meant := meantKey(key, fields); meant != "" {
		reason = fmt.Sprintf("neither CPI nor this CCM reads it (YAML keys are camelCase: did you mean %s?); ignored", meant)
	}
	return Notice{Kind: NoticeUnknown, Path: full, Line: line, Reason: reason}
}

// meantKey is the field name key spells in another case or in kebab-case
// ("ca-file", "InsecureFlag"), or "".
func meantKey(key string, fields map[string]reflect.Type) string {
	want := strings.ToLower(strings.ReplaceAll(strings.ReplaceAll(key, "-", ""), "_", ""))
	for _, name := range slices.Sorted(maps.Keys(fields)) {
		if strings.ToLower(name) == want {
			return name
		}
	}
	return ""
}

// resolveCredentials picks vc's login source by CPI's rules
// (pkg/common/config validateConfig and the connection manager):
//   - the vCenter's own Secret when it sets both secretName and
//     secretNamespace;
//   - else the global one when global names exactly one of a Secret (both
//     keys) or a secrets directory: the directory when one is in effect
//     (global.secretsDirectory, or CPI's default /etc/cloud/secrets when it
//     exists), else the global Secret;
//   - else user and password in the file, each inherited from global.
//
// In the first two, User and Password are the vCenter section's own,
// which CPI tries first.
func (f *fileSchema) resolveCredentials(vc *VCenter, v *vcenterSection, cfg *Config, add func(string, string, ...any)) {
	g := f.Global
	p := "vcenter." + vc.Name
	own := v.SecretName != "" && v.SecretNamespace != ""
	global := (g.SecretName != "" && g.SecretNamespace != "" && g.SecretsDirectory == "") ||
		(g.SecretName == "" && g.SecretNamespace == "" && g.SecretsDirectory != "")
	if (v.SecretName == "") != (v.SecretNamespace == "") {
		cfg.Notices = append(cfg.Notices, Notice{Kind: NoticeDiffers, Path: p,
			Reason: "secretName and secretNamespace are used only together (CPI's rule): this vCenter's Secret is not used"})
	}
	if g.SecretName != "" && g.SecretsDirectory != "" {
		cfg.Notices = append(cfg.Notices, Notice{Kind: NoticeDiffers, Path: "global",
			Reason: "global.secretName and global.secretsDirectory are both set, so neither is used (CPI's rule): vCenters without their own Secret need user and password"})
	}
	vc.User, vc.Password = v.User, v.Password
	switch {
	case own:
		vc.CredentialsFrom, vc.SecretName, vc.SecretNamespace = FromSecret, v.SecretName, v.SecretNamespace
	case global && cfg.SecretsDirectory != "":
		vc.CredentialsFrom = FromDirectory
	case global:
		vc.CredentialsFrom, vc.SecretName, vc.SecretNamespace = FromSecret, g.SecretName, g.SecretNamespace
	default:
		vc.CredentialsFrom = FromConfig
		vc.User, vc.Password = cmp.Or(v.User, g.User), cmp.Or(v.Password, g.Password)
		if vc.User == "" {
			add(p, "no credentials: set secretName and secretNamespace, global.secretsDirectory, or user and password")
		} else if vc.Password == "" {
			add(p+".password", "required with user when no Secret or secrets directory is named (CPI's rule)")
		}
	}
}
