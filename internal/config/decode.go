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
// result. Unknown and duplicate fields are errors that name the field.
func Parse(data []byte) (*Config, error) {
	js, err := yaml.YAMLToJSONStrict(data)
	if err != nil {
		return nil, fmt.Errorf("not valid YAML: %w", err)
	}
	if err := checkDurations(js); err != nil {
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
	if err := defaultGracePeriods(js, &c); err != nil {
		return nil, err
	}
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
// their path; the decoder's own error would not name the field.
func checkDurations(js []byte) error {
	var raw map[string]any
	if err := sigsjson.UnmarshalCaseSensitivePreserveInts(js, &raw); err != nil {
		return nil // not an object: the typed decode reports it
	}
	var errs []error
	at := func(path string, v any, ok bool) {
		if !ok || v == nil {
			return
		}
		s, isString := v.(string)
		if !isString {
			errs = append(errs, fmt.Errorf("%s: %v is not a duration: write it as a string with a unit, e.g. \"90s\" or \"10m\"", path, v))
			return
		}
		if _, err := time.ParseDuration(s); err != nil {
			errs = append(errs, fmt.Errorf("%s: %q is not a duration: write it with a unit, e.g. \"90s\" or \"10m\"", path, s))
		}
	}
	field := func(parent any, name string) (any, bool) {
		m, ok := parent.(map[string]any)
		if !ok {
			return nil, false
		}
		v, ok := m[name]
		return v, ok
	}
	v, ok := field(raw, "actionTimeout")
	at("actionTimeout", v, ok)
	br, _ := field(raw, "blastRadius")
	v, ok = field(br, "interval")
	at("blastRadius.interval", v, ok)
	bo, _ := field(raw, "backoff")
	v, ok = field(bo, "base")
	at("backoff.base", v, ok)
	v, ok = field(bo, "max")
	at("backoff.max", v, ok)
	st, _ := field(raw, "storage")
	for _, name := range []string{"staleAttachmentGrace", "multiAttachGrace", "blockedDeletionGrace", "fenceGoneNodesAfter"} {
		v, ok = field(st, name)
		at("storage."+name, v, ok)
	}
	if checks, ok := raw["checks"].(map[string]any); ok {
		for _, name := range sortedKeys(checks) {
			v, ok := field(checks[name], "gracePeriod")
			at("checks."+name+".gracePeriod", v, ok)
		}
	}
	return errors.Join(errs...)
}

// defaultGracePeriods gives every listed check without a gracePeriod field
// the default one. (The decoder starts each map value from zero, so the
// default cannot be put in place before decoding.)
func defaultGracePeriods(js []byte, c *Config) error {
	var raw struct {
		Checks map[string]map[string]any `json:"checks"`
	}
	if err := sigsjson.UnmarshalCaseSensitivePreserveInts(js, &raw); err != nil {
		return fmt.Errorf("checks: %w", err)
	}
	for name, fields := range raw.Checks {
		if _, set := fields["gracePeriod"]; set {
			continue
		}
		cc := c.Checks[name]
		cc.GracePeriod = metav1.Duration{Duration: DefaultGracePeriod}
		c.Checks[name] = cc
	}
	return nil
}
