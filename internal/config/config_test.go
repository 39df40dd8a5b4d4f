package config

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"

	"github.com/tether-dev/tether/internal/kubevirt/check"
)

const samplePath = "../../config/samples/controller-config.yaml"

func dur(d time.Duration) metav1.Duration { return metav1.Duration{Duration: d} }

func TestDefault(t *testing.T) {
	c := Default()
	if err := c.Validate(); err != nil {
		t.Fatalf("defaults do not validate: %v", err)
	}
	want := Config{
		APIVersion:        "tether.dev/v1alpha1",
		Kind:              "ControllerConfig",
		Checks:            map[string]CheckConfig{},
		BlastRadius:       BlastRadiusConfig{MaxActions: 5, Interval: dur(10 * time.Minute)},
		Backoff:           BackoffConfig{Base: dur(5 * time.Second), Max: dur(5 * time.Minute)},
		ActionTimeout:     dur(2 * time.Minute),
		Protection:        ProtectionConfig{ReleaseDelay: dur(35 * time.Second)},
		DanglingOnRestart: DanglingOnRestartConfig{Settle: dur(30 * time.Second)},
		PolicyReports:     PolicyReportsConfig{Interval: dur(10 * time.Second)},
	}
	if !reflect.DeepEqual(c, want) {
		t.Errorf("Default() = %+v\nwant %+v", c, want)
	}
	for _, name := range check.Names() {
		if c.Enabled(name) {
			t.Errorf("check %s is enabled by default; every check must be opt-in", name)
		}
		if g := c.Grace(name); g != 10*time.Minute {
			t.Errorf("Grace(%s) = %s, want 10m", name, g)
		}
	}
	if c.DryRun {
		t.Error("dryRun is on by default; the --dry-run flag turns it on")
	}
}

