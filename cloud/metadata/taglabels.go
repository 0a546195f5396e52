package metadata

import (
	"slices"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/discovery"
)

// TagCategories are the tag categories cfg reads: zone and region when
// both are configured (CPI's rule), then nodes.tagLabels' in key order,
// each once (what the tag caches are warmed for).
func TagCategories(cfg *config.Config) []string {
	var out []string
	if cfg.Labels.Zone != "" && cfg.Labels.Region != "" {
		out = append(out, cfg.Labels.Zone, cfg.Labels.Region)
	}
	for _, t := range cfg.TagLabels {
		if !slices.Contains(out, t.Category) {
			out = append(out, t.Category)
		}
	}
	return out
}

// LabelValue is a name (a tag's, a host's…) as a label value, encoded as
// the location labels are (a name that is no label value becomes its
// digest); "" for none (the label is then absent).
func LabelValue(name string) string {
	if name == "" {
		return ""
	}
	return discovery.LabelValue(name)
}
