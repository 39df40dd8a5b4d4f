// Package bundles writes objects as the support-bundle tools lay them out,
// for tests of `tether audit --from`: each layout follows its tool's
// source (see internal/bundle's package comment for the files).
package bundles

import (
	"archive/tar"
	"archive/zip"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/yaml"

	"github.com/tether-dev/tether/internal/clients"
)

// Layouts.
const (
	// Dump is `kubectl get KINDS -A -o yaml` into one file: one List.
	Dump = "dump"
	// DumpJSON is one `kubectl get KIND -A -o json` file per kind.
	DumpJSON = "dump-json"
	// MustGather is `oc adm must-gather` with OpenShift's and KubeVirt's
	// images: inspect's lists and objects, gather_crs, vmConvertor,
	// gather_cdi, and the timestamp file.
	MustGather = "must-gather"
	// Harvester is Harvester's support bundle, as support-bundle-kit
	// writes it.
	Harvester = "harvester"
)

// All are every layout.
var All = []string{Dump, DumpJSON, MustGather, Harvester}

// Write writes objs into dir in layout, collected at at.
func Write(dir, layout string, at time.Time, objs []client.Object) error {
	items := make([]obj, 0, len(objs))
	for _, o := range objs {
		it, err := typed(o)
		if err != nil {
			return err
		}
		items = append(items, it)
	}
	switch layout {
	case Dump:
		return writeList(filepath.Join(dir, "all.yaml"), items, true)
	case DumpJSON:
		return writeByResource(items, func(it obj) string { return filepath.Join(dir, it.resource+".json") }, false, false)
	case MustGather:
		return writeMustGather(dir, at, items)
	case Harvester:
		return writeHarvester(dir, at, items)
	}
	return fmt.Errorf("no layout %q", layout)
}

// obj is one object with what layouts name it by.
type obj struct {
	o        client.Object
	gvk      schema.GroupVersionKind
	resource string
}

func typed(o client.Object) (obj, error) {
	gvk, err := apiutil.GVKForObject(o, clients.Scheme())
	if err != nil {
		return obj{}, err
	}
	o = o.DeepCopyObject().(client.Object)
	o.GetObjectKind().SetGroupVersionKind(gvk)
	o.SetManagedFields(nil)
	return obj{o: o, gvk: gvk, resource: strings.ToLower(gvk.Kind) + "s"}, nil
}

func (it obj) group() string {
	if it.gvk.Group == "" {
		return "core"
	}
	return it.gvk.Group
}

// writeList writes items as one List, YAML or JSON.
func writeList(path string, items []obj, asYAML bool) error {
	l := map[string]any{"apiVersion": "v1", "kind": "List", "metadata": map[string]any{"resourceVersion": ""}}
	list := make([]any, 0, len(items))
	for _, it := range items {
		list = append(list, it.o)
	}
	l["items"] = list
	return writeValue(path, l, asYAML)
}