// TestParse covers decoding and every validation error. want is the
// expected config (nil: not compared); errs are substrings the error must
// contain (none: success).
func TestParse(t *testing.T) {
	withDefaults := func(f func(*Config)) *Config {
		c := Default()
		f(&c)
		return &c
	}
	cases := []struct {
		name string
		in   string
		want *Config
		errs []string
	}{
		{name: "empty file -> defaults", in: "", want: withDefaults(func(*Config) {})},
		{name: "only comments -> defaults", in: "# nothing\n", want: withDefaults(func(*Config) {})},
		{name: "empty apiVersion and kind -> filled in", in: "apiVersion: \"\"\nkind: \"\"\n", want: withDefaults(func(*Config) {})},
		{name: "JSON -> accepted", in: `{"dryRun": true}`, want: withDefaults(func(c *Config) { c.DryRun = true })},
		{
			name: "enabled check without grace -> default grace",
			in:   "checks:\n  OrphanHotplugVolume:\n    enabled: true\n",
			want: withDefaults(func(c *Config) {
				c.Checks["OrphanHotplugVolume"] = CheckConfig{Enabled: true, GracePeriod: dur(10 * time.Minute)}
			}),
		},
		{
			name: "explicit zero grace -> kept",
			in:   "checks:\n  OrphanHotplugVolume: {enabled: true, gracePeriod: 0s}\n",
			want: withDefaults(func(c *Config) {
				c.Checks["OrphanHotplugVolume"] = CheckConfig{Enabled: true}
			}),
		},
		{
			name: "null check entry -> disabled with default grace",
			in:   "checks:\n  OrphanAttachmentPod:\n",
			want: withDefaults(func(c *Config) {
				c.Checks["OrphanAttachmentPod"] = CheckConfig{GracePeriod: dur(10 * time.Minute)}
			}),
		},
		{
			name: "partial blastRadius -> other field keeps its default",
			in:   "blastRadius: {maxActions: 2}\nbackoff: {max: 1m}\n",
			want: withDefaults(func(c *Config) {
				c.BlastRadius.MaxActions = 2
				c.Backoff.Max = dur(time.Minute)
			}),
		},
		{
			name: "scope and tenants -> decoded",
			in: "scope: {namespaces: [a, b], selector: 'x=y', volumePrefix: pvc-}\n" +
				"tenantAuthoritative: true\nallowVMIOnlyDetach: true\n" +
				"tenants: [{name: g1, kubeconfig: /k, namespace: a}, {name: g2, kubeconfig: /k2, namespace: b, driver: csi.example.com, matchNodesByName: true}]\n",
			want: withDefaults(func(c *Config) {
				c.Scope = ScopeConfig{Namespaces: []string{"a", "b"}, Selector: "x=y", VolumePrefix: "pvc-"}
				c.TenantAuthoritative, c.AllowVMIOnlyDetach = true, true
				c.Tenants = []TenantConfig{{Name: "g1", Kubeconfig: "/k", Namespace: "a"}, {Name: "g2", Kubeconfig: "/k2", Namespace: "b", Driver: "csi.example.com", MatchNodesByName: true}}
			}),
		},

		// Decoding errors.
		{name: "not YAML -> error", in: "a: [", errs: []string{"not valid YAML"}},
		{name: "duplicate key -> error naming it", in: "dryRun: true\ndryRun: false\n", errs: []string{`"dryRun" already set`}},
		{name: "unknown top-level field -> error naming it", in: "dryrun: true\n", errs: []string{`unknown field "dryrun"`}},
		{name: "unknown nested field -> error with its path", in: "scope: {namespace: [a]}\n", errs: []string{`unknown field "scope.namespace"`}},
		{name: "unknown field in a check -> error with its path", in: "checks: {OrphanHotplugVolume: {grace: 1m}}\n", errs: []string{`unknown field "checks.OrphanHotplugVolume.grace"`}},
		{name: "two unknown fields -> both named", in: "foo: 1\nbar: 2\n", errs: []string{`"foo"`, `"bar"`}},
		{name: "list instead of mapping -> error", in: "- a\n", errs: []string{"must be a mapping", "got a list"}},
		{name: "string for a number -> field and type", in: "blastRadius: {maxActions: five}\n", errs: []string{"blastRadius.maxActions: got a string, want a whole number"}},
		{name: "number for a bool in a check -> check named", in: "checks: {OrphanAttachmentPod: {enabled: 1}}\n", errs: []string{"checks.OrphanAttachmentPod.enabled: got a number, want a boolean"}},
		{name: "number for a tenant name -> index named", in: "tenants: [{name: a, kubeconfig: b}, {name: 3}]\n", errs: []string{"tenants[1].name: got a number, want a string"}},
		{name: "bad duration -> field and example", in: "actionTimeout: ten\n", errs: []string{`actionTimeout: "ten" is not a duration`, `"10m"`}},
		{name: "duration without unit -> field", in: "checks: {OrphanHotplugVolume: {gracePeriod: 600}}\n", errs: []string{"checks.OrphanHotplugVolume.gracePeriod: 600 is not a duration"}},
		{name: "bad backoff durations -> both named", in: "backoff: {base: x, max: y}\nblastRadius: {interval: z}\n", errs: []string{"backoff.base:", "backoff.max:", "blastRadius.interval:"}},

		// Validation errors.
		{name: "wrong apiVersion -> error with the right one", in: "apiVersion: v1\n", errs: []string{`apiVersion: "v1" is not supported: use "tether.dev/v1alpha1"`}},
		{name: "wrong kind -> error with the right one", in: "kind: Config\n", errs: []string{`kind: "Config" is not supported: use "ControllerConfig"`}},
		{name: "unknown check -> error listing valid checks", in: "checks: {Orphans: {enabled: true}}\n", errs: []string{`checks.Orphans: unknown check "Orphans"`, "OrphanHotplugVolume", "OrphanAttachmentPod"}},
		{name: "negative grace -> error", in: "checks: {OrphanHotplugVolume: {gracePeriod: -1m}}\n", errs: []string{"checks.OrphanHotplugVolume.gracePeriod: must not be negative"}},
		{name: "bad namespace -> error with index", in: "scope: {namespaces: [ok, Not_OK]}\n", errs: []string{`scope.namespaces[1]: "Not_OK" is not a valid namespace name`}},
		{name: "unparsable selector -> error with syntax hint", in: "scope: {selector: 'a=(b'}\n", errs: []string{"scope.selector:", "kubectl -l syntax"}},
		{name: "tenant without name -> error", in: "tenants: [{kubeconfig: /k}]\n", errs: []string{"tenants[0].name: is required"}},
		{name: "tenant without namespace, scope of all namespaces -> error with the fix", in: "tenants: [{name: g, kubeconfig: /k}]\n",
			errs: []string{"tenants[0].namespace: is required when scope.namespaces does not name exactly one namespace", "--infra-cluster-namespace"}},
		{name: "tenant without namespace, scope of two namespaces -> error", in: "scope: {namespaces: [a, b]}\ntenants: [{name: g, kubeconfig: /k}]\n",
			errs: []string{"tenants[0].namespace: is required"}},
		{name: "matchNodesByName without namespace -> error", in: "scope: {namespaces: [a]}\ntenants: [{name: g, kubeconfig: /k, matchNodesByName: true}]\n",
			errs: []string{"tenants[0].matchNodesByName: needs tenants[0].namespace"}},
		{name: "bad driver name -> error with example", in: "tenants: [{name: g, kubeconfig: /k, namespace: a, driver: 'Not A Driver'}]\n",
			errs: []string{`tenants[0].driver: "Not A Driver" is not a CSI driver name`, "csi.kubevirt.io"}},
		{name: "tenant with bad name -> error", in: "tenants: [{name: Guest_1, kubeconfig: /k}]\n", errs: []string{`tenants[0].name: "Guest_1" is not valid`}},
		{name: "tenant without kubeconfig -> error with example", in: "tenants: [{name: g1}]\n", errs: []string{"tenants[0].kubeconfig: is required", "/etc/tether/tenants/g1.kubeconfig"}},
		{name: "duplicate tenant name -> error naming the first", in: "tenants: [{name: g, kubeconfig: /a}, {name: g, kubeconfig: /b}]\n", errs: []string{`tenants[1].name: "g" is already the name of tenants[0]`}},
		{name: "tenant with bad namespace -> error", in: "tenants: [{name: g, kubeconfig: /a, namespace: A}]\n", errs: []string{`tenants[0].namespace: "A" is not a valid namespace name`}},
		{name: "tenant namespace outside scope.namespaces -> error", in: "scope: {namespaces: [a, b]}\ntenants: [{name: g, kubeconfig: /k, namespace: c}]\n",
			errs: []string{`tenants[0].namespace: "c" is not in scope.namespaces (a, b)`}},
		{name: "tenant namespace in scope.namespaces -> accepted", in: "scope: {namespaces: [a, b]}\ntenants: [{name: g, kubeconfig: /k, namespace: b}]\n",
			want: withDefaults(func(c *Config) {
				c.Scope.Namespaces = []string{"a", "b"}
				c.Tenants = []TenantConfig{{Name: "g", Kubeconfig: "/k", Namespace: "b"}}
			})},
		{name: "tenant without namespace and scope.namespaces set -> accepted", in: "scope: {namespaces: [a]}\ntenants: [{name: g, kubeconfig: /k}]\n",
			want: withDefaults(func(c *Config) {
				c.Scope.Namespaces = []string{"a"}
				c.Tenants = []TenantConfig{{Name: "g", Kubeconfig: "/k"}}
			})},
		{name: "tenant namespace without scope.namespaces -> accepted", in: "tenants: [{name: g, kubeconfig: /k, namespace: c}]\n",
			want: withDefaults(func(c *Config) { c.Tenants = []TenantConfig{{Name: "g", Kubeconfig: "/k", Namespace: "c"}} })},
		{name: "check the controller does not run, enabled -> error naming it and audit/fix", in: "checks: {OrphanAttachmentPod: {enabled: true}}\n",
			errs: []string{"checks.OrphanAttachmentPod.enabled:", "the controller runs only OrphanHotplugVolume", "`tether audit` and `tether fix` only"}},
		{name: "DanglingVolumeReference enabled -> error", in: "checks: {OrphanHotplugVolume: {enabled: true}, DanglingVolumeReference: {enabled: true}}\n",
			errs: []string{"checks.DanglingVolumeReference.enabled:", "`tether audit` and `tether fix` only"}},
		{name: "the namespace loop's report-only checks -> decoded", in: "checks: {StuckHotplugPhase: {enabled: true}, SharedClaimConflict: {enabled: true}, InterruptedVolumeMigration: {enabled: true, gracePeriod: 0s}}\n",
			want: withDefaults(func(c *Config) {
				c.Checks["StuckHotplugPhase"] = CheckConfig{Enabled: true, GracePeriod: dur(10 * time.Minute)}
				c.Checks["SharedClaimConflict"] = CheckConfig{Enabled: true, GracePeriod: dur(10 * time.Minute)}
				c.Checks["InterruptedVolumeMigration"] = CheckConfig{Enabled: true}
			})},
		{
			name: "storage checks and storage policy -> decoded",
			in: "checks: {StaleVolumeAttachment: {enabled: true, gracePeriod: 1m}, MultiAttachConflict: {enabled: true}, BlockedDeletion: {enabled: true}}\n" +
				"storage: {staleAttachmentGrace: 2m, multiAttachGrace: 30s, blockedDeletionGrace: 3m, fenceGoneNodesAfter: 1h, forceDetach: true}\n",
			want: withDefaults(func(c *Config) {
				c.Checks["StaleVolumeAttachment"] = CheckConfig{Enabled: true, GracePeriod: dur(time.Minute)}
				c.Checks["MultiAttachConflict"] = CheckConfig{Enabled: true, GracePeriod: dur(10 * time.Minute)}
				c.Checks["BlockedDeletion"] = CheckConfig{Enabled: true, GracePeriod: dur(10 * time.Minute)}
				c.Storage = StorageConfig{StaleAttachmentGrace: dur(2 * time.Minute), MultiAttachGrace: dur(30 * time.Second),
					BlockedDeletionGrace: dur(3 * time.Minute), FenceGoneNodesAfter: dur(time.Hour), ForceDetach: true}
			}),
		},
		{name: "storage check with a selector -> error suggesting namespaces", in: "checks: {StaleVolumeAttachment: {enabled: true}, BlockedDeletion: {enabled: true}}\nscope: {selector: a=b}\n",
			errs: []string{"checks.StaleVolumeAttachment.enabled: StaleVolumeAttachment cannot be limited by scope.selector", "checks.BlockedDeletion.enabled:", "scope.namespaces"}},
		{name: "MultiAttachConflict with a selector (on pod labels) -> accepted", in: "checks: {MultiAttachConflict: {enabled: true}}\nscope: {selector: a=b}\n"},
		{name: "negative storage durations -> each named", in: "checks: {StaleVolumeAttachment: {enabled: true}}\nstorage: {staleAttachmentGrace: -1s, fenceGoneNodesAfter: -1h}\n",
			errs: []string{"storage.staleAttachmentGrace: must not be negative", "storage.fenceGoneNodesAfter: must not be negative"}},
		{name: "storage duration without a unit -> error naming it", in: "checks: {StaleVolumeAttachment: {enabled: true}}\nstorage: {fenceGoneNodesAfter: 10}\n",
			errs: []string{"storage.fenceGoneNodesAfter: 10 is not a duration"}},
		{name: "forceDetach without StaleVolumeAttachment -> error", in: "storage: {forceDetach: true}\n",
			errs: []string{"storage.forceDetach: has no effect without checks.StaleVolumeAttachment.enabled: true"}},
		{name: "fenceGoneNodesAfter without StaleVolumeAttachment -> error", in: "checks: {MultiAttachConflict: {enabled: true}}\nstorage: {fenceGoneNodesAfter: 10m}\n",
			errs: []string{"storage.fenceGoneNodesAfter: has no effect without"}},
		{name: "fenceGoneNodesAfter shorter than a minute -> error naming the floor", in: "checks: {StaleVolumeAttachment: {enabled: true}}\nstorage: {fenceGoneNodesAfter: 30s}\n",
			errs: []string{"storage.fenceGoneNodesAfter: 30s is too short", "at least 1m0s", "or 0 to turn the rule off"}},
		{name: "unknown storage field -> error naming it", in: "storage: {forceDettach: true}\n", errs: []string{`unknown field "storage.forceDettach"`}},
		{name: "tenantAuthoritative without tenants -> error", in: "tenantAuthoritative: true\n", errs: []string{"tenantAuthoritative: has no effect without tenants"}},
		{name: "TenantNodeDown without tenants -> error", in: "checks: {TenantNodeDown: {enabled: true}}\n", errs: []string{"checks.TenantNodeDown.enabled:", "no tenant is configured"}},
		{name: "TenantNodeDown with a tenant and fencing.fenceAfter -> decoded", in: "checks: {TenantNodeDown: {enabled: true, gracePeriod: 30s}}\nfencing: {fenceAfter: 3m}\ntenants: [{name: g, kubeconfig: /k, namespace: c}]\n",
			want: withDefaults(func(c *Config) {
				c.Checks["TenantNodeDown"] = CheckConfig{Enabled: true, GracePeriod: dur(30 * time.Second)}
				c.Fencing.FenceAfter = dur(3 * time.Minute)
				c.Tenants = []TenantConfig{{Name: "g", Kubeconfig: "/k", Namespace: "c"}}
			})},
		{name: "negative fencing.fenceAfter -> error", in: "fencing: {fenceAfter: -1m}\n", errs: []string{"fencing.fenceAfter"}},
		{name: "maxActions zero -> error suggesting dryRun", in: "blastRadius: {maxActions: 0}\n", errs: []string{"blastRadius.maxActions: must be at least 1", "dryRun: true"}},
		{name: "negative interval -> error", in: "blastRadius: {interval: -1s}\n", errs: []string{"blastRadius.interval: must be positive"}},
		{name: "zero backoff base -> error", in: "backoff: {base: 0s}\n", errs: []string{"backoff.base: must be positive"}},
		{name: "negative backoff max -> error", in: "backoff: {max: -5m}\n", errs: []string{"backoff.max: must be positive"}},
		{name: "backoff base above max -> error", in: "backoff: {base: 10m, max: 1m}\n", errs: []string{"backoff: base 10m0s is longer than max 1m0s"}},
		{name: "zero actionTimeout -> error", in: "actionTimeout: 0s\n", errs: []string{"actionTimeout: must be positive"}},
		{
			name: "several problems -> all reported at once",
			in:   "kind: X\nchecks: {Nope: {}}\nscope: {namespaces: [A]}\nblastRadius: {maxActions: -1}\nactionTimeout: -1s\n",
			errs: []string{"kind:", "checks.Nope:", "scope.namespaces[0]:", "blastRadius.maxActions:", "actionTimeout:"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Parse([]byte(tc.in))
			if len(tc.errs) == 0 {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				if tc.want != nil && !reflect.DeepEqual(got, tc.want) {
					t.Errorf("got  %+v\nwant %+v", got, tc.want)
				}
				return
			}
			if err == nil {
				t.Fatalf("accepted, want an error containing %q", tc.errs)
			}
			if got != nil {
				t.Errorf("returned a config with an error")
			}
			for _, want := range tc.errs {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q\ndoes not contain %q", err, want)
				}
			}
		})
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	t.Run("no path -> defaults", func(t *testing.T) {
		c, err := Load("")
		if err != nil || !reflect.DeepEqual(*c, Default()) {
			t.Fatalf("Load(\"\") = %+v, %v", c, err)
		}
	})
	t.Run("missing file -> error naming the file", func(t *testing.T) {
		p := filepath.Join(dir, "absent.yaml")
		_, err := Load(p)
		if err == nil || !strings.Contains(err.Error(), "config file "+p) {
			t.Fatalf("error %v does not name %s", err, p)
		}
	})
	t.Run("invalid file -> error naming the file and field", func(t *testing.T) {
		p := write("bad.yaml", "backoff: {base: 0s}\n")
		_, err := Load(p)
		if err == nil || !strings.Contains(err.Error(), "config file "+p+": backoff.base: must be positive") {
			t.Fatalf("error %v", err)
		}
	})
	t.Run("valid file -> decoded over the defaults", func(t *testing.T) {
		p := write("ok.yaml", "dryRun: true\n")
		c, err := Load(p)
		if err != nil {
			t.Fatal(err)
		}
		want := Default()
		want.DryRun = true
		if !reflect.DeepEqual(*c, want) {
			t.Errorf("got %+v, want %+v", *c, want)
		}
	})
}

