package discovery

import (
	"fmt"
	"strings"
)

// ProviderPrefix is the scheme of every providerID this CCM writes (CPI's).
const ProviderPrefix = "vsphere://"

// NormalizeUUID lowercases a UUID and checks its 8-4-4-4-12 hex form.
func NormalizeUUID(s string) (string, error) {
	u := strings.ToLower(strings.TrimSpace(s))
	if len(u) != 36 {
		return "", fmt.Errorf("uuid %q: want 36 characters in 8-4-4-4-12 form", s)
	}
	for i, c := range u {
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return "", fmt.Errorf("uuid %q: want '-' at position %d", s, i+1)
			}
		default:
			if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
				return "", fmt.Errorf("uuid %q: %q is not hexadecimal", s, c)
			}
		}
	}
	return u, nil
}

// SwapByteOrder converts between the BIOS UUID vCenter stores and the system
// UUID a Linux kubelet on vSphere reports: the first three groups are
// little-endian in one and big-endian in the other. It is its own inverse.
// u must be normalized.
func SwapByteOrder(u string) string {
	rev := func(g string) string {
		b := make([]byte, 0, len(g))
		for i := len(g) - 2; i >= 0; i -= 2 {
			b = append(b, g[i], g[i+1])
		}
		return string(b)
	}
	return rev(u[0:8]) + "-" + rev(u[9:13]) + "-" + rev(u[14:18]) + u[18:]
}

// ParseProviderID returns the BIOS UUID of a "vsphere://<uuid>" providerID.
func ParseProviderID(id string) (string, error) {
	rest, ok := strings.CutPrefix(id, ProviderPrefix)
	if !ok {
		return "", fmt.Errorf("providerID %q: want prefix %q", id, ProviderPrefix)
	}
	u, err := NormalizeUUID(rest)
	if err != nil {
		return "", fmt.Errorf("providerID %q: %w", id, err)
	}
	return u, nil
}

// ProviderID formats a BIOS UUID as CPI does.
func ProviderID(uuid string) string { return ProviderPrefix + strings.ToLower(uuid) }