func writeValue(path string, v any, asYAML bool) error {
	b, err := json.MarshalIndent(v, "", "    ")
	if err != nil {
		return err
	}
	if asYAML {
		if b, err = yaml.JSONToYAML(b); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}

// writeByResource writes one List per file that name gives.
func writeByResource(items []obj, name func(obj) string, asYAML, nulls bool) error {
	files := map[string][]obj{}
	var order []string
	for _, it := range items {
		n := name(it)
		if _, ok := files[n]; !ok {
			order = append(order, n)
		}
		files[n] = append(files[n], it)
	}
	for _, n := range order {
		if nulls {
			if err := writeNulled(n, files[n]); err != nil {
				return err
			}
			continue
		}
		if err := writeList(n, files[n], asYAML); err != nil {
			return err
		}
	}
	return nil
}

// writeMustGather lays items out as the two must-gather images do: under
// one image's folder, each object where its gatherer puts it.
func writeMustGather(dir string, at time.Time, items []obj) error {
	root := filepath.Join(dir, "must-gather.local.5550123")
	img := filepath.Join(root, "quay-io-kubevirt-must-gather-sha256-0f")
	ts := at.Add(-3*time.Minute).String() + " m=+0.041\n" + at.String() + " m=+180.2\n"
	if err := writeFile(filepath.Join(root, "timestamp"), ts); err != nil {
		return err
	}
	if err := writeFile(filepath.Join(img, "version"), "kubevirt/must-gather\nv1.9.0\n"); err != nil {
		return err
	}
	if err := writeFile(filepath.Join(img, "gather.logs"), "apiVersion: not an object, a log\n"); err != nil {
		return err
	}
	var pods []obj
	for _, it := range items {
		o := it.o
		var p string
		switch {
		case it.gvk.Kind == "Pod":
			pods = append(pods, it)
			continue
		case o.GetNamespace() == "":
			p = filepath.Join(img, "cluster-scoped-resources", it.group(), it.resource, o.GetName()+".yaml")
		case it.gvk.Kind == "VirtualMachine":
			p = filepath.Join(img, "namespaces", o.GetNamespace(), "kubevirt.io", "virtualmachines", "custom", o.GetName()+".yaml")
		case it.gvk.Kind == "PersistentVolumeClaim":
			p = filepath.Join(img, "namespaces", o.GetNamespace(), "core", "persistentvolumeclaims", o.GetName()+".yaml")
			if err := writeFile(strings.TrimSuffix(p, ".yaml")+"_describe.txt", "Name: "+o.GetName()+"\n"); err != nil {
				return err
			}
		default:
			p = filepath.Join(img, "namespaces", o.GetNamespace(), "crs", it.resource+"."+it.gvk.Group, o.GetName()+".yaml")
		}
		if err := writeValue(p, o, true); err != nil {
			return err
		}
	}
	// Pods by namespace inspect: one list per namespace.
	return writeByResource(pods, func(it obj) string {
		return filepath.Join(img, "namespaces", it.o.GetNamespace(), "core", "pods.yaml")
	}, true, false)
}

// writeHarvester lays items out as support-bundle-kit does, zipped into
// supportbundle_UUID_TIME.zip, every namespace held.
func writeHarvester(dir string, at time.Time, items []obj) error {
	name := "supportbundle_3a4e_" + strings.ReplaceAll(at.UTC().Format(time.RFC3339), ":", "-")
	root := filepath.Join(dir, name)
	meta := fmt.Sprintf("projectName: harvester\nbundleVersion: \"0.0.1\"\nkubernetesVersion: v1.36.3\nbundleCreatedAt: %q\n", at.UTC().Format(time.RFC3339))
	if err := writeFile(filepath.Join(root, "metadata.yaml"), meta); err != nil {
		return err
	}
	if err := writeFile(filepath.Join(root, "logs", "harvester-system", "harvester-0", "apiserver.log"), "kind: log\n"); err != nil {
		return err
	}
	return writeByResource(items, func(it obj) string {
		gv := filepath.Join(it.gvk.Group, it.gvk.Version)
		if it.o.GetNamespace() == "" {
			return filepath.Join(root, "yamls", "cluster", gv, it.resource+".yaml")
		}
		return filepath.Join(root, "yamls", "namespaced", it.o.GetNamespace(), gv, it.resource+".yaml")
	}, true, true)
}

// writeNulled writes a List as Harvester's collector does: every null
// value and every empty string written as the string "null".
func writeNulled(path string, items []obj) error {
	b, err := json.Marshal(items2list(items))
	if err != nil {
		return err
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	return writeValue(path, nullify(v), true)
}

func items2list(items []obj) map[string]any {
	list := make([]any, 0, len(items))
	for _, it := range items {
		list = append(list, it.o)
	}
	return map[string]any{"apiVersion": "v1", "kind": "List", "items": list}
}

func nullify(v any) any {
	switch x := v.(type) {
	case nil:
		return "null"
	case string:
		if x == "" {
			return "null"
		}
	case map[string]any:
		for k, e := range x {
			x[k] = nullify(e)
		}
	case []any:
		for i, e := range x {
			x[i] = nullify(e)
		}
	}
	return v
}

func writeFile(path, content string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, []byte(content), 0o644)
}

// Archive packs dir into out: a .tar.gz, .tar or .zip, by out's name.
func Archive(dir, out string) error {
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	defer f.Close()
	var add func(name string, info os.FileInfo, r io.Reader) error
	var done func() error
	switch {
	case strings.HasSuffix(out, ".zip"):
		zw := zip.NewWriter(f)
		add = func(name string, info os.FileInfo, r io.Reader) error {
			w, err := zw.CreateHeader(&zip.FileHeader{Name: name, Method: zip.Deflate, Modified: info.ModTime()})
			if err == nil {
				_, err = io.Copy(w, r)
			}
			return err
		}
		done = zw.Close
	default:
		var w io.Writer = f
		var gz *gzip.Writer
		if strings.HasSuffix(out, ".gz") {
			gz = gzip.NewWriter(f)
			w = gz
		}
		tw := tar.NewWriter(w)
		add = func(name string, info os.FileInfo, r io.Reader) error {
			h, err := tar.FileInfoHeader(info, "")
			if err != nil {
				return err
			}
			h.Name = name
			if err := tw.WriteHeader(h); err != nil {
				return err
			}
			_, err = io.Copy(tw, r)
			return err
		}
		done = func() error {
			if err := tw.Close(); err != nil {
				return err
			}
			if gz != nil {
				return gz.Close()
			}
			return nil
		}
	}
	err = filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err != nil || info.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		r, err := os.Open(p)
		if err != nil {
			return err
		}
		defer r.Close()
		return add(filepath.ToSlash(rel), info, r)
	})
	if err != nil {
		return err
	}
	return done()
}
