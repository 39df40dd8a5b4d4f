// Package dot draws the world around each finding as a Graphviz graph:
// VM → VMI → volume → attachment pod → node, and claim → PV →
// VolumeAttachment → node (with the tenants' VolumeAttachments of the
// volume and the tenant nodes that are the VM, when tenants are
// configured); for a claim, the pods, VMs and VMIs that reference it; for
// a VM, the volume migration it records; for a tenant Node
// (TenantNodeDown), its Ready state and taint, the infra VM it is and that
// VM's VMI. Each finding is one cluster
// subgraph labelled with its id, check, message and what tether would do.
// The drift is drawn red and bold: the finding's subject, its volume and
// the edge between them, every edge to an object that is missing (a
// deleted claim, a gone node, a tenant that attaches nothing, a volume the
// VMI lacks), a reference to a subject claim, a tenant attach that fails
// and a VM spec that names another claim than a migration's source.
// Missing objects are dashed.
//
// The package only renders a snapshot and findings it is given: it never
// reads a cluster and never decides. Its output is stable: the same
// snapshot and findings give the same bytes.
package dot

import (
	"bufio"
	"cmp"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	storagev1 "k8s.io/api/storage/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/tether-dev/tether/internal/drift"
	"github.com/tether-dev/tether/internal/kubevirt/snapshot"
)

// Reads are the snapshot kinds the pictures show.
const Reads = snapshot.KindVMs | snapshot.KindVMIs | snapshot.KindAttachmentPods | snapshot.KindPVCs | snapshot.KindStorage

// Write writes one digraph of fs over s.
func Write(w io.Writer, s *snapshot.Snapshot, fs []drift.Finding) error {
	bw := bufio.NewWriter(w)
	fmt.Fprintln(bw, "digraph tether {")
	fmt.Fprintln(bw, "  rankdir=LR;")
	fmt.Fprintln(bw, `  node [shape=box, style="rounded", fontname="Helvetica", fontsize=10];`)
	fmt.Fprintln(bw, `  edge [fontname="Helvetica", fontsize=9];`)
	fs = slices.Clone(fs)
	slices.SortStableFunc(fs, func(a, b drift.Finding) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Check, b.Check), cmp.Compare(a.Object.Name, b.Object.Name),
			cmp.Compare(a.Volume, b.Volume), cmp.Compare(a.ID, b.ID))
	})
	in := &scene{s: s, ix: s.Index()}
	for i, f := range fs {
		g := &graph{prefix: fmt.Sprintf("f%d_", i), scene: in, f: f}
		g.build()
		g.write(bw, i)
	}
	fmt.Fprintln(bw, "}")
	return bw.Flush()
}

type node struct {
	id, label string
	subject   bool // the finding's object, or its volume
	missing   bool
}

type edge struct {
	from, to, label string
	drift           bool
}

// scene is the snapshot the pictures are drawn from, with the lookups
// the index does not serve, built on first use.
type scene struct {
	s  *snapshot.Snapshot
	ix *snapshot.Index
	// users are the VMs and VMIs that reference each claim.
	users map[snapshot.Key][]claimUser
}

// claimUser is a VM or VMI that references a claim in its spec (or, a VM,
// in a pending addvolume request).
type claimUser struct {
	kind, name, how string
}

// usersOf returns the VMs (not being deleted) and VMIs (not finished) of
// ns that reference claim, in snapshot order.
func (w *scene) usersOf(ns, claim string) []claimUser {
	if w.users == nil {
		w.users = map[snapshot.Key][]claimUser{}
		add := func(ns, claim string, u claimUser) {
			if claim != "" {
				w.users[snapshot.Key{Namespace: ns, Name: claim}] = append(w.users[snapshot.Key{Namespace: ns, Name: claim}], u)
			}
		}
		for i := range w.s.VMs {
			vm := &w.s.VMs[i]
			if vm.DeletionTimestamp != nil {
				continue
			}
			if t := vm.Spec.Template; t != nil {
				for j := range t.Spec.Volumes {
					add(vm.Namespace, snapshot.ClaimName(&t.Spec.Volumes[j]), claimUser{"VirtualMachine", vm.Name, "volume " + t.Spec.Volumes[j].Name})
				}
			}
			for _, r := range vm.Status.VolumeRequests {
				if o := r.AddVolumeOptions; o != nil {
					add(vm.Namespace, snapshot.HotplugSourceClaim(o.VolumeSource), claimUser{"VirtualMachine", vm.Name, "addvolume request " + o.Name})
				}
			}
		}
		for i := range w.s.VMIs {
			vmi := &w.s.VMIs[i]
			if vmi.IsFinal() {
				continue
			}
			for j := range vmi.Spec.Volumes {
				add(vmi.Namespace, snapshot.ClaimName(&vmi.Spec.Volumes[j]), claimUser{"VirtualMachineInstance", vmi.Name, "volume " + vmi.Spec.Volumes[j].Name})
			}
		}
	}
	return w.users[snapshot.Key{Namespace: ns, Name: claim}]
}

