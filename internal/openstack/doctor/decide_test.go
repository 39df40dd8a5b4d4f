package doctor

import (
	"strings"
	"testing"
	"time"

	"github.com/tether-dev/tether/internal/drift"
)

// The oracles are the services' own records: the "(Maximum in ...)" marks
// of Nova's and Cinder's rest_api_version_history.rst, the Cinder releases
// that carry "Reject unsafe delete attachment calls" (bug 2004555: 23.0.0,
// 22.1.0, 21.3.0, 20.3.0), and what a failed detach of a Nova without its
// service token leaves in Nova's instance action (seen on Nova 26.2.2 with
// Cinder 21.3.1: event compute_detach_volume, result Error, details
// "ClientException", the traceback through attachment_delete).

func TestReleaseOf(t *testing.T) {
	for _, tc := range []struct {
		max   string
		table []release
		want  string
	}{
		{"2.93", novaReleases, "Zed"},
		{"2.90", novaReleases, "Xena or Yoga"},
		{"2.100", novaReleases, "2025.1 Epoxy or 2025.2 Flamingo"}, // 2.100 > 2.96, not < 2.2
		{"2.97", novaReleases, "a development version before 2025.1 Epoxy or 2025.2 Flamingo"},
		{"2.104", novaReleases, "newer than 2026.1 Gazpacho"},
		{"3.70", cinderReleases, "Zed, 2023.1 Antelope or 2023.2 Bobcat"},
		{"3.59", cinderReleases, "Stein or Train"},
	} {
		if got := releaseOf(tc.max, tc.table); got != tc.want {
			t.Errorf("releaseOf(%s) = %q, want %q", tc.max, got, tc.want)
		}
	}
}

func TestAtLeast(t *testing.T) {
	for _, tc := range []struct {
		have, need string
		want       bool
	}{
		{"2.100", "2.89", true}, {"2.89", "2.89", true}, {"2.88", "2.89", false}, {"3.70", "3.44", true},
		{"3.9", "3.44", false}, {"", "3.44", false}, {"x", "2.1", false},
	} {
		if got := atLeast(tc.have, tc.need); got != tc.want {
			t.Errorf("atLeast(%q, %q) = %v", tc.have, tc.need, got)
		}
	}
}

// zed is a healthy Zed cloud as its version documents and admin reads show
// it.
func zed(mod ...func(*Facts)) Facts {
	f := Facts{
		Compute:      Service{Max: "2.93", Min: "2.1"},
		BlockStorage: Service{Max: "3.70", Min: "3.0"},
		Admin:        []Right{{What: "servers", Code: 200}, {What: "os-services", Code: 200}},
		DetachesNote: "the instance actions of the 3 most recently updated servers",
	}
	for _, m := range mod {
		m(&f)
	}
	return f
}

var t0 = time.Date(2026, 11, 26, 18, 0, 0, 0, time.UTC)

// refused is the instance action a detach of a Nova without its service
// token leaves.
var refused = Detach{Server: "s1", RequestID: "req-2", Time: t0.Add(time.Minute), Failed: true, Details: "ClientException",
	Traceback: "  File \"/usr/lib/python3/dist-packages/nova/virt/block_device.py\", line 519, in _do_detach\n    volume_api.attachment_delete(context, self['attachment_id'])\n  File \"cinderclient/client.py\", line 201, in request\n    raise exceptions.from_response(resp, body)\n"}

var detached = Detach{Server: "s1", RequestID: "req-1", Time: t0}

func probe(code int, msg string) func(*Facts) {
	return func(f *Facts) { f.Guard = &GuardProbe{Volume: "v", Code: code, Message: msg} }
}

