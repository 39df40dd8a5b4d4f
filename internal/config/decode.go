package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"reflect"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	sigsjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// Load reads the file at path, decodes it strictly over the defaults and
// validates it. An empty path gives the defaults. Errors name the file.
func Load(path string) (*Config, error) {
	if path == "" {
		c := Default()
		return &c, nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config file %s: %w", path, err)
	}
	c, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("config file %s: %w", path, err)
	}
	return c, nil
}

// Parse decodes YAML (or JSON) strictly over the defaults and validates the
// result: a Config from Parse is valid, and nothing derived from it checks
// it again. Unknown and duplicate fields are errors that name the field.
func Parse(data []byte) (*Config, error) {
	js, err := yaml.YAMLToJSONStrict(data)
	if err != nil {
		return nil, fmt.Errorf("not valid YAML: %w", err)
	}
	raw := plain(js)
	if err := checkDurations(raw); err != nil {
		return nil, err
	}
	c := Default()
	strict, err := sigsjson.UnmarshalStrict(js, &c)
	if err != nil {
		return nil, decodeError(js, err)
	}
	if len(strict) > 0 {
		errs := make([]error, len(strict))
		for i, e := range strict {
			errs[i] = fmt.Errorf("%w (see docs/controller.md for the fields)", e)
		}
		return nil, errors.Join(errs...)
	}
	defaultGracePeriods(raw, &c)
	if c.APIVersion == "" {
		c.APIVersion = APIVersion
	}
	if c.Kind == "" {
		c.Kind = Kind
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return &c, nil
}

// plain is the file decoded as plain maps and lists; nil when it is not a
// mapping (the typed decode reports that).
func plain(js []byte) map[string]any {
	var raw map[string]any
	if sigsjson.UnmarshalCaseSensitivePreserveInts(js, &raw) != nil {
		return nil
	}
	return raw
}

// defaultGracePeriods gives DefaultGracePeriod to every check that the file
// lists without a gracePeriod field; an explicit 0s is kept. raw is the file
// as plain (already decoded for checkDurations). It runs after the typed
// decode, because the decoder starts each map value from zero: the default
// cannot be put in place before.
func defaultGracePeriods(raw map[string]any, c *Config) {
	checks, _ := raw["checks"].(map[string]any)
	for name, v := range checks {
		fields, _ := v.(map[string]any)
		if _, written := fields["gracePeriod"]; written {
			continue
		}
		cc := c.Checks[name]
		cc.GracePeriod = metav1.Duration{Duration: DefaultGracePeriod}
		c.Checks[name] = cc
	}
}

// decodeError rewords the decoder's type errors to lead with the field path
// (the decoder drops map keys and list indexes from it) and to speak YAML.
func decodeError(js []byte, err error) error {
	var te *json.UnmarshalTypeError
	if !errors.As(err, &te) {
		return fmt.Errorf("decoding: %w", err)
	}
	got, want := yamlKind(te.Value), yamlType(te.Type)
	field := te.Field
	if field == "" {
		return fmt.Errorf("the file must be a mapping of fields (apiVersion, kind, checks, ...), got a %s", got)
	}
	field = locate(js, field)
	return fmt.Errorf("%s: got a %s, want a %s", field, got, want)
}

// locate adds the map key or list index the decoder leaves out of a field
// path inside checks or tenants.
func locate(js []byte, field string) string {
	var raw struct {
		Checks  map[string]json.RawMessage `json:"checks"`
		Tenants []json.RawMessage          `json:"tenants"`
	}
	if json.Unmarshal(js, &raw) != nil {
		return field
	}
	top, sub, _ := strings.Cut(field, ".")
	if sub != "" {
		sub = "." + sub
	}
	switch top {
	case "checks":
		for _, name := range sortedKeys(raw.Checks) {
			var cc CheckConfig
			if json.Unmarshal(raw.Checks[name], &cc) != nil {
				return "checks." + name + sub
			}
		}
	case "tenants":
		for i, t := range raw.Tenants {
			var tc TenantConfig
			if json.Unmarshal(t, &tc) != nil {
				return fmt.Sprintf("tenants[%d]%s", i, sub)
			}
		}
	}
	return field
}

// yamlKind names a JSON value kind as YAML users know it.
func yamlKind(v string) string {
	switch {
	case v == "object":
		return "mapping"
	case v == "array":
		return "list"
	case strings.HasPrefix(v, "number"):
		return "number"
	default:
		return v
	}
}

// yamlType names what a Go type accepts, in YAML terms.
func yamlType(t reflect.Type) string {
	if t == nil {
		return "value of another type"
	}
	switch t.Kind() {
	case reflect.Bool:
		return "boolean (true or false)"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "whole number"
	case reflect.String:
		return "string"
	case reflect.Slice, reflect.Array:
		return "list"
	case reflect.Map, reflect.Struct:
		return "mapping"
	default:
		return t.String()
	}
}

// checkDurations reports duration fields whose value does not parse, with
// their path; the decoder's own error would not name the field. raw is
// the file as plain; every duration field of Config is checked (see
// eachRawDuration).
func checkDurations(raw map[string]any) error {
	var errs []error
	eachRawDuration(reflect.TypeFor[Config](), raw, "", func(path string, v any) {
		s, isString := v.(string)
		if !isString {
			errs = append(errs, fmt.Errorf("%s: %v is not a duration: write it as a string with a unit, e.g. \"90s\" or \"10m\"", path, v))
			return
		}
		if _, err := time.ParseDuration(s); err != nil {
			errs = append(errs, fmt.Errorf("%s: %q is not a duration: write it with a unit, e.g. \"90s\" or \"10m\"", path, s))
		}
	})
	return errors.Join(errs...)
}

// eachRawDuration calls fn with the YAML path and the value of every
// duration that raw sets (null counts as not set). raw is (part of) the file
// decoded as plain maps and lists, and t the Go type it would decode into:
// a field of type metav1.Duration or *metav1.Duration is a duration, and
// the walk goes through structs, map values (in key order) and list items.
func eachRawDuration(t reflect.Type, raw any, path string, fn func(path string, v any)) {
	if raw == nil {
		return
	}
	switch {
	case t == durationType:
		fn(path, raw)
	case t.Kind() == reflect.Pointer:
		eachRawDuration(t.Elem(), raw, path, fn)
	case t.Kind() == reflect.Struct:
		m, _ := raw.(map[string]any)
		for f := range t.Fields() {
			name := fieldName(f)
			if v, ok := m[name]; ok && name != "" {
				eachRawDuration(f.Type, v, join(path, name), fn)
			}
		}
	case t.Kind() == reflect.Map:
		m, _ := raw.(map[string]any)
		for _, k := range sortedKeys(m) {
			eachRawDuration(t.Elem(), m[k], join(path, k), fn)
		}
	case t.Kind() == reflect.Slice:
		l, _ := raw.([]any)
		for i, v := range l {
			eachRawDuration(t.Elem(), v, fmt.Sprintf("%s[%d]", path, i), fn)
		}
	}
}