// graph is the world around one finding.
type graph struct {
	prefix string
	*scene
	f     drift.Finding
	nodes []*node
	byID  map[string]*node
	edges []edge
	seen  map[[2]string]bool
}

// id is the node id of kind/ns/name.
func (g *graph) id(kind, ns, name string) string {
	return g.prefix + strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			return r
		}
		return '_'
	}, kind+"_"+ns+"_"+name)
}

// add returns the node of kind/ns/name, adding it once.
func (g *graph) add(kind, ns, name string, missing bool) string {
	id := g.id(kind, ns, name)
	if g.byID == nil {
		g.byID = map[string]*node{}
	}
	if n, ok := g.byID[id]; ok {
		return n.id
	}
	label := kind + "\n" + name
	if strings.HasPrefix(ns, "tenant ") && !strings.Contains(name, ns) {
		label += "\n(" + ns + ")"
	}
	if missing {
		label += "\n(missing)"
	}
	n := &node{id: id, label: label, missing: missing,
		subject: kind == g.f.Object.Kind && name == g.f.Object.Name && g.subjectNamespace(ns) ||
			kind == "Volume" && name == g.f.Volume && ns == g.f.Namespace}
	g.nodes = append(g.nodes, n)
	g.byID[id] = n
	return id
}

// subjectNamespace reports whether an object of namespace ns may be the
// finding's subject: one of the finding's namespace, a cluster-scoped one,
// or one of its tenant's when the subject lives in a tenant.
func (g *graph) subjectNamespace(ns string) bool {
	if g.f.Cluster != "" {
		return ns == "tenant "+g.f.Cluster
	}
	return ns == g.f.Namespace || ns == ""
}

func (g *graph) link(from, to, label string) { g.linkAs(from, to, label, false) }

// linkAs adds an edge once; drift draws it as drift whatever its ends.
func (g *graph) linkAs(from, to, label string, drift bool) {
	if g.seen == nil {
		g.seen = map[[2]string]bool{}
	}
	if g.seen[[2]string{from, to}] {
		return
	}
	g.seen[[2]string{from, to}] = true
	// The drift: the subject's edge to its volume, and any edge to an
	// object that is not there.
	drift = drift || g.byID[from].subject && g.byID[to].subject || g.byID[to].missing
	g.edges = append(g.edges, edge{from: from, to: to, label: label, drift: drift})
}

// note adds a line to a node's label, once.
func (g *graph) note(id, line string) {
	if n := g.byID[id]; n != nil && !strings.Contains(n.label, "\n"+line) {
		n.label += "\n" + line
	}
}

func (g *graph) build() {
	f, ns := g.f, g.f.Namespace
	switch f.Object.Kind {
	case "VirtualMachineInstance":
		g.vmi(ns, f.Object.Name, f.Volume)
	case "VirtualMachine":
		obj := g.ix.VM(ns, f.Object.Name)
		vm := g.add("VirtualMachine", ns, f.Object.Name, obj == nil)
		if vmi := g.ix.VMI(ns, f.Object.Name); vmi != nil {
			g.link(vm, g.vmi(ns, vmi.Name, f.Volume), "runs")
		} else if f.Volume != "" {
			g.link(vm, g.volume(ns, f.Volume, nil, obj), "volume")
		}
		g.migration(vm, obj)
	case "Pod":
		g.pod(ns, f.Object.Name)
	case "PersistentVolumeClaim", "DataVolume":
		id := g.claim(ns, f.Object.Name)
		// Who still holds it (BlockedDeletion's users).
		for _, p := range g.ix.PodsUsingClaim(ns, f.Object.Name) {
			g.link(g.add("Pod", ns, p.Name, false), id, "uses")
		}
		// The VMs and VMIs that reference it: what holds it, or what waits
		// for it (SharedClaimConflict's users, each reference drawn as
		// the drift).
		for _, u := range g.usersOf(ns, f.Object.Name) {
			from := g.add(u.kind, ns, u.name, false)
			if u.kind == "VirtualMachineInstance" {
				from = g.vmi(ns, u.name, "")
			}
			g.linkAs(from, id, u.how, true)
		}
	case "Node":
		if f.Cluster == "" {
			g.add(f.Object.Kind, ns, f.Object.Name, false)
			break
		}
		g.tenantNode(f.Cluster, f.Object.Name)
	case "PersistentVolume", "VolumeAttachment":
		g.pv(f.Volume)
		// Its own node, when no PV names it (an inline volume).
		g.add(f.Object.Kind, "", f.Object.Name, false)
	default:
		g.add(f.Object.Kind, ns, f.Object.Name, false)
	}
}

