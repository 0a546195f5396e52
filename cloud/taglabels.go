package cloud

import (
	"slices"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/discovery"
)

// ReasonTagLabelsUpdated: the labels from tag categories
// (nodes.tagLabels) were rewritten as the VM's tags changed.
const ReasonTagLabelsUpdated = "TagLabelsUpdated"

// tagCategories are the tag categories cfg reads: zone and region when
// both are configured (CPI's rule), then nodes.tagLabels' in key order,
// each once. One read of the tag cache answers them all.
func tagCategories(cfg *config.Config) []string {
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

// tagLabels are the Node labels nodes.tagLabels asks for, from tags (by
// category): the tag's name, encoded as the location labels are (a name
// that is no label value becomes its digest); "" when the VM has no tag
// of the category (the label is then absent).
func tagLabels(asked []config.TagLabel, tags map[string]string) map[string]string {
	out := make(map[string]string, len(asked))
	for _, t := range asked {
		v := ""
		if name := tags[t.Category]; name != "" {
			v = discovery.LabelValue(name)
		}
		out[t.Key] = v
	}
	return out
}
