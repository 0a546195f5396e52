package instances

import (
	"context"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/cloud/metadata"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/discovery"
)

// tagLabels adds to labels the Node labels nodes.tagLabels asks for (by
// key) for res's VM, but for a category it has no tag of. Each category is walked on its own, as CPI walks zone and
// region together: the first of the VM's ancestries (its host's, its
// resource pool's, its own) holding a tag of it, nearest first. Read
// together with the zone, a category the VM has no tag of would make the
// walk pass over the ancestry the zone is on. From the tag cache: no
// request per Node.
func (in *Instances) tagLabels(ctx context.Context, res *discovery.Result, asked []config.TagLabel,
	labels map[string]string) error {
	for _, t := range asked {
		tags, err := in.discovery.Tags(ctx, res, []string{t.Category})
		if err != nil {
			return err
		}
		if v := metadata.LabelValue(tags[t.Category]); v != "" {
			labels[t.Key] = v
		}
	}
	return nil
}