// vmi adds the VMI with its VM and the volume's chain; it returns its node.
func (g *graph) vmi(ns, name, volume string) string {
	v := g.ix.VMI(ns, name)
	id := g.add("VirtualMachineInstance", ns, name, v == nil)
	vm := g.ix.VM(ns, name)
	if vm != nil {
		g.link(g.add("VirtualMachine", ns, name, false), id, "runs")
	}
	if v == nil {
		return id
	}
	if v.Status.NodeName != "" {
		g.link(id, g.add("Node", "", v.Status.NodeName, g.ix.Node(v.Status.NodeName) == nil), "runs on")
	}
	if volume != "" {
		g.link(id, g.volume(ns, volume, v, vm), volumeState(v, volume))
	}
	// The tenant nodes drawn so far that are this VM.
	for _, t := range g.ix.TenantsFor(ns) {
		for _, n := range t.NodesFor(snapshot.InfraVM{Namespace: ns, Name: name}) {
			if tn := g.id("Node", "tenant "+t.Name, n.Name); g.byID[tn] != nil {
				g.link(tn, id, "is this VM ("+n.How+")")
			}
		}
	}
	return id
}

// noSuchVolume is volumeState of a volume the VMI lists nowhere.
const noSuchVolume = "no such volume"

// volumeState says what the VMI's status shows of a volume: the label of
// the VMI's edge to it.
func volumeState(vmi *snapshot.VMI, name string) string {
	for i := range vmi.Status.VolumeStatus {
		vs := &vmi.Status.VolumeStatus[i]
		if vs.Name != name {
			continue
		}
		label := "volume"
		if vs.HotplugVolume != nil {
			label = "hot-plug"
		}
		if vs.Phase != "" {
			label += ", " + string(vs.Phase)
		}
		if snapshot.VMIVolume(vmi, name) == nil {
			label += ", not in the VMI spec"
		}
		return label
	}
	if snapshot.VMIVolume(vmi, name) != nil {
		return "volume, no status"
	}
	return noSuchVolume
}

// volume adds a volume of a VMI (or VM) with its attachment pod and claim;
// a VMI's volume that neither its spec nor its status lists is missing.
func (g *graph) volume(ns, name string, vmi *snapshot.VMI, vm *snapshot.VM) string {
	id := g.add("Volume", ns, name, vmi != nil && volumeState(vmi, name) == noSuchVolume)
	var claim string
	if vmi != nil {
		if v := snapshot.VMIVolume(vmi, name); v != nil {
			claim = snapshot.ClaimName(v)
		}
		for i := range vmi.Status.VolumeStatus {
			vs := &vmi.Status.VolumeStatus[i]
			if vs.Name != name || vs.HotplugVolume == nil || vs.HotplugVolume.AttachPodName == "" {
				continue
			}
			g.link(id, g.pod(ns, vs.HotplugVolume.AttachPodName), "attached by")
			if claim == "" && vs.PersistentVolumeClaimInfo != nil {
				claim = vs.PersistentVolumeClaimInfo.ClaimName
			}
		}
	}
	if claim == "" && vm != nil {
		if v := snapshot.VMVolume(vm, name); v != nil {
			claim = snapshot.ClaimName(v)
		}
	}
	switch {
	case claim != "":
		g.link(id, g.claim(ns, claim), "claim")
	case g.ix.PVC(ns, name) != nil || g.ix.DataVolume(ns, name) != nil:
		// Nothing names its claim: the claim of its name (the KubeVirt CSI
		// driver hot-plugs a claim under the claim's own name).
		g.link(id, g.claim(ns, name), "claim of its name")
	default:
		g.tenantAttachments(ns, name, id)
	}
	return id
}