func TestSample(t *testing.T) {
	c, err := Load(samplePath)
	if err != nil {
		t.Fatalf("the sample does not load: %v", err)
	}
	if !c.Enabled(check.OrphanHotplugVolume) || c.Enabled(check.OrphanAttachmentPod) {
		t.Errorf("sample enables %v", c.Checks)
	}
	if g := c.Grace(check.OrphanHotplugVolume); g != 15*time.Minute {
		t.Errorf("sample grace = %s, want 15m", g)
	}
	if len(c.Tenants) != 0 || c.Scope.VolumePrefix != "pvc-" {
		t.Errorf("sample tenants %v, scope %+v", c.Tenants, c.Scope)
	}
	if _, err := c.Policy(); err != nil {
		t.Errorf("sample policy: %v", err)
	}
	// The sample mentions every field (tenant fields in a comment), so that
	// it documents them all.
	data, err := os.ReadFile(samplePath)
	if err != nil {
		t.Fatal(err)
	}
	for _, field := range jsonFields(reflect.TypeFor[Config]()) {
		if !strings.Contains(string(data), field+":") {
			t.Errorf("the sample does not mention field %q", field)
		}
	}
	// The commented tenant example is valid once uncommented.
	uncommented := strings.ReplaceAll(strings.Replace(string(data), "tenants: []", "tenants:", 1), "\n#  ", "\n  ")
	withTenant, err := Parse([]byte(uncommented))
	if err != nil {
		t.Fatalf("the sample with its tenant example: %v", err)
	}
	if len(withTenant.Tenants) != 1 || withTenant.Tenants[0].Name != "guest1" {
		t.Errorf("tenant example decodes to %+v", withTenant.Tenants)
	}
}

