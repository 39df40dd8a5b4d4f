package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/rest"

	"github.com/tether-dev/tether/internal/kubevirt/observe"
)

func TestParseTenant(t *testing.T) {
	files := map[string]bool{
		"/etc/guest.kubeconfig": true, "/a:b/c.kubeconfig": true, "kc": true,
		"/etc/kube/k:c": true,                   // a file whose name holds ':'
		"/both":         true, "/both:ns": true, // both readings exist
	}
	exists := func(p string) bool { return files[p] }
	for _, c := range []struct {
		name, spec         string
		wantName, wantPath string
		wantNS, wantErr    string
	}{
		{"name and path -> all namespaces", "guest=/etc/guest.kubeconfig", "guest", "/etc/guest.kubeconfig", "", ""},
		{"name, path and namespace -> namespace", "guest=/etc/guest.kubeconfig:tenant-a", "guest", "/etc/guest.kubeconfig", "tenant-a", ""},
		{"colon inside path, no namespace -> whole path", "g=/a:b/c.kubeconfig", "g", "/a:b/c.kubeconfig", "", ""},
		{"relative path with namespace -> split", "g=kc:ns1", "g", "kc", "ns1", ""},
		// Review F12: the whole is a file and the split would name another
		// path: the file that exists is meant, never a silent split.
		{"path ending in :label that exists whole -> whole path", "g=/etc/kube/k:c", "g", "/etc/kube/k:c", "", ""},
		{"path ending in :label, whole with a namespace -> split at the last colon", "g=/etc/kube/k:c:tenant-a", "g", "/etc/kube/k:c", "tenant-a", ""},
		{"trailing colon -> explicitly no namespace", "g=/both:ns:", "g", "/both:ns", "", ""},
		{"both readings exist -> ambiguous, both named", "g=/both:ns", "", "", "", "ambiguous: both /both (with namespace ns) and /both:ns exist"},
		{"neither reading exists -> error naming both", "g=/etc/kube/missing:c", "", "", "", "neither /etc/kube/missing (read as KUBECONFIG:NAMESPACE with namespace c) nor /etc/kube/missing:c exists"},
		{"no equals -> error with form", "guest", "", "", "", "NAME=KUBECONFIG[:NAMESPACE]"},
		{"empty path -> error", "guest=", "", "", "", "no kubeconfig path"},
		{"only namespace -> error", "guest=:ns", "", "", "", "no kubeconfig path"},
		{"only a colon -> error", "guest=:", "", "", "", "no kubeconfig path"},
		{"invalid name -> error", "Guest_1=/x", "", "", "", "is not valid"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := parseTenant(c.spec, exists)
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("want error containing %q, got %v", c.wantErr, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Name != c.wantName || got.kubeconfig != c.wantPath || got.Namespace != c.wantNS {
				t.Fatalf("got name=%q path=%q ns=%q", got.Name, got.kubeconfig, got.Namespace)
			}
		})
	}
}

