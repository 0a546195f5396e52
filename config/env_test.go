package config

import (
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"
)

// servicePort is one port of a Service, as the kubelet reads it.
type servicePort struct {
	name     string
	port     int
	protocol string // TCP, UDP or SCTP
}

// kubeletServiceEnv is what the kubelet puts in the environment of every
// Pod of a Service's namespace unless the Pod sets enableServiceLinks:
// false: the Service's name upper-cased, dashes made underscores, then
// _SERVICE_HOST, _SERVICE_PORT, _SERVICE_PORT_<port name> for each named
// port, and Docker's link variables (_PORT, _PORT_<n>_<PROTO> and its
// _PROTO, _PORT, _ADDR).
func kubeletServiceEnv(service, clusterIP string, ports ...servicePort) []string {
	prefix := strings.ToUpper(strings.ReplaceAll(service, "-", "_"))
	env := []string{prefix + "_SERVICE_HOST=" + clusterIP, fmt.Sprintf("%s_SERVICE_PORT=%d", prefix, ports[0].port)}
	for _, p := range ports {
		if p.name != "" {
			env = append(env, fmt.Sprintf("%s_SERVICE_PORT_%s=%d", prefix, strings.ToUpper(strings.ReplaceAll(p.name, "-", "_")), p.port))
		}
	}
	for i, p := range ports {
		link := strings.ToLower(p.protocol) + "://" + net.JoinHostPort(clusterIP, strconv.Itoa(p.port))
		if i == 0 {
			env = append(env, prefix+"_PORT="+link)
		}
		pp := fmt.Sprintf("%s_PORT_%d_%s", prefix, p.port, p.protocol)
		env = append(env, pp+"="+link, pp+"_PROTO="+strings.ToLower(p.protocol), fmt.Sprintf("%s_PORT=%d", pp, p.port), pp+"_ADDR="+clusterIP)
	}
	return env
}

// A Service named vsphere-vcenter… in the CCM's namespace makes the
// kubelet set variables that look like CPI's overrides: none becomes a
// vCenter or a value, none makes the config invalid, and a Notice names
// each, never its value.
func TestServiceLinksAreNotOverrides(t *testing.T) {
	const file = "global: {user: u, password: p, port: 8443}\nvcenter: {west: {server: west.example.com}}"
	ports := []servicePort{{"https", 443, "TCP"}, {"metrics-port", 9090, "TCP"}, {"", 5000, "UDP"}, {"assoc", 7000, "SCTP"}}
	for _, service := range []string{"vsphere-vcenter", "vsphere-vcenter-proxy"} {
		for _, ip := range []string{"10.96.0.10", "fd00:10:96::a"} {
			t.Run(service+" "+ip, func(t *testing.T) {
				links := kubeletServiceEnv(service, ip, ports...)
				vars := append([]string{"KUBERNETES_SERVICE_HOST=10.96.0.1", "KUBERNETES_SERVICE_PORT=443", "PATH=/bin"}, links...)
				cfg, err := ParseIn([]byte(file), Env{Vars: vars})
				if err != nil {
					t.Fatalf("the config does not load beside the Service's variables: %v", err)
				}
				if len(cfg.VCenters) != 1 {
					t.Fatalf("vCenters %+v, want west alone", cfg.VCenters)
				}
				if west := cfg.VCenters[0]; west.Name != "west" || west.Server != "west.example.com" || west.Port != 8443 || west.User != "u" {
					t.Errorf("west = %+v, want the file's", west)
				}
				notices := fmt.Sprint(cfg.Notices)
				for _, kv := range links {
					name, _, _ := strings.Cut(kv, "=")
					if !skippedNotice(cfg, name) {
						t.Errorf("no notice says %s is skipped: %s", name, notices)
					}
				}
				for _, value := range []string{ip, "://"} {
					if strings.Contains(notices, value) {
						t.Errorf("a notice quotes %q: %s", value, notices)
					}
				}
			})
		}
	}
}