// migration adds the volume migration a VM records: each migrated
// volume's source claim (the consistent data) and destination claim, and
// the claim the VM spec names where that is not the source (the drift a
// recovery undoes).
func (g *graph) migration(id string, vm *snapshot.VM) {
	if vm == nil || vm.Status.VolumeUpdateState == nil || vm.Status.VolumeUpdateState.VolumeMigrationState == nil {
		return
	}
	ns := vm.Namespace
	claimOf := func(info *kubevirtv1.PersistentVolumeClaimInfo) string {
		if info == nil {
			return ""
		}
		return info.ClaimName
	}
	for _, mv := range vm.Status.VolumeUpdateState.VolumeMigrationState.MigratedVolumes {
		vol := g.add("Volume", ns, mv.VolumeName, false)
		g.link(id, vol, "migrated volume")
		spec, src := snapshot.ClaimName(snapshot.VMVolume(vm, mv.VolumeName)), claimOf(mv.SourcePVCInfo)
		var claims []string
		labels := map[string][]string{}
		for _, c := range [][2]string{
			{src, "source: the consistent data"},
			{claimOf(mv.DestinationPVCInfo), "destination: may be partly copied"},
			{spec, "the VM spec names it"},
		} {
			if c[0] != "" {
				if labels[c[0]] == nil {
					claims = append(claims, c[0])
				}
				labels[c[0]] = append(labels[c[0]], c[1])
			}
		}
		for _, c := range claims {
			g.linkAs(vol, g.claim(ns, c), strings.Join(labels[c], "; "), c == spec && c != src)
		}
	}
}

// pod adds a pod with its node; one being deleted says since when.
func (g *graph) pod(ns, name string) string {
	p := g.ix.AttachmentPod(ns, name)
	id := g.add("Pod", ns, name, p == nil)
	if p != nil && p.DeletionTimestamp != nil {
		g.note(id, "terminating since "+p.DeletionTimestamp.UTC().Format(time.RFC3339))
	}
	if p != nil && p.Spec.NodeName != "" {
		g.link(id, g.add("Node", "", p.Spec.NodeName, g.ix.Node(p.Spec.NodeName) == nil), "on")
	}
	return id
}

// claim adds a claim with its PV, the PV's attachments and the tenants'.
func (g *graph) claim(ns, name string) string {
	c := g.ix.PVC(ns, name)
	id := g.add("PersistentVolumeClaim", ns, name, c == nil)
	if c != nil && c.Spec.VolumeName != "" {
		g.link(id, g.pv(c.Spec.VolumeName), "bound to")
	}
	g.tenantAttachments(ns, name, id)
	return id
}

// tenantAttachments adds what each tenant of ns says of volume handle
// (the claim's name, for the KubeVirt CSI driver), linked to the node id:
// its VolumeAttachments with their state and node, or that it attaches
// nothing, or that it is unreachable. An attach that fails is drift.
func (g *graph) tenantAttachments(ns, handle, id string) {
	for _, t := range g.ix.TenantsFor(ns) {
		switch as := t.Attachments(handle); {
		case !t.Reachable:
			g.link(id, g.add("Tenant cluster (unreachable)", "", t.Name, false), "tenant unknown")
		case len(as) == 0:
			// The evidence of an orphan: the tenant attaches nothing of it.
			g.link(id, g.add("VolumeAttachment", "tenant "+t.Name, "of tenant "+t.Name, true), "no tenant wants")
		default:
			for _, a := range as {
				va := g.add("VolumeAttachment", "tenant "+t.Name, a.Name, false)
				switch {
				case a.Attached:
					g.note(va, "attached")
					g.link(va, id, "tenant wants")
				case a.AttachError != "":
					g.note(va, "attach fails: "+clip(a.AttachError, 60))
					g.linkAs(va, id, "tenant wants; its attach fails", true)
				default:
					g.note(va, "not attached yet")
					g.link(va, id, "tenant wants")
				}
				if a.Node != "" {
					g.link(va, g.add("Node", "tenant "+t.Name, a.Node, false), "on")
				}
			}
		}
	}
}

