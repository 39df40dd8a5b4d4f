// Package manifest reads deployment manifests in tests: what kustomize
// builds from a directory, or any multi-document YAML stream, as objects.
package manifest

import (
	"bufio"
	"bytes"
	"io"
	"os/exec"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// Kustomize runs `kubectl kustomize dir` and returns its output; the test
// is skipped where kubectl is not installed.
func Kustomize(t testing.TB, dir string) []byte {
	t.Helper()
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		t.Skip("kubectl not installed")
	}
	var stderr bytes.Buffer
	cmd := exec.Command(kubectl, "kustomize", dir)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("kubectl kustomize %s: %v\n%s", dir, err, stderr.String())
	}
	return out
}

// Objects splits a multi-document YAML stream into objects; documents that
// hold only comments are left out.
func Objects(t testing.TB, data []byte) []*unstructured.Unstructured {
	t.Helper()
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var out []*unstructured.Unstructured
	for {
		doc, err := r.Read()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatalf("reading a YAML stream: %v", err)
		}
		if len(bytes.TrimSpace(doc)) == 0 {
			continue
		}
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(doc, &u.Object); err != nil {
			t.Fatalf("a document does not parse: %v\n%s", err, doc)
		}
		if len(u.Object) == 0 {
			continue // comments only
		}
		out = append(out, u)
	}
}

// Into converts u into the typed v, refusing fields v does not know.
func Into(t testing.TB, u *unstructured.Unstructured, v any) {
	t.Helper()
	data, err := yaml.Marshal(u.Object)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict(data, v); err != nil {
		t.Fatalf("%s %s: %v", u.GetKind(), u.GetName(), err)
	}
}
