package check

import (
	"strings"
	"testing"
	"time"
)

// The maximum microversion of each Nova release, from
// nova/api/openstack/api_version_request.py at its tag: only 2024.1 (2.96)
// and later prove the reboot clean-up; 2023.2 has it but shares 2.95 with
// 2023.1, which does not.
func TestNovaRebootCleansDangling(t *testing.T) {
	for _, tc := range []struct {
		name string
		max  string
		want bool
	}{
		{"unknown (the version document was not read) -> no", "", false},
		{"Zed, 2.93 -> no", "2.93", false},
		{"2023.1 or 2023.2, 2.95 -> no (2023.1 has no clean-up)", "2.95", false},
		{"2024.1, 2.96 -> yes", "2.96", true},
		{"2025.1, 2.100 -> yes (compared as numbers, not strings)", "2.100", true},
		{"a later major, 3.0 -> yes", "3.0", true},
		{"a version without a minor -> no", "2", false},
		{"garbage -> no", "2.x", false},
		{"negative -> no", "2.-97", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := NovaRebootCleansDangling(tc.max); got != tc.want {
				t.Errorf("NovaRebootCleansDangling(%q) = %v, want %v", tc.max, got, tc.want)
			}
		})
	}
}

// withNova sets the maximum microversion Nova's version document named.
func (w *world) withNova(max string) *world {
	w.s.NovaMaxMicroversion = max
	return w
}

// The remedy of a dangling mapping on a server that runs says "hard reboot:
// Nova repairs it itself" only where Nova's release has the clean-up and the
// recorded attachment is confirmed gone, as Nova itself will read it.
func TestDanglingRemedyNamesTheReboot(t *testing.T) {
	const reboot = "hard reboot: Nova repairs it itself"
	running := func(max string) *world {
		return (&world{}).withNova(max).server("s1", listsWith("v1", "a1", "/dev/vdb")).
			volume("v1", status("available", time.Hour)).gone("a1")
	}
	for _, tc := range []struct {
		name   string
		w      *world
		reboot bool
		also   []string // in the remedy as well
	}{
		{"running server, attachment gone, Nova 2025.1 -> reboot", running("2.100"), true,
			[]string{"openstack server reboot --hard s1", "2.100", "a1", "guest restarts without the volume"}},
		{"running server, attachment gone, Nova 2024.1 -> reboot", running("2.96"), true, nil},
		{"running server, attachment gone, Nova 2.95 -> stop and repair", running("2.95"), false, []string{"openstack server stop s1"}},
		{"running server, attachment gone, Zed -> stop and repair", running("2.93"), false, []string{"openstack server stop s1"}},
		{"running server, version unknown -> stop and repair", running(""), false, []string{"openstack server stop s1"}},
		{"running server, attachment not read by ID -> held unconfirmed, no reboot",
			(&world{}).withNova("2.100").server("s1", listsWith("v1", "a1", "/dev/vdb")).volume("v1", status("available", time.Hour)),
			false, nil},
		{"running server, mapping records no attachment -> stop and repair",
			(&world{}).withNova("2.100").server("s1", lists("v1")).volume("v1", status("available", time.Hour)),
			false, []string{"openstack server stop s1"}},
		{"stopped server -> tether's own repair, no reboot (it would start the server)",
			(&world{}).withNova("2.100").server("s1", stopped, listsWith("v1", "a1", "/dev/vdb")).volume("v1", status("available", time.Hour)).gone("a1"),
			false, []string{"volume attachment create"}},
		{"server with a task -> no reboot (Nova refuses one)",
			(&world{}).withNova("2.100").server("s1", task("rebooting"), listsWith("v1", "a1", "/dev/vdb")).volume("v1", status("available", time.Hour)).gone("a1"),
			false, nil},
		{"running server, volume gone, Nova 2025.1 -> reboot", (&world{}).withNova("2.100").server("s1", listsWith("v1", "a1", "/dev/vdb")).gone("v1", "a1"), true, nil},
		{"running server, volume gone, Zed -> today's remedy", (&world{}).withNova("2.93").server("s1", listsWith("v1", "a1", "/dev/vdb")).gone("v1", "a1"),
			false, []string{"openstack server delete s1"}},
		{"recorded attachment held for another server -> no reboot (Nova keeps the mapping)",
			(&world{}).withNova("2.100").server("s1", listsWith("v1", "a1", "/dev/vdb")).server("s2").volume("v1").attachment("a1", "v1", "s2", "attached"),
			false, []string{"do not detach through Nova"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := Run(&tc.w.s, seenLongAgo(tc.w), now)
			var remedy string
			for _, f := range fs {
				if f.Check == DanglingNovaAttachment && string(f.Object.UID) == "s1" {
					remedy = f.Action.Remedy
				}
			}
			if remedy == "" {
				t.Fatalf("no DanglingNovaAttachment finding for s1: %+v", fs)
			}
			if got := strings.HasPrefix(remedy, reboot); got != tc.reboot {
				t.Errorf("remedy starts with %q: %v, want %v; remedy: %s", reboot, got, tc.reboot, remedy)
			}
			for _, s := range tc.also {
				if !strings.Contains(remedy, s) {
					t.Errorf("remedy lacks %q: %s", s, remedy)
				}
			}
		})
	}
}
