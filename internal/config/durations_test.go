package config

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// durationPaths lists the path of every duration field of t (a
// metav1.Duration or *metav1.Duration), by a walk of its own: a path is a
// list of field names (string) and list indexes (int); map values are
// reached under the key "OrphanHotplugVolume", list items at index 0.
func durationPaths(t reflect.Type, path []any) [][]any {
	switch {
	case t == reflect.TypeFor[metav1.Duration]():
		return [][]any{path}
	case t.Kind() == reflect.Pointer:
		return durationPaths(t.Elem(), path)
	case t.Kind() == reflect.Map:
		return durationPaths(t.Elem(), append(slices.Clone(path), "OrphanHotplugVolume"))
	case t.Kind() == reflect.Slice:
		return durationPaths(t.Elem(), append(slices.Clone(path), 0))
	case t.Kind() == reflect.Struct:
		var out [][]any
		for f := range t.Fields() {
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			out = append(out, durationPaths(f.Type, append(slices.Clone(path), name))...)
		}
		return out
	}
	return nil
}

// yamlPath writes a path as error messages do: "checks.X.gracePeriod",
// "tenants[0].name".
func yamlPath(path []any) string {
	var b strings.Builder
	for _, s := range path {
		switch s := s.(type) {
		case string:
			if b.Len() > 0 {
				b.WriteString(".")
			}
			b.WriteString(s)
		case int:
			fmt.Fprintf(&b, "[%d]", s)
		}
	}
	return b.String()
}

// fileWith is a file that sets only the field at path, to v.
func fileWith(t *testing.T, path []any, v any) []byte {
	for i := len(path) - 1; i >= 0; i-- {
		switch s := path[i].(type) {
		case string:
			v = map[string]any{s: v}
		case int:
			v = []any{v}
		}
	}
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// TestEveryDurationIsChecked: every duration field of Config, found by a
// walk of the test's own, is checked by Parse, both when it does not parse
// and when it is negative, with an error that names its YAML path. A new
// duration field is covered without a change here.
func TestEveryDurationIsChecked(t *testing.T) {
	paths := durationPaths(reflect.TypeFor[Config](), nil)
	if len(paths) < 10 {
		t.Fatalf("found %d duration fields, want at least the 10 of today: %v", len(paths), paths)
	}
	for _, path := range paths {
		field := yamlPath(path)
		cases := []struct {
			name string
			v    any
			want string
		}{
			{"not a duration -> error naming the field", "ten", field + `: "ten" is not a duration`},
			{"number without a unit -> error naming the field", 10, field + ": 10 is not a duration"},
			{"negative -> error naming the field", "-1s", field + ": must "},
		}
		for _, tc := range cases {
			t.Run(field+": "+tc.name, func(t *testing.T) {
				_, err := Parse(fileWith(t, path, tc.v))
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Errorf("error %v\ndoes not contain %q", err, tc.want)
				}
			})
		}
	}
}

// TestDurationWalks: both walks find plain and pointer durations through
// structs, maps (in key order) and lists, skip unset pointers, unexported
// and `json:"-"` fields, and name each by its YAML path.
func TestDurationWalks(t *testing.T) {
	type inner struct {
		D *metav1.Duration `json:"d,omitempty"`
	}
	type sample struct {
		A      metav1.Duration             `json:"a"`
		P      *metav1.Duration            `json:"p,omitempty"`
		N      *metav1.Duration            `json:"n"`
		M      map[string]inner            `json:"m"`
		L      []inner                     `json:"l"`
		Skip   metav1.Duration             `json:"-"`
		S      string                      `json:"s"`
		Nested struct{ X metav1.Duration } `json:"nested"`
		hidden metav1.Duration
	}
	d := func(s int) *metav1.Duration { return &metav1.Duration{Duration: time.Duration(s) * time.Second} }
	v := sample{A: *d(1), P: d(2), M: map[string]inner{"y": {D: d(3)}, "x": {D: d(4)}}, L: []inner{{D: d(5)}, {}}, Skip: *d(6), hidden: *d(7)}
	v.Nested.X = *d(8)
	want := []string{"a=1s", "p=2s", "m.x.d=4s", "m.y.d=3s", "l[0].d=5s", "nested.X=8s"}

	var got []string
	eachDuration(reflect.ValueOf(v), "", func(path string, d time.Duration) {
		got = append(got, fmt.Sprintf("%s=%s", path, d))
	})
	if !slices.Equal(got, want) {
		t.Errorf("eachDuration: %v\nwant %v", got, want)
	}

	var raw map[string]any
	if err := json.Unmarshal([]byte(`{"a": "1s", "p": "2s", "n": null, "m": {"y": {"d": "3s"}, "x": {"d": "4s"}},
		"l": [{"d": "5s"}, {}], "Skip": "6s", "hidden": "7s", "s": "9s", "nested": {"X": "8s"}}`), &raw); err != nil {
		t.Fatal(err)
	}
	got = nil
	eachRawDuration(reflect.TypeFor[sample](), raw, "", func(path string, v any) {
		got = append(got, fmt.Sprintf("%s=%v", path, v))
	})
	if !slices.Equal(got, want) {
		t.Errorf("eachRawDuration: %v\nwant %v", got, want)
	}
}
