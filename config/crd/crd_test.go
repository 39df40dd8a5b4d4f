package crd

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tether-dev/tether/api/v1alpha1"
)

func TestObject(t *testing.T) {
	crd, err := Object()
	if err != nil {
		t.Fatal(err)
	}
	n := crd.Spec.Names
	if crd.Name != Name || crd.Spec.Group != v1alpha1.GroupVersion.Group || crd.Spec.Scope != apiextensionsv1.NamespaceScoped ||
		n.Plural != "findings" || n.Singular != "finding" || n.Kind != "Finding" || n.ListKind != "FindingList" ||
		!slices.Equal(n.ShortNames, []string{"tf"}) {
		t.Errorf("names or scope: %s %+v %s", crd.Name, n, crd.Spec.Scope)
	}
	if len(crd.Spec.Versions) != 1 {
		t.Fatalf("%d versions, want 1", len(crd.Spec.Versions))
	}
	v := crd.Spec.Versions[0]
	if v.Name != v1alpha1.GroupVersion.Version || !v.Served || !v.Storage || v.Subresources == nil || v.Subresources.Status == nil {
		t.Errorf("version %s: served %v, storage %v, subresources %+v", v.Name, v.Served, v.Storage, v.Subresources)
	}
	type col struct {
		name, typ, path string
		priority        int32
	}
	var cols []col
	for _, c := range v.AdditionalPrinterColumns {
		cols = append(cols, col{c.Name, c.Type, c.JSONPath, c.Priority})
	}
	want := []col{
		{"CHECK", "string", ".spec.check", 0},
		{"SUBJECT", "string", ".spec.subject.name", 0},
		{"VOLUME", "string", ".spec.volume", 0},
		{"NODE", "string", ".spec.node", 1},
		{"PHASE", "string", ".status.phase", 0},
		{"REASON", "string", ".status.reason", 0},
		{"ACT-AFTER", "date", ".status.actAfter", 1},
		{"AGE", "date", ".metadata.creationTimestamp", 0},
	}
	if !slices.Equal(cols, want) {
		t.Errorf("printer columns\n got %v\nwant %v", cols, want)
	}
	spec := v.Schema.OpenAPIV3Schema.Properties["spec"]
	if !slices.Equal(spec.Required, []string{"id", "check", "subject"}) {
		t.Errorf("spec.required = %v", spec.Required)
	}
	var phases []string
	for _, e := range v.Schema.OpenAPIV3Schema.Properties["status"].Properties["phase"].Enum {
		phases = append(phases, strings.Trim(string(e.Raw), `"`))
	}
	wantPhases := []string{
		string(v1alpha1.PhaseObserved), string(v1alpha1.PhaseWaiting), string(v1alpha1.PhaseBlocked),
		string(v1alpha1.PhaseActing), string(v1alpha1.PhaseResolved), string(v1alpha1.PhaseFailed),
	}
	if !slices.Equal(phases, wantPhases) {
		t.Errorf("phase enum %v, want %v", phases, wantPhases)
	}
}

// TestSchemaMatchesTypes walks the Go types and the schema side by side:
// every JSON field has a property of the matching type and every property
// is a field, so the apiserver neither prunes what the controller writes
// nor accepts what it cannot read.
func TestSchemaMatchesTypes(t *testing.T) {
	crd, err := Object()
	if err != nil {
		t.Fatal(err)
	}
	root := crd.Spec.Versions[0].Schema.OpenAPIV3Schema
	for _, part := range []string{"spec", "status"} {
		prop, ok := root.Properties[part]
		if !ok {
			t.Fatalf("schema has no %s", part)
		}
		f, _ := reflect.TypeFor[v1alpha1.Finding]().FieldByName(strings.ToUpper(part[:1]) + part[1:])
		compareSchema(t, part, f.Type, prop)
	}
}

var timeType = reflect.TypeFor[metav1.Time]()

func compareSchema(t *testing.T, path string, typ reflect.Type, s apiextensionsv1.JSONSchemaProps) {
	t.Helper()
	for typ.Kind() == reflect.Pointer {
		typ = typ.Elem()
	}
	switch {
	case typ == timeType:
		if s.Type != "string" || s.Format != "date-time" {
			t.Errorf("%s: a time, schema says %s/%s", path, s.Type, s.Format)
		}
	case typ.Kind() == reflect.String:
		if s.Type != "string" {
			t.Errorf("%s: a string, schema says %s", path, s.Type)
		}
	case typ.Kind() == reflect.Bool:
		if s.Type != "boolean" {
			t.Errorf("%s: a bool, schema says %s", path, s.Type)
		}
	case typ.Kind() == reflect.Int32 || typ.Kind() == reflect.Int64 || typ.Kind() == reflect.Int:
		if s.Type != "integer" {
			t.Errorf("%s: an integer, schema says %s", path, s.Type)
		}
	case typ.Kind() == reflect.Slice:
		if s.Type != "array" || s.Items == nil || s.Items.Schema == nil {
			t.Errorf("%s: a list, schema says %s", path, s.Type)
			return
		}
		compareSchema(t, path+"[]", typ.Elem(), *s.Items.Schema)
	case typ.Kind() == reflect.Struct:
		if s.Type != "object" {
			t.Errorf("%s: an object, schema says %s", path, s.Type)
		}
		seen := map[string]bool{}
		for f := range typ.Fields() {
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "" || name == "-" {
				t.Errorf("%s.%s: no JSON name", path, f.Name)
				continue
			}
			seen[name] = true
			prop, ok := s.Properties[name]
			if !ok {
				t.Errorf("%s.%s: not in the schema (the apiserver would prune it)", path, name)
				continue
			}
			compareSchema(t, path+"."+name, f.Type, prop)
		}
		for name := range s.Properties {
			if !seen[name] {
				t.Errorf("%s.%s: in the schema but not in the Go type", path, name)
			}
		}
	default:
		t.Errorf("%s: Go type %s has no schema rule here", path, typ)
	}
}
