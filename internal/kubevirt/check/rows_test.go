package check

import (
	"encoding/json"
	mrand "math/rand"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tether-dev/tether/internal/drift"
	"github.com/tether-dev/tether/internal/kubevirt/snapshot"
	"github.com/tether-dev/tether/internal/testing/fixture"
)

// Every row is complete, its page exists, and what the check finds agrees
// with the row: over generated worlds, each finding is about one of the
// row's subjects and proposes one of the row's actions (or none). A row
// that forgets an action or a subject fails here, not in the field.
func TestRowsAreCompleteAndTrue(t *testing.T) {
	rows := All()
	byName := map[string]Check{}
	for _, c := range rows {
		if why := c.Incomplete(); why != "" {
			t.Errorf("row %s: %s", c.Name, why)
		}
		if c.Run == nil || c.Reads == 0 {
			t.Errorf("row %s: no Run or no Reads", c.Name)
		}
		if len(c.Actions) > 0 && (c.Events.Applied == "" || c.Events.Failed == "") {
			t.Errorf("row %s proposes actions but names no Event reasons", c.Name)
		}
		if _, err := os.Stat(filepath.Join("..", "..", "..", c.Page)); err != nil {
			t.Errorf("row %s: page %s: %v", c.Name, c.Page, err)
		}
		byName[c.Name] = c
	}
	seen := map[string]bool{}
	r := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 3000; i++ {
		b := make([]byte, 64+r.IntN(512))
		for j := range b {
			b[j] = byte(r.UintN(256))
		}
		g := &gen{b: b}
		s, p, now := g.build()
		p.Checks = nil
		found := Run(s, p, now)
		// The storage worlds of the VolumeAttachment fuzz test too.
		items, vp := vaWorld(b[:2])
		found = append(found, Run(fixture.Snapshot(items...), vp, now)...)
		// The worlds of the tenant attach checks.
		found = append(found, Run(fixture.Snapshot(tenantAttachGen(b)...), DefaultPolicy(), now)...)
		for _, f := range found {
			c, ok := byName[f.Check]
			if !ok {
				t.Fatalf("finding of check %s, which has no row", f.Check)
			}
			seen[f.Check] = true
			if !slices.Contains(c.Subjects, f.Object.Kind) {
				t.Fatalf("%s found a %s, not among its row's subjects %v", f.Check, f.Object.Kind, c.Subjects)
			}
			if f.Action.Type != drift.None && !slices.Contains(c.Actions, f.Action.Type) {
				t.Fatalf("%s proposed %s, not among its row's actions %v", f.Check, f.Action.Type, c.Actions)
			}
		}
	}
	for _, name := range []string{OrphanHotplugVolume, DanglingVolumeReference, StaleVolumeAttachment, PhantomAttach, StuckPublish, AttachAlreadyPresent} {
		if !seen[name] {
			t.Errorf("the generated worlds never made a %s finding: the test does not reach it", name)
		}
	}
}

// The controller's checks are the rows that name a loop.
func TestInLoop(t *testing.T) {
	if got := InLoop(); !slices.Equal(got, []string{OrphanHotplugVolume, StaleVolumeAttachment, MultiAttachConflict, BlockedDeletion, PhantomAttach, StuckPublish, AttachAlreadyPresent,
		UnpersistedHotplug, TruncatedDiskSerial, TenantNodeDown, StuckHotplugPhase, SharedClaimConflict, InterruptedVolumeMigration}) {
		t.Fatalf("controller checks %v", got)
	}
	if got := InLoop(LoopFence); !slices.Equal(got, []string{TenantNodeDown}) {
		t.Fatalf("fence checks %v", got)
	}
	if got := InLoop(LoopStorage); !slices.Equal(got, []string{StaleVolumeAttachment, MultiAttachConflict, BlockedDeletion}) {
		t.Fatalf("storage checks %v", got)
	}
	if got := InLoop(LoopNamespace); !slices.Equal(got, []string{StuckHotplugPhase, SharedClaimConflict, InterruptedVolumeMigration}) {
		t.Fatalf("namespace checks %v", got)
	}
}

