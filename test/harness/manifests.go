package harness

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// Names the manifests in <repo>/manifests give the deployment; the harness
// runs the CCM as that ServiceAccount with that Secret.
const (
	Namespace      = "kube-system"
	ServiceAccount = "vsphere-federated-ccm"
	SecretName     = "vsphere-cloud-secret"
	ConfigMapName  = "vsphere-federated-ccm-config"
	ConfigMapKey   = "vsphere.conf"
	DaemonSetName  = "vsphere-federated-ccm"
)

// Kustomization is the subset of kustomization.yaml the harness applies
// itself (it does not run kustomize): a plain list of resource files.
// LoadManifests rejects any other field, so a patch or generator added
// later cannot be silently skipped.
type Kustomization struct {
	APIVersion string   `json:"apiVersion"`
	Kind       string   `json:"kind"`
	Resources  []string `json:"resources"`
}

// Manifests are the objects of the files a kustomization lists.
type Manifests struct {
	Dir           string
	Kustomization Kustomization
	// Objects in file order, then document order.
	Objects []*unstructured.Unstructured
	// File names each object's file (relative to Dir), same index.
	File []string
}

// ManifestsDir is <repo>/manifests.
func ManifestsDir() (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	return filepath.Join(root, "manifests"), nil
}

// LoadManifests reads dir/kustomization.yaml and every file it lists.
func LoadManifests(dir string) (*Manifests, error) {
	data, err := os.ReadFile(filepath.Join(dir, "kustomization.yaml"))
	if err != nil {
		return nil, fmt.Errorf("harness: %w", err)
	}
	m := &Manifests{Dir: dir}
	if err := yaml.UnmarshalStrict(data, &m.Kustomization); err != nil {
		return nil, fmt.Errorf("harness: %s/kustomization.yaml: %w (only apiVersion, kind and resources are supported)", dir, err)
	}
	if k := m.Kustomization; k.Kind != "Kustomization" || k.APIVersion != "kustomize.config.k8s.io/v1beta1" {
		return nil, fmt.Errorf("harness: %s/kustomization.yaml: kind %q apiVersion %q", dir, k.Kind, k.APIVersion)
	}
	for _, file := range m.Kustomization.Resources {
		objs, err := ReadObjects(filepath.Join(dir, file))
		if err != nil {
			return nil, fmt.Errorf("harness: %s: %w", file, err)
		}
		for _, o := range objs {
			m.Objects = append(m.Objects, o)
			m.File = append(m.File, file)
		}
	}
	return m, nil
}

// ReadObjects reads the Kubernetes objects of a multi-document YAML file.
func ReadObjects(path string) ([]*unstructured.Unstructured, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var out []*unstructured.Unstructured
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		j, err := yaml.YAMLToJSON(doc)
		if err != nil {
			return nil, err
		}
		if len(bytes.TrimSpace(j)) == 0 || string(bytes.TrimSpace(j)) == "null" {
			continue
		}
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(j); err != nil {
			return nil, err
		}
		out = append(out, u)
	}
	if len(out) == 0 {
		return nil, errors.New("no objects")
	}
	return out, nil
}

// Find returns the object of that kind and name, or nil.
func (m *Manifests) Find(kind, namespace, name string) *unstructured.Unstructured {
	for _, o := range m.Objects {
		if o.GetKind() == kind && o.GetNamespace() == namespace && o.GetName() == name {
			return o
		}
	}
	return nil
}

// Apply server-side-applies every object with strict field validation, so
// a misspelt or misplaced field in a manifest is an error, not ignored.
func (cp *ControlPlane) Apply(ctx context.Context, objs []*unstructured.Unstructured) error {
	for _, o := range objs {
		gvk := o.GroupVersionKind()
		mapping, err := cp.Mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if meta.IsNoMatchError(err) {
			cp.Mapper.Reset()
			mapping, err = cp.Mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		}
		if err != nil {
			return fmt.Errorf("harness: %s %s: %w", gvk, o.GetName(), err)
		}
		data, err := o.MarshalJSON()
		if err != nil {
			return err
		}
		ri := cp.Dynamic.Resource(mapping.Resource)
		opts := metav1.PatchOptions{FieldManager: "vsphere-federated-ccm-harness", Force: new(true), FieldValidation: "Strict"}
		if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
			if o.GetNamespace() == "" {
				return fmt.Errorf("harness: %s %s: namespaced object without metadata.namespace", gvk.Kind, o.GetName())
			}
			_, err = ri.Namespace(o.GetNamespace()).Patch(ctx, o.GetName(), types.ApplyPatchType, data, opts)
		} else {
			_, err = ri.Patch(ctx, o.GetName(), types.ApplyPatchType, data, opts)
		}
		if err != nil {
			return fmt.Errorf("harness: applying %s %s/%s: %w", gvk.Kind, o.GetNamespace(), o.GetName(), err)
		}
	}
	return nil
}