func TestDecide(t *testing.T) {
	guardRefusal := "Detach volume from instance  using the Compute API"
	for _, tc := range []struct {
		name string
		f    Facts
		want map[string]drift.Status
		says map[string]string
	}{
		{"healthy Zed, nothing proved -> guard and token WARN", zed(),
			map[string]drift.Status{CheckNovaRelease: drift.StatusOK, CheckCinderRelease: drift.StatusOK, CheckNovaMicroversion: drift.StatusOK, CheckCinderMicroversion: drift.StatusOK, CheckAdmin: drift.StatusOK, CheckAttachmentGuard: drift.StatusWarn, CheckNovaServiceToken: drift.StatusWarn},
			map[string]string{CheckAttachmentGuard: "21.3.0 (Zed)"}},
		{"guard probed 409 and a Nova detach -> all OK", zed(probe(409, guardRefusal), func(f *Facts) { f.Detaches = []Detach{detached} }),
			map[string]drift.Status{CheckAttachmentGuard: drift.StatusOK, CheckNovaServiceToken: drift.StatusOK}, nil},
		{"a Nova detach without the guard proved -> token WARN", zed(func(f *Facts) { f.Detaches = []Detach{detached} }),
			map[string]drift.Status{CheckNovaServiceToken: drift.StatusWarn}, map[string]string{CheckNovaServiceToken: "not proven"}},
		{"guard probe accepted -> guard FAIL", zed(probe(202, "")),
			map[string]drift.Status{CheckAttachmentGuard: drift.StatusFail}, nil},
		{"guard probe skipped (volume in use) -> WARN saying why", zed(func(f *Facts) { f.Guard = &GuardProbe{Volume: "v", Skipped: "volume v is in-use with 1 attachments"} }),
			map[string]drift.Status{CheckAttachmentGuard: drift.StatusWarn}, map[string]string{CheckAttachmentGuard: "in-use"}},
		{"Nova's newest detach refused by Cinder, guard proved -> token FAIL", zed(probe(409, guardRefusal), func(f *Facts) { f.Detaches = []Detach{refused, detached} }),
			map[string]drift.Status{CheckNovaServiceToken: drift.StatusFail}, map[string]string{CheckNovaServiceToken: "Cinder's guard is on"}},
		{"Nova's newest detach refused by Cinder, guard unknown -> token FAIL all the same", zed(func(f *Facts) { f.Detaches = []Detach{refused} }),
			map[string]drift.Status{CheckNovaServiceToken: drift.StatusFail, CheckAttachmentGuard: drift.StatusWarn}, map[string]string{CheckNovaServiceToken: "not proven on"}},
		{"a refusal, then a newer successful detach -> the newest decides", zed(probe(409, guardRefusal), func(f *Facts) {
			ok := detached
			ok.Time = t0.Add(time.Hour)
			f.Detaches = []Detach{ok, refused}
		}), map[string]drift.Status{CheckNovaServiceToken: drift.StatusOK}, nil},
		{"a detach failing elsewhere -> not taken for the token", zed(func(f *Facts) {
			f.Detaches = []Detach{{Server: "s", Failed: true, Details: "DeviceDetachFailed", Traceback: "driver.detach_volume"}}
		}), map[string]drift.Status{CheckNovaServiceToken: drift.StatusWarn}, nil},
		{"Cinder 3.71 -> guard on by release", zed(func(f *Facts) { f.BlockStorage.Max = "3.71" }),
			map[string]drift.Status{CheckAttachmentGuard: drift.StatusOK}, map[string]string{CheckAttachmentGuard: "every release since 23.0.0"}},
		{"Cinder Xena -> no release with the fix, WARN", zed(func(f *Facts) { f.BlockStorage.Max = "3.66" }),
			map[string]drift.Status{CheckAttachmentGuard: drift.StatusWarn}, map[string]string{CheckAttachmentGuard: "older than every release with the fix"}},
		{"Nova Wallaby -> microversion FAIL", zed(func(f *Facts) { f.Compute.Max = "2.88" }),
			map[string]drift.Status{CheckNovaMicroversion: drift.StatusFail, CheckNovaRelease: drift.StatusOK}, map[string]string{CheckNovaRelease: "Wallaby"}},
		{"Cinder unreachable -> FAIL lines", zed(func(f *Facts) { f.BlockStorage = Service{Err: "connection refused"} }),
			map[string]drift.Status{CheckCinderRelease: drift.StatusFail, CheckCinderMicroversion: drift.StatusFail, CheckAttachmentGuard: drift.StatusWarn}, nil},
		{"not admin -> FAIL", zed(func(f *Facts) { f.Admin[0].Code = 403 }),
			map[string]drift.Status{CheckAdmin: drift.StatusFail}, nil},
		{"an admin read without an answer -> WARN", zed(func(f *Facts) { f.Admin[1] = Right{What: "os-services", Err: "timeout"} }),
			map[string]drift.Status{CheckAdmin: drift.StatusWarn}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lines := Decide(tc.f)
			got := map[string]drift.Line{}
			for _, l := range lines {
				got[l.Check] = l
				if l.Status != drift.StatusOK && l.Fix == "" {
					t.Errorf("%s %s without a fix", l.Check, l.Status)
				}
				if l.Source == "" {
					t.Errorf("%s without a source", l.Check)
				}
			}
			for c, want := range tc.want {
				if got[c].Status != want {
					t.Errorf("%s: got %s, want %s: %s", c, got[c].Status, want, got[c].Why)
				}
			}
			for c, phrase := range tc.says {
				if !strings.Contains(got[c].Why, phrase) {
					t.Errorf("%s should say %q: %s", c, phrase, got[c].Why)
				}
			}
		})
	}
}
