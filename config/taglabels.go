package config

import (
	"maps"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// TagLabel is one entry of nodes.tagLabels: the VM's tag of Category
// (the VM's own first, then its host's, cluster's and so up, as zone tags
// are read) becomes the Node label Key.
type TagLabel struct {
	Category, Key string
}

// reservedLabelDomains are the label prefixes a tag label may not take:
// Kubernetes' own (the kubelet and the controllers set them, and
// NodeRestriction lets kubelets set some), and this CCM's.
var reservedLabelDomains = []string{"kubernetes.io", "k8s.io", "vsphere-federated-ccm.io"}

// resolveTagLabels checks nodes.tagLabels: each key a valid label key
// with a prefix outside the reserved domains, each category named, no key
// twice. Sorted by key.
func resolveTagLabels(m map[string]string, add func(string, string, ...any)) []TagLabel {
	var out []TagLabel
	seen := map[string]string{}
	for _, category := range slices.Sorted(maps.Keys(m)) {
		key := strings.TrimSpace(m[category])
		path := "nodes.tagLabels[" + category + "]"
		if strings.TrimSpace(category) == "" {
			add("nodes.tagLabels", "a tag category name is empty")
			continue
		}
		if errs := validation.IsQualifiedName(key); len(errs) > 0 {
			add(path, "label key %q: %s", key, strings.Join(errs, "; "))
			continue
		}
		prefix, _, ok := strings.Cut(key, "/")
		if !ok {
			add(path, "label key %q has no prefix: write one of your own domain (example.com/rack)", key)
			continue
		}
		if p := strings.ToLower(prefix); slices.ContainsFunc(reservedLabelDomains, func(d string) bool {
			return p == d || strings.HasSuffix(p, "."+d)
		}) {
			add(path, "label key %q is in a reserved domain (%s): write one of your own", key, strings.Join(reservedLabelDomains, ", "))
			continue
		}
		if other, ok := seen[key]; ok {
			add(path, "label key %q is category %q's too: one category per label", key, other)
			continue
		}
		seen[key] = category
		out = append(out, TagLabel{Category: category, Key: key})
	}
	slices.SortFunc(out, func(a, b TagLabel) int { return strings.Compare(a.Key, b.Key) })
	return out
}