// CPI's overrides still apply beside service links of the same prefix:
// vCenter east stays, and the links of a Service vsphere-vcenter-east (and
// vcenter-east, whose _PORT is east's port override's name) are Notices.
func TestServiceLinksBesideOverrides(t *testing.T) {
	vars := []string{"VSPHERE_VCENTER_EAST=east", "VCENTER_EAST_SERVER=east.example.com", "VCENTER_EAST_USERNAME=eastuser", "VCENTER_EAST_PASSWORD=East-S3cret"}
	vars = append(vars, kubeletServiceEnv("vsphere-vcenter-east", "10.96.7.7", servicePort{"https", 443, "TCP"})...)
	vars = append(vars, kubeletServiceEnv("vcenter-east", "10.96.8.8", servicePort{"", 443, "TCP"})...)
	cfg, err := ParseIn([]byte("global: {port: 8443}\nvcenter: {west: {server: west.example.com, user: u, password: p}}"), Env{Vars: vars})
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.VCenters) != 2 {
		t.Fatalf("vCenters %+v, want east and west", cfg.VCenters)
	}
	east := cfg.VCenters[0]
	if east.Name != "east" || east.Server != "east.example.com" || east.User != "eastuser" || east.Password.Reveal() != "East-S3cret" || east.Port != 8443 {
		t.Errorf("east = %+v", east)
	}
	for _, name := range []string{"VSPHERE_VCENTER_EAST", "VCENTER_EAST_SERVER"} {
		if !hasNotice(cfg, NoticeEnv, name) || skippedNotice(cfg, name) {
			t.Errorf("no notice says %s applies: %v", name, cfg.Notices)
		}
	}
	for _, name := range []string{"VSPHERE_VCENTER_EAST_SERVICE_HOST", "VSPHERE_VCENTER_EAST_PORT_443_TCP_ADDR", "VCENTER_EAST_PORT"} {
		if !skippedNotice(cfg, name) {
			t.Errorf("no notice says %s is skipped: %v", name, cfg.Notices)
		}
	}
	if notices := fmt.Sprint(cfg.Notices); strings.Contains(notices, "10.96.") || strings.Contains(notices, "East-S3cret") {
		t.Errorf("a notice quotes a value: %s", notices)
	}
}

// A variable without a valid value for its key is skipped with a Notice,
// as CPI skips one that does not parse: never a fatal error.
func TestEnvironmentValuesThatDoNotFitAreSkipped(t *testing.T) {
	vars := []string{
		"VSPHERE_VCENTER_PORT=https", "VSPHERE_VCENTER_EAST=east", "VCENTER_EAST_PORT=70000", "VCENTER_EAST_IP_FAMILY=ipv5",
		"VSPHERE_NODES_INTERNAL_NETWORK_SUBNET_CIDR=nope-cidr", "VSPHERE_VCENTER_BLANK=   ", "VCENTER_EAST_SERVER=tcp://10.96.3.3:443",
	}
	cfg, err := ParseIn([]byte("global: {user: u, password: p}\nvcenter: {west: {server: west.example.com}}"), Env{Vars: vars})
	if err != nil {
		t.Fatalf("a variable without a valid value made the config invalid: %v", err)
	}
	if len(cfg.VCenters) != 2 || cfg.VCenters[0].Name != "east" || cfg.VCenters[0].Server != "east" || cfg.VCenters[0].Port != DefaultPort ||
		strings.Join(cfg.VCenters[0].IPFamily, ",") != IPv4 || cfg.VCenters[1].Port != DefaultPort || len(cfg.Nodes.InternalSubnets) != 0 {
		t.Errorf("vCenters %+v, nodes %+v: want east and west at the defaults", cfg.VCenters, cfg.Nodes)
	}
	notices := fmt.Sprint(cfg.Notices)
	for _, kv := range vars {
		name, value, _ := strings.Cut(kv, "=")
		if name == "VSPHERE_VCENTER_EAST" {
			continue
		}
		if !skippedNotice(cfg, name) {
			t.Errorf("no notice says %s is skipped: %s", name, notices)
		}
		if strings.TrimSpace(value) != "" && strings.Contains(notices, value) {
			t.Errorf("a notice quotes %q: %s", value, notices)
		}
	}
}

// skippedNotice reports whether a Notice says the variable name is not read.
func skippedNotice(cfg *Config, name string) bool {
	for _, n := range cfg.Notices {
		if n.Kind == NoticeEnv && n.Path == name && strings.Contains(n.Reason, "skipped") {
			return true
		}
	}
	return false
}