// tenantNode adds a tenant's Node with its Ready state and out-of-service
// taint, the infra VM it resolves to and that VM's VMI: a VMI that is gone
// or final is drawn as the drift (the VM is down).
func (g *graph) tenantNode(tenant, name string) {
	var t *snapshot.Tenant
	var tn *snapshot.TenantNode
	for i := range g.s.Tenants {
		if g.s.Tenants[i].Name != tenant {
			continue
		}
		t = &g.s.Tenants[i]
		for j := range t.Nodes {
			if t.Nodes[j].Name == name {
				tn = &t.Nodes[j]
			}
		}
	}
	id := g.add("Node", "tenant "+tenant, name, tn == nil)
	if tn == nil {
		return
	}
	ready := "Ready=" + cmp.Or(string(tn.Ready), "(none)")
	if !tn.ReadySince.IsZero() {
		ready += " since " + tn.ReadySince.UTC().Format(time.RFC3339)
	}
	g.note(id, ready)
	switch {
	case tn.OutOfService && tn.FencedBy != "":
		g.note(id, "out-of-service taint (tether's)")
	case tn.OutOfService:
		g.note(id, "out-of-service taint")
	}
	switch {
	case tn.Unschedulable && tn.CordonedBy != "":
		g.note(id, "cordoned (tether's, lifting its fence)")
	case tn.Unschedulable:
		g.note(id, "cordoned")
	}
	if r := tn.Release; r != nil && !r.Empty() {
		g.note(id, fmt.Sprintf("still releasing: %d attachment(s) being deleted, %d pod(s) terminating", len(r.Attachments), len(r.Pods)))
	}
	m := snapshot.ResolveTenantNode(tn, t.Namespace, t.MatchNodesByName)
	if m.Unknown != "" {
		g.note(id, "infra VM unknown: "+clip(m.Unknown, 60))
		return
	}
	vmObj := g.ix.VM(m.VM.Namespace, m.VM.Name)
	vm := g.add("VirtualMachine", m.VM.Namespace, m.VM.Name, vmObj == nil)
	g.link(id, vm, "is ("+m.How+")")
	vmi := g.ix.VMI(m.VM.Namespace, m.VM.Name)
	vi := g.add("VirtualMachineInstance", m.VM.Namespace, m.VM.Name, vmi == nil)
	if vmi != nil {
		g.note(vi, "phase "+cmp.Or(string(vmi.Status.Phase), "(none)"))
	}
	if vmObj == nil {
		vm = id // no VM: the VMI hangs off the node
	}
	g.linkAs(vm, vi, "runs", vmi == nil || vmi.IsFinal())
}

// clip cuts s to at most n runes.
func clip(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

// pv adds a PV with its VolumeAttachments.
func (g *graph) pv(name string) string {
	if name == "" {
		return ""
	}
	p := g.ix.PV(name)
	id := g.add("PersistentVolume", "", name, p == nil)
	for _, va := range g.ix.VolumeAttachmentsOf(name) {
		g.link(id, g.va(va), "attached via")
	}
	return id
}

// va adds a VolumeAttachment with its node.
func (g *graph) va(va *storagev1.VolumeAttachment) string {
	id := g.add("VolumeAttachment", "", va.Name, false)
	if n := va.Spec.NodeName; n != "" {
		g.link(id, g.add("Node", "", n, g.ix.Node(n) == nil), "to node")
	}
	return id
}

func (g *graph) write(w io.Writer, i int) {
	f := g.f
	fmt.Fprintf(w, "  subgraph cluster_%d {\n", i)
	fmt.Fprintf(w, "    label=%s;\n", quote(fmt.Sprintf("%s %s (%s): %s\n%s", f.ID, f.Check, f.Severity, status(f.Action), f.Message)))
	fmt.Fprintln(w, `    style="rounded"; color="gray60"; fontname="Helvetica"; fontsize=10;`)
	for _, n := range g.nodes {
		attrs := []string{"label=" + quote(n.label)}
		switch {
		case n.subject:
			attrs = append(attrs, `color="red"`, `fontcolor="red"`, "penwidth=2.5")
		case n.missing:
			attrs = append(attrs, `style="rounded,dashed"`, `color="gray50"`)
		}
		fmt.Fprintf(w, "    %s [%s];\n", n.id, strings.Join(attrs, ", "))
	}
	for _, e := range g.edges {
		attrs := []string{"label=" + quote(e.label)}
		if e.drift {
			attrs = append(attrs, `color="red"`, "penwidth=2.5")
		}
		fmt.Fprintf(w, "    %s -> %s [%s];\n", e.from, e.to, strings.Join(attrs, ", "))
	}
	fmt.Fprintln(w, "  }")
}

// status is what tether would do about a finding, in the words of the
// audit's STATUS column.
func status(a drift.Action) string {
	switch {
	case a.Safe:
		return "safe to " + string(a.Type)
	case a.BlockedBy != "":
		return "blocked: " + string(a.BlockedBy)
	default:
		return "report only"
	}
}

// quote is s as a DOT string: backslash and quote escaped, newlines as
// centred line breaks.
func quote(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`, "\r", "")
	return `"` + r.Replace(s) + `"`
}