// The namespace loop's rows only report (no action, so the controller acts
// on none of their findings) and read nothing cluster-scoped; and they
// decide per namespace: over random worlds spread over namespaces (two
// report worlds with the same names in two namespaces among them), each
// finds from one namespace's objects and the KubeVirt CR exactly what it
// finds there in the whole world. The controller's namespace loop reads
// one namespace at a time.
func TestNamespaceLoop_rowsReportAndDecidePerNamespace(t *testing.T) {
	for _, c := range All() {
		if c.Loop != LoopNamespace {
			continue
		}
		if len(c.Actions) > 0 || c.Events != (Events{}) {
			t.Errorf("row %s runs in the namespace loop, which only reports, but proposes %v", c.Name, c.Actions)
		}
		if c.Reads.Has(snapshot.KindStorage) || c.Reads.Has(snapshot.KindCSIDrivers) {
			t.Errorf("row %s runs in the namespace loop but reads %s, which is cluster-scoped", c.Name, c.Reads)
		}
	}
	r := rand.New(rand.NewPCG(5, 8))
	worlds := 3000
	if testing.Short() {
		worlds = 500
	}
	found := map[string]int{}
	for i := 0; i < worlds; i++ {
		s, p := readsWorld(mrand.New(mrand.NewSource(int64(i))))
		b := make([]byte, 96)
		for j := range b {
			b[j] = byte(r.UintN(256))
		}
		rw, _, _ := (&gen{b: b}).reportWorld()
		w := s.Only(snapshot.AllKinds)
		w.VMs, w.VMIs, w.PVCs = append(w.VMs, moved(rw.VMs, "other")...), append(w.VMIs, moved(rw.VMIs, "other")...), append(w.PVCs, moved(rw.PVCs, "other")...)
		w.AttachmentPods = append(w.AttachmentPods, moved(rw.AttachmentPods, "other")...)
		w.Pods = append(w.Pods, moved(rw.AttachmentPods, "other")...)
		whole := snapshot.New(w)
		for _, name := range InLoop(LoopNamespace) {
			p.Checks = []string{name}
			all := Run(whole, p, now)
			byNS := map[string][]drift.Finding{}
			for _, f := range all {
				byNS[f.Namespace] = append(byNS[f.Namespace], f)
			}
			for _, ns := range namespacesOf(whole) {
				one := Run(snapshot.New(namespaceOnly(whole, ns)), p, now)
				a, _ := json.Marshal(byNS[ns])
				b, _ := json.Marshal(one)
				if len(one) == 0 && len(byNS[ns]) == 0 {
					continue
				}
				if string(a) != string(b) {
					t.Fatalf("world %d: %s finds otherwise in namespace %q alone:\nwhole: %s\nalone: %s", i, name, ns, a, b)
				}
				delete(byNS, ns)
				found[name] += len(one)
			}
			if len(byNS) > 0 {
				t.Fatalf("world %d: %s finds outside every namespace: %v", i, name, byNS)
			}
		}
	}
	for _, name := range InLoop(LoopNamespace) {
		if found[name] == 0 {
			t.Errorf("no world gave %s a finding", name)
		}
	}
	t.Logf("findings per check over %d worlds: %v", worlds, found)
}

// moved returns copies of objs in namespace ns.
func moved[T any, P interface {
	*T
	SetNamespace(string)
}](objs []T, ns string) []T {
	out := slices.Clone(objs)
	for i := range out {
		P(&out[i]).SetNamespace(ns)
	}
	return out
}

// namespacesOf lists the namespaces of s's namespaced objects.
func namespacesOf(s *snapshot.Snapshot) []string {
	var out []string
	add := func(ns string) {
		if !slices.Contains(out, ns) {
			out = append(out, ns)
		}
	}
	eachNamespace(s.VMs, add)
	eachNamespace(s.VMIs, add)
	eachNamespace(s.PVCs, add)
	eachNamespace(s.Pods, add)
	eachNamespace(s.AttachmentPods, add)
	eachNamespace(s.DataVolumes, add)
	return out
}

func eachNamespace[T any, P interface {
	*T
	GetNamespace() string
}](objs []T, fn func(string)) {
	for i := range objs {
		fn(P(&objs[i]).GetNamespace())
	}
}

// namespaceOnly is what the namespace loop reads of ns: its VMs, VMIs,
// pods, claims and DataVolumes, and the KubeVirt CR.
func namespaceOnly(s *snapshot.Snapshot, ns string) snapshot.Snapshot {
	return snapshot.Snapshot{
		FeatureGates:   s.FeatureGates,
		VMs:            inNamespace(s.VMs, ns),
		VMIs:           inNamespace(s.VMIs, ns),
		Pods:           inNamespace(s.Pods, ns),
		AttachmentPods: inNamespace(s.AttachmentPods, ns),
		PVCs:           inNamespace(s.PVCs, ns),
		DataVolumes:    inNamespace(s.DataVolumes, ns),
	}
}

func inNamespace[T any, P interface {
	*T
	GetNamespace() string
}](objs []T, ns string) []T {
	var out []T
	for i := range objs {
		if P(&objs[i]).GetNamespace() == ns {
			out = append(out, objs[i])
		}
	}
	return out
}

// Every setting of the checks concerns checks that exist, has a name and a
// flag of its own, says what a zero value means as the policy does, and is
// on the pages of its checks (its flag, or its configuration key).
func TestSettingsAreCompleteAndTrue(t *testing.T) {
	names, flags := map[string]bool{}, map[string]bool{}
	for _, st := range Settings() {
		if names[st.Name] || (st.Flag != "" && flags[st.Flag]) || st.Of == nil || len(st.Checks) == 0 {
			t.Errorf("setting %s: repeated name or flag, no policy field or no check", st.Name)
		}
		names[st.Name], flags[st.Flag] = true, st.Flag != ""
		if st.Flag != "" && st.Usage == "" {
			t.Errorf("setting %s: flag --%s has no usage", st.Name, st.Flag)
		}
		p := Policy{}.withDefaults()
		if got := *st.Of(&p); got != st.Default {
			t.Errorf("setting %s: a zero value means %s to the policy, the row says %s", st.Name, got, st.Default)
		}
		for _, name := range st.Checks {
			if _, err := Lookup(name); err != nil {
				t.Errorf("setting %s names check %s, which has no row", st.Name, name)
				continue
			}
			page, err := os.ReadFile("../../../docs/checks/" + name + ".md")
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(page), "--"+st.Flag) && !strings.Contains(string(page), st.Name) {
				t.Errorf("docs/checks/%s.md names neither --%s nor %s", name, st.Flag, st.Name)
			}
		}
	}
}
