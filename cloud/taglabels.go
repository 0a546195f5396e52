package cloud

import (
	"context"
	"slices"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/discovery"
)

// ReasonTagLabelsUpdated is the Event of labels from tag categories
// (nodes.tagLabels) rewritten as the VM's tags changed.
const ReasonTagLabelsUpdated = "TagLabelsUpdated"

// tagCategories are the tag categories cfg reads: zone and region when
// both are configured (CPI's rule), then nodes.tagLabels' in key order,
// each once (what the tag caches are warmed for).
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

// tagLabels adds to labels the Node labels nodes.tagLabels asks for (by
// key) for res's VM, but for a category it has no tag of. Each category is walked on its own, as CPI walks zone and
// region together: the first of the VM's ancestries (its host's, its
// resource pool's, its own) holding a tag of it, nearest first. Read
// together with the zone, a category the VM has no tag of would make the
// walk pass over the ancestry the zone is on. From the tag cache: no
// request per Node.
func (in *instances) tagLabels(ctx context.Context, res *discovery.Result, asked []config.TagLabel,
	labels map[string]string) error {
	for _, t := range asked {
		tags, err := in.fleet.discovery.Tags(ctx, res, []string{t.Category})
		if err != nil {
			return err
		}
		if v := labelValue(tags[t.Category]); v != "" {
			labels[t.Key] = v
		}
	}
	return nil
}

// labelValue is a name (a tag's, a host's…) as a label value, encoded as
// the location labels are (a name that is no label value becomes its
// digest); "" for none (the label is then absent).
func labelValue(name string) string {
	if name == "" {
		return ""
	}
	return discovery.LabelValue(name)
}