// ParseTenant reads the file system: a real file whose name ends in
// ":<label>" is used whole.
func TestParseTenant_realFiles(t *testing.T) {
	dir := t.TempDir()
	whole := filepath.Join(dir, "k:c")
	if err := os.WriteFile(whole, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := ParseTenant("g=" + whole)
	if err != nil || got.kubeconfig != whole || got.Namespace != "" {
		t.Fatalf("got %+v, %v; want the whole path %s and no namespace", got, err, whole)
	}
	if err := os.WriteFile(filepath.Join(dir, "k"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ParseTenant("g=" + whole); err == nil || !strings.Contains(err.Error(), "ambiguous") {
		t.Fatalf("both readings exist: want an ambiguity error, got %v", err)
	}
}

// FuzzParseTenant states the documented grammar of --tenant
// NAME=KUBECONFIG[:NAMESPACE] as an oracle, over a file system where a path
// exists when the fuzzer's bit for it is set:
//   - NAME is a DNS-1123 label and the kubeconfig path is never empty;
//   - a spec ending in ':' means the rest is the path, with no namespace;
//   - otherwise the tenant names an existing file, and when the part after
//     the last ':' could be a namespace, the other reading does not exist
//     (so the choice is never a silent guess);
//   - the parts put back together give the input.
func FuzzParseTenant(f *testing.F) {
	for _, s := range []string{"g=/p", "g=/p:ns", "=", "g=:", "a=b=c:d", "g=/x:y:z", "g=C:\\x", "g=/k:c:"} {
		f.Add(s, uint8(0xff))
		f.Add(s, uint8(0x55))
	}
	f.Fuzz(func(t *testing.T, spec string, bits uint8) {
		exists := func(p string) bool {
			h := 0
			for _, r := range p {
				h = h*31 + int(r)
			}
			return bits>>(uint(h)&7)&1 == 1
		}
		got, err := parseTenant(spec, exists)
		if err != nil {
			return
		}
		name, rest, _ := strings.Cut(spec, "=")
		if got.Name != name || len(validation.IsDNS1123Label(name)) > 0 || got.kubeconfig == "" {
			t.Fatalf("%q parsed to an invalid name or an empty path: %+v", spec, got)
		}
		if strings.HasSuffix(rest, ":") {
			if got.kubeconfig != strings.TrimSuffix(rest, ":") || got.Namespace != "" {
				t.Fatalf("%q: a trailing ':' means the rest is the path with no namespace, got %+v", spec, got)
			}
			return
		}
		back := got.kubeconfig
		if got.Namespace != "" {
			back += ":" + got.Namespace
			if len(validation.IsDNS1123Label(got.Namespace)) > 0 || !exists(got.kubeconfig) || exists(back) {
				t.Fatalf("%q: namespace %q taken though the reading is not the only file", spec, got.Namespace)
			}
		} else if i := strings.LastIndex(rest, ":"); i > 0 && len(validation.IsDNS1123Label(rest[i+1:])) == 0 && !strings.Contains(rest[i+1:], "/") {
			if !exists(rest) || exists(rest[:i]) {
				t.Fatalf("%q: the whole path taken though it is not the only file", spec)
			}
		}
		if back != rest {
			t.Fatalf("%q parsed to %q", spec, back)
		}
	})
}

// --chunk-size: kubectl's default of 500, 0 for one LIST per kind, and a
// negative count refused with the fix; one-shot commands lift client-go's
// 5/s limit unless the kubeconfig set one.
func TestChunkSizeAndLimits(t *testing.T) {
	for _, c := range []struct {
		chunk   int64
		want    int64
		wantErr string
	}{{500, 500, ""}, {2000, 2000, ""}, {0, observe.Unpaged, ""}, {-1, 0, "use a positive count, or 0 for no chunks"}} {
		f := scopeFlags{chunkSize: c.chunk}
		o, err := f.observeOptions("")
		if c.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Fatalf("--chunk-size %d: want error %q, got %v", c.chunk, c.wantErr, err)
			}
			continue
		}
		if err != nil || o.PageSize != c.want {
			t.Fatalf("--chunk-size %d: page size %d, %v; want %d", c.chunk, o.PageSize, err, c.want)
		}
	}
	cfg := &rest.Config{}
	oneShotLimits(cfg)
	if cfg.QPS != oneShotQPS || cfg.Burst != oneShotBurst {
		t.Fatalf("limits %v/%d, want %v/%d", cfg.QPS, cfg.Burst, oneShotQPS, oneShotBurst)
	}
	set := &rest.Config{QPS: 3, Burst: 4}
	oneShotLimits(set)
	if set.QPS != 3 || set.Burst != 4 {
		t.Fatalf("a kubeconfig's own limits were replaced: %v/%d", set.QPS, set.Burst)
	}
}

// The graces of the checks of 2025-2026 reach the policy, and a negative
// one is refused before the cluster is contacted.
func TestNewGraceFlags(t *testing.T) {
	f := &scopeFlags{}
	fs := pflag.NewFlagSet("audit", pflag.ContinueOnError)
	f.register(fs)
	if err := fs.Parse([]string{"--tenant-attach-grace=3s", "--stuck-phase-grace=1h", "--stuck-publish-grace=7m"}); err != nil {
		t.Fatal(err)
	}
	p := f.policy(labels.Everything(), "")
	if p.TenantAttachGrace != 3*time.Second || p.StuckPhaseGrace != time.Hour || p.StuckPublishGrace != 7*time.Minute {
		t.Fatalf("policy graces %s, %s, %s; want 3s, 1h, 7m", p.TenantAttachGrace, p.StuckPhaseGrace, p.StuckPublishGrace)
	}
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	const cfg = "apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: 'https://127.0.0.1:1'}}]\n" +
		"users: [{name: u, user: {token: t}}]\ncontexts: [{name: x, context: {cluster: c, user: u}}]\ncurrent-context: x\n"
	if err := os.WriteFile(kc, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	for flag, want := range map[string]string{"--tenant-attach-grace": "tenant attach grace", "--stuck-phase-grace": "stuck phase grace", "--stuck-publish-grace": "stuck publish grace"} {
		code, _, stderr := runTether(t, "audit", "--kubeconfig", kc, "-A", flag, "-1s")
		if code != ExitError || !strings.Contains(stderr, want) {
			t.Errorf("%s -1s: exit %d, stderr %q; want an error naming %q", flag, code, stderr, want)
		}
	}
}

// --cbor is off unless asked for (CBOR serving is alpha), and reaches the
// read's options when asked for.
func TestCBORFlag(t *testing.T) {
	fs := pflag.NewFlagSet("audit", pflag.ContinueOnError)
	var f scopeFlags
	f.register(fs)
	for _, c := range []struct {
		args []string
		want bool
	}{{nil, false}, {[]string{"--cbor"}, true}, {[]string{"--cbor=false"}, false}} {
		f.cbor = false
		if err := fs.Parse(c.args); err != nil {
			t.Fatal(err)
		}
		o, err := f.observeOptions("")
		if err != nil || o.CBOR != c.want {
			t.Errorf("%v: CBOR %v, %v; want %v", c.args, o.CBOR, err, c.want)
		}
	}
}
