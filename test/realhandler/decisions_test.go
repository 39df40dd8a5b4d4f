package realhandler

import (
	"strings"
	"testing"
	"time"

	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/tether-dev/tether/internal/kubevirt/virtapi"
	"github.com/tether-dev/tether/internal/testing/kvtest"
)

// A real orphan: a VMI-level hot-plug that no VM and no tenant wants
// (without a tenant configured, no safe action: nobody has said so).
// tether removes it through the VMI route, real virt-handler detaches it,
// and the guest itself says the disk went; the hot-plug the tenant wants
// (its VolumeAttachment names the claim) stays in the guest.
func TestReal_orphanRemoved_theGuestSeesItGo(t *testing.T) {
	w := newWorld(t)
	w.claims("orphan", "wanted")
	w.guest("g")
	for _, c := range []string{"orphan", "wanted"} {
		w.addVolume(virtapi.VMI, "g", c)
		w.WaitPhase("g", c, kubevirtv1.VolumeReady)
		w.waitConsole("g", time.Minute, `TETHER-DISK-ADDED name=sd\w+ serial=`+c+` `)
	}
	// Without a tenant's word a VMI-only hot-plug is legitimate as far as
	// anyone knows (the HotplugVolumes gate makes such hot-plugs): never
	// safe to remove.
	noSafeAction(t, kvtest.Audit(t, binDir, w.Env, []string{"-n", w.NS}), "for a VMI-only hot-plug no tenant speaks for")
	scope := kvtest.Tenant(t, w.Env, w.NS, "g", "orphan")
	kvtest.TenantWants(t, w.Env, w.NS, "g", "wanted")

	f := kvtest.Only(t, kvtest.Audit(t, binDir, w.Env, scope), "OrphanHotplugVolume", "orphan")
	if !f.Action.Safe || f.Action.Type != "VMIRemoveVolume" {
		t.Fatalf("want a safe VMIRemoveVolume for the orphan, got %+v", f)
	}
	r := tether(t, w.Env, append([]string{"fix", "--apply"}, scope...)...)
	if r.Code != 0 || !strings.Contains(r.Stdout, "Applied") {
		t.Fatalf("fix --apply: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	w.waitConsole("g", 2*time.Minute, `TETHER-DISK-REMOVED name=sd\w+ serial=orphan`)
	if removed(w.console("g"), "wanted") {
		t.Fatalf("the guest lost the disk its tenant wants:\n%s", w.console("g"))
	}
	if p := w.Phase("g", "wanted"); p != kubevirtv1.VolumeReady {
		t.Fatalf("the wanted hot-plug is %q, want Ready", p)
	}
}

// removed says whether the guest's console reports the disk of that serial
// removed.
func removed(console, serial string) bool {
	for _, l := range strings.Split(console, "\n") {
		if strings.HasPrefix(l, "TETHER-DISK-REMOVED") && strings.Contains(l, "serial="+serial) {
			return true
		}
	}
	return false
}