// jsonFields lists the JSON names of a struct's fields and of the fields of
// its struct-typed fields.
func jsonFields(t reflect.Type) []string {
	var out []string
	for f := range t.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		out = append(out, name)
		ft := f.Type
		for ft.Kind() == reflect.Map || ft.Kind() == reflect.Slice {
			ft = ft.Elem()
		}
		if ft.Kind() == reflect.Struct && ft != reflect.TypeFor[metav1.Duration]() {
			out = append(out, jsonFields(ft)...)
		}
	}
	return out
}

func TestEnabledAndGrace(t *testing.T) {
	c := Default()
	c.Checks["OrphanHotplugVolume"] = CheckConfig{Enabled: true, GracePeriod: dur(time.Minute)}
	c.Checks["OrphanAttachmentPod"] = CheckConfig{GracePeriod: dur(3 * time.Minute)}
	cases := []struct {
		check   string
		enabled bool
		grace   time.Duration
	}{
		{"OrphanHotplugVolume", true, time.Minute},
		{"OrphanAttachmentPod", false, 3 * time.Minute},
		{"NotListed", false, DefaultGracePeriod},
	}
	for _, tc := range cases {
		if got := c.Enabled(tc.check); got != tc.enabled {
			t.Errorf("Enabled(%s) = %v, want %v", tc.check, got, tc.enabled)
		}
		if got := c.Grace(tc.check); got != tc.grace {
			t.Errorf("Grace(%s) = %s, want %s", tc.check, got, tc.grace)
		}
	}
	var nilChecks Config
	if nilChecks.Enabled("OrphanHotplugVolume") || nilChecks.Grace("x") != DefaultGracePeriod {
		t.Error("a config without a checks map must enable nothing and use the default grace")
	}
}

func TestPolicy(t *testing.T) {
	t.Run("no check enabled -> ErrNoChecks", func(t *testing.T) {
		c := Default()
		c.Checks["OrphanHotplugVolume"] = CheckConfig{Enabled: false}
		_, err := c.Policy()
		if !errors.Is(err, ErrNoChecks) {
			t.Fatalf("err = %v, want ErrNoChecks", err)
		}
	})
	t.Run("unparsable selector -> error naming scope.selector", func(t *testing.T) {
		c := Default()
		c.Checks["OrphanHotplugVolume"] = CheckConfig{Enabled: true}
		c.Scope.Selector = "a=(b"
		if _, err := c.Policy(); err == nil || !strings.Contains(err.Error(), "scope.selector") {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("config that Validate refuses -> policy all the same (validation is Parse's, once)", func(t *testing.T) {
		c := Default()
		c.Checks["OrphanHotplugVolume"] = CheckConfig{Enabled: true}
		c.BlastRadius.MaxActions = 0
		if c.Validate() == nil {
			t.Fatal("maxActions 0 validates")
		}
		if _, err := c.Policy(); err != nil {
			t.Fatalf("Policy validated the config again: %v", err)
		}
		if _, err := c.DanglingPolicy(); err != nil {
			t.Fatalf("DanglingPolicy validated the config again: %v", err)
		}
	})
	t.Run("enabled checks, scope and opt-ins -> policy", func(t *testing.T) {
		c, err := Parse([]byte(`
checks:
  OrphanAttachmentPod: {enabled: false}
  OrphanHotplugVolume: {enabled: true}
scope: {namespaces: [a], selector: "x=y", volumePrefix: pvc-}
allowVMIOnlyDetach: true
tenantAuthoritative: true
tenants: [{name: g, kubeconfig: /k}]
fencing: {fenceAfter: 3m}
`))
		if err != nil {
			t.Fatal(err)
		}
		p, err := c.Policy()
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(p.Checks, []string{check.OrphanHotplugVolume}) {
			t.Errorf("checks %v: want the enabled check only", p.Checks)
		}
		if !slices.Equal(p.Scope.Namespaces, []string{"a"}) || p.Scope.VolumePrefix != "pvc-" ||
			!p.Scope.Selector.Matches(labels.Set{"x": "y"}) || p.Scope.Selector.Matches(labels.Set{"x": "z"}) {
			t.Errorf("scope %+v", p.Scope)
		}
		if !p.AllowVMIOnlyDetach || !p.TenantAuthoritative || p.DeleteAttachmentPods {
			t.Errorf("opt-ins %+v", p)
		}
		if p.FenceAfter != 3*time.Minute {
			t.Errorf("fence after %s, want fencing.fenceAfter's 3m", p.FenceAfter)
		}
		if p.MinAttachmentPodAge != check.DefaultPolicy().MinAttachmentPodAge {
			t.Errorf("min attachment pod age %s, want the check package's default", p.MinAttachmentPodAge)
		}
		c.Scope.Namespaces[0] = "changed"
		if p.Scope.Namespaces[0] != "a" {
			t.Error("the policy shares the namespace list with the config")
		}
	})
	t.Run("disabled check -> left out", func(t *testing.T) {
		c := Default()
		c.Checks["OrphanHotplugVolume"] = CheckConfig{Enabled: true}
		c.Checks["OrphanAttachmentPod"] = CheckConfig{Enabled: false}
		p, err := c.Policy()
		if err != nil || !slices.Equal(p.Checks, []string{check.OrphanHotplugVolume}) {
			t.Fatalf("policy checks %v, %v", p.Checks, err)
		}
	})
}

// FuzzParse: Parse never panics; whatever it accepts validates, builds a
// policy (or reports that no check is enabled), and reads back the same
// after encoding.
func FuzzParse(f *testing.F) {
	if data, err := os.ReadFile(samplePath); err == nil {
		f.Add(data)
	}
	for _, s := range []string{
		"", "dryRun: true", "checks: {OrphanHotplugVolume: {enabled: true}}",
		"checks: {OrphanHotplugVolume: {gracePeriod: -1s}}", "checks: {X: null}",
		"scope: {namespaces: [a], selector: 'a in (b,c)'}", "tenants: [{name: g, kubeconfig: /k}]",
		"backoff: {base: 1h, max: 1s}", "blastRadius: {maxActions: 9223372036854775807}",
		"actionTimeout: 1ns", "[1, 2]", "{", "apiVersion: tether.dev/v1alpha1\nkind: ControllerConfig",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse(data)
		if err != nil {
			if c != nil {
				t.Fatal("a config returned with an error")
			}
			return
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("accepted config does not validate: %v", err)
		}
		if _, err := c.Policy(); err != nil && !errors.Is(err, ErrNoChecks) {
			t.Fatalf("accepted config builds no policy: %v", err)
		}
		out, err := yaml.Marshal(c)
		if err != nil {
			t.Fatalf("encoding: %v", err)
		}
		again, err := Parse(out)
		if err != nil {
			t.Fatalf("encoded config does not parse: %v\n%s", err, out)
		}
		if !reflect.DeepEqual(c, again) {
			t.Fatalf("round trip changed the config:\n%+v\n%+v", c, again)
		}
	})
}

func TestProtection(t *testing.T) {
	c, err := Parse([]byte("protection:\n  enabled: true\nscope:\n  namespaces: [tenant-a]\n  selector: app=db\n"))
	if err != nil {
		t.Fatal(err)
	}
	if !c.Protection.Enabled {
		t.Error("protection.enabled not read")
	}
	// Protection alone enables no check: the controller runs it without a policy.
	if _, err := c.Policy(); !errors.Is(err, ErrNoChecks) {
		t.Errorf("Policy: %v, want ErrNoChecks", err)
	}
	sel, err := c.VMSelector()
	if err != nil || !sel.Matches(labels.Set{"app": "db"}) || sel.Matches(labels.Set{"app": "web"}) {
		t.Errorf("VMSelector %v, %v", sel, err)
	}
	if _, err := Parse([]byte("protection:\n  enable: true\n")); err == nil || !strings.Contains(err.Error(), "protection.enable") {
		t.Errorf("misspelt protection field: %v", err)
	}
	if Default().Protection.Enabled {
		t.Error("protection must be opt-in")
	}
}

func TestDanglingOnRestart(t *testing.T) {
	c, err := Parse([]byte("danglingOnRestart:\n  enabled: true\nscope:\n  namespaces: [tenant-a]\n  volumePrefix: pvc-\n"))
	if err != nil {
		t.Fatal(err)
	}
	if !c.DanglingOnRestart.Enabled {
		t.Error("danglingOnRestart.enabled not read")
	}
	// The mode alone enables no check: the controller runs it without the
	// checks' policy.
	if _, err := c.Policy(); !errors.Is(err, ErrNoChecks) {
		t.Errorf("Policy: %v, want ErrNoChecks", err)
	}
	p, err := c.DanglingPolicy()
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(p.Checks, []string{check.DanglingVolumeReference}) {
		t.Errorf("DanglingPolicy checks = %v, want only %s", p.Checks, check.DanglingVolumeReference)
	}
	if !reflect.DeepEqual(p.Scope.Namespaces, []string{"tenant-a"}) || p.Scope.VolumePrefix != "pvc-" {
		t.Errorf("DanglingPolicy scope = %+v, want the configuration's", p.Scope)
	}
	if _, err := Parse([]byte("danglingOnRestart:\n  enable: true\n")); err == nil || !strings.Contains(err.Error(), "danglingOnRestart.enable") {
		t.Errorf("misspelt danglingOnRestart field: %v", err)
	}
	if _, err := Parse([]byte("danglingOnRestart:\n  enabled: yes please\n")); err == nil || !strings.Contains(err.Error(), "danglingOnRestart.enabled") {
		t.Errorf("danglingOnRestart.enabled of the wrong type: %v", err)
	}
	// It does not make DanglingVolumeReference a controller check.
	if _, err := Parse([]byte("danglingOnRestart:\n  enabled: true\nchecks:\n  DanglingVolumeReference:\n    enabled: true\n")); err == nil {
		t.Error("enabling DanglingVolumeReference as a check must stay an error")
	}
	if Default().DanglingOnRestart.Enabled {
		t.Error("danglingOnRestart must be opt-in")
	}
}

func TestPolicyReports(t *testing.T) {
	c, err := Parse([]byte("policyReports:\n  enabled: true\n  api: openreports.io/v1alpha1\n  interval: 30s\n"))
	if err != nil {
		t.Fatal(err)
	}
	if !c.PolicyReports.Enabled || c.PolicyReports.API != "openreports.io/v1alpha1" || c.PolicyReports.Interval.Duration != 30*time.Second {
		t.Errorf("policyReports = %+v", c.PolicyReports)
	}
	for doc, field := range map[string]string{
		"policyReports: {api: wgpolicyk8s.io/v1}\n": "policyReports.api",
		"policyReports: {interval: 0s}\n":           "policyReports.interval",
		"policyReports: {enable: true}\n":           "policyReports.enable",
	} {
		if _, err := Parse([]byte(doc)); err == nil || !strings.Contains(err.Error(), field) {
			t.Errorf("%q: error %v, want one naming %s", doc, err, field)
		}
	}
	if Default().PolicyReports.Enabled {
		t.Error("policyReports must be opt-in")
	}
}

func TestStoragePolicy(t *testing.T) {
	c, err := Parse([]byte("checks: {StaleVolumeAttachment: {enabled: true}}\nstorage: {staleAttachmentGrace: 2m, fenceGoneNodesAfter: 1h, forceDetach: true}\n"))
	if err != nil {
		t.Fatal(err)
	}
	p, err := c.Policy()
	if err != nil {
		t.Fatal(err)
	}
	want := check.StoragePolicy{StaleAttachmentGrace: 2 * time.Minute, FenceGoneNodesAfter: time.Hour, ForceDetach: true}
	if !slices.Equal(p.Checks, []string{check.StaleVolumeAttachment}) || p.Storage != want {
		t.Fatalf("policy checks %v storage %+v, want %+v", p.Checks, p.Storage, want)
	}
	if got := StorageChecks(); !slices.Equal(got, []string{check.StaleVolumeAttachment, check.MultiAttachConflict, check.BlockedDeletion}) {
		t.Fatalf("StorageChecks() = %v", got)
	}
	for _, name := range StorageChecks() {
		if !slices.Contains(ControllerChecks(), name) {
			t.Errorf("storage check %s is not a controller check", name)
		}
	}
}

// The hot-plug graces of the file reach the policy; negative ones are
// refused, named.
func TestHotplugPolicy(t *testing.T) {
	c, err := Parse([]byte("checks: {PhantomAttach: {enabled: true}}\nhotplug: {tenantAttachGrace: 7m, stuckPhaseGrace: 1h}\n"))
	if err != nil {
		t.Fatal(err)
	}
	p, err := c.Policy()
	if err != nil {
		t.Fatal(err)
	}
	if p.TenantAttachGrace != 7*time.Minute || p.StuckPhaseGrace != time.Hour {
		t.Fatalf("policy graces %s, %s; want 7m, 1h", p.TenantAttachGrace, p.StuckPhaseGrace)
	}
	if _, err := Parse([]byte("checks: {PhantomAttach: {enabled: true}}\nhotplug: {tenantAttachGrace: -1s}\n")); err == nil || !strings.Contains(err.Error(), "hotplug.tenantAttachGrace") {
		t.Fatalf("a negative grace: %v", err)
	}
}

// TestStaleAttachmentDefaultsAddUp: the docs (docs/controller.md, "Report
// after, act after") say that with the defaults a stale VolumeAttachment is
// reported after 5m and acted on 10m later, 15m in all.
func TestStaleAttachmentDefaultsAddUp(t *testing.T) {
	c := Default()
	reportAfter := c.Storage.StaleAttachmentGrace.Duration
	if reportAfter == 0 {
		reportAfter = check.DefaultStaleAttachmentGrace
	}
	actAfter := c.Grace(check.StaleVolumeAttachment)
	if reportAfter != 5*time.Minute || actAfter != 10*time.Minute {
		t.Errorf("report after %s, act after %s: the docs say 5m and 10m, 15m in all", reportAfter, actAfter)
	}
}

// Every setting of the checks that has a section (check.Settings) is a key
// of this configuration that reaches the policy field of its row; one
// without a section is not.
func TestSettingsAreKeysOfTheConfiguration(t *testing.T) {
	const v = 7*time.Minute + 13*time.Second
	for _, st := range check.Settings() {
		c := Default()
		c.Checks[check.OrphanHotplugVolume] = CheckConfig{Enabled: true}
		doc := st.Section + ": {" + st.Name + ": " + v.String() + "}"
		if st.Section == "" {
			doc = st.Name + ": " + v.String()
		}
		err := yaml.UnmarshalStrict([]byte(doc), &c)
		if st.Section == "" {
			if err == nil {
				t.Errorf("setting %s has no section, but the configuration takes %q", st.Name, doc)
			}
			continue
		}
		if err != nil {
			t.Errorf("setting %s: the configuration does not take %q: %v", st.Name, doc, err)
			continue
		}
		p, err := c.Policy()
		if err != nil {
			t.Errorf("setting %s: %v", st.Name, err)
			continue
		}
		if got := *st.Of(&p); got != v {
			t.Errorf("setting %s: %s.%s: %s reaches the policy as %s", st.Name, st.Section, st.Name, v, got)
		}
	}
}
