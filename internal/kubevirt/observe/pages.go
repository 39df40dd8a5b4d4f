package observe

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/tether-dev/tether/internal/kubevirt/snapshot"
)

// PageReader reads the LIST pages of VMIs and VMs as bytes and decodes
// only what decisions read of them (see vmiWire and vmWire): a VMI's
// domain but its shareable disks, its networks and the rest of its spec
// are skipped, not decoded and then dropped. They are the largest objects tether reads, and the client's
// own decoder scans each page three times (for its kind, for the objects,
// and again for each VMI spec, which KubeVirt decodes a second time).
//
// The one-shot commands read with it; the controller reads its caches.
type PageReader struct {
	hc   *http.Client
	host string
	// CBOR asks for the pages in CBOR, and takes JSON from a server that
	// does not offer it (see pagescbor.go). Opt-in: CBOR serving is alpha.
	CBOR bool
}

// NewPageReader returns a PageReader for cfg.
func NewPageReader(cfg *rest.Config) (*PageReader, error) {
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, err
	}
	// The server's URL as client-go makes it: a host without a scheme
	// gets one, and a path (an API proxy's prefix) is kept.
	base, _, err := rest.DefaultServerUrlFor(cfg)
	if err != nil {
		return nil, err
	}
	return &PageReader{hc: hc, host: strings.TrimSuffix(base.String(), "/")}, nil
}

var bufs = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// page GETs one LIST page of group/version/resource and returns its body;
// the caller puts the buffer back in bufs. answered, when set, is called
// once the server has answered the request with success, before the body
// is read: the server has then taken the list's resourceVersion. An error answer is returned as
// the API error it is (apierrors.IsForbidden works on it), and a resource
// the server does not serve as a NoKindMatchError.
func (p *PageReader) page(ctx context.Context, gvr schema.GroupVersionResource, kind, ns string, limit int64, cont string, answered func()) (*bytes.Buffer, error) {
	path := "/apis/" + gvr.Group + "/" + gvr.Version
	if ns != "" {
		path += "/namespaces/" + url.PathEscape(ns)
	}
	q := url.Values{}
	if limit > 0 {
		q.Set("limit", strconv.FormatInt(limit, 10))
	}
	if cont != "" {
		q.Set("continue", cont)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.host+path+"/"+gvr.Resource+"?"+q.Encode(), nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", mediaJSON)
	if p.CBOR {
		req.Header.Set("Accept", acceptCBOR)
	}
	resp, err := doPolitely(ctx, p.hc, req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusOK && answered != nil {
		answered()
	}
	buf := bufs.Get().(*bytes.Buffer)
	buf.Reset()
	if _, err := io.Copy(buf, resp.Body); err != nil {
		bufs.Put(buf)
		return nil, err
	}
	cbor := strings.HasPrefix(resp.Header.Get("Content-Type"), mediaCBOR)
	if cbor != isCBOR(buf.Bytes()) && buf.Len() > 0 {
		bufs.Put(buf)
		return nil, fmt.Errorf("listing %s: an answer of type %q whose body is not", gvr.Resource, resp.Header.Get("Content-Type"))
	}
	if resp.StatusCode == http.StatusOK {
		return buf, nil
	}
	defer bufs.Put(buf)
	var st metav1.Status
	if decodeBody(buf.Bytes(), &st) != nil || st.Kind != "Status" {
		st = metav1.Status{Status: metav1.StatusFailure, Code: int32(resp.StatusCode), Message: fmt.Sprintf("%s: %s", resp.Status, bytes.TrimSpace(buf.Bytes()))}
	}
	if resp.StatusCode == http.StatusNotFound && st.Details == nil {
		// The whole resource is not served (no Status about an object).
		return nil, &meta.NoKindMatchError{GroupKind: schema.GroupKind{Group: gvr.Group, Kind: kind}, SearchedVersions: []string{gvr.Version}}
	}
	return nil, &apierrors.StatusError{ErrStatus: st}
}

// maxPoliteRetries is how often a request is sent again when the server
// asks to be asked later: client-go's number, so that the pages read here
// wait as every other request of tether does.
const maxPoliteRetries = 10

// doPolitely sends the GET req and, while the server answers that it is
// too busy and says when to ask again (429, or a 5xx, with Retry-After:
// the API server's priority and fairness, or a server that is starting),
// waits that long and sends it again, up to maxPoliteRetries times (what
// client-go does for every other request). The last answer is returned.
func doPolitely(ctx context.Context, hc *http.Client, req *http.Request) (*http.Response, error) {
	for attempt := 0; ; attempt++ {
		resp, err := hc.Do(req)
		if err != nil {
			return nil, err
		}
		wait, asked := retryAfter(resp)
		if !asked || attempt == maxPoliteRetries {
			return resp, nil
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-t.C:
		}
	}
}

// retryAfter is how long the server asks the client to wait before it
// asks again, and whether it asks: a 429 or 5xx answer with a Retry-After
// of whole seconds (the form the API server sends; client-go reads no
// other).
func retryAfter(resp *http.Response) (time.Duration, bool) {
	if resp.StatusCode != http.StatusTooManyRequests && resp.StatusCode < http.StatusInternalServerError {
		return 0, false
	}
	n, err := strconv.Atoi(strings.TrimSpace(resp.Header.Get("Retry-After")))
	if err != nil || n < 0 {
		return 0, false
	}
	return time.Duration(n) * time.Second, true
}

// leanDecoding: the server's JSON, names matched exactly as the API
// machinery's decoder matches them, unknown names skipped.
var leanDecoding = jsonv2.JoinOptions(jsonv2.MatchCaseInsensitiveNames(false), jsonv2.RejectUnknownMembers(false),
	jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))

// The wire forms below decode of a VMI and a VM what snapshot.Lean keeps
// of them, or a little more, and nothing that Lean drops in bulk: the
// managedFields and annotations, of a VMI's spec or a VM's template all
// but the volumes and the shareable disks, the rest of a VMI's status.
// What is not decoded is scanned over, and never becomes garbage.

// wireMeta is what Lean keeps of an object's metadata (leanMeta): of a VMI
// or VM, no annotation.
type wireMeta struct {
	Name                       string                  `json:"name,omitempty"`
	GenerateName               string                  `json:"generateName,omitempty"`
	Namespace                  string                  `json:"namespace,omitempty"`
	UID                        types.UID               `json:"uid,omitempty"`
	ResourceVersion            string                  `json:"resourceVersion,omitempty"`
	Generation                 int64                   `json:"generation,omitempty"`
	CreationTimestamp          metav1.Time             `json:"creationTimestamp,omitempty"`
	DeletionTimestamp          *metav1.Time            `json:"deletionTimestamp,omitempty"`
	DeletionGracePeriodSeconds *int64                  `json:"deletionGracePeriodSeconds,omitempty"`
	Labels                     map[string]string       `json:"labels,omitempty"`
	OwnerReferences            []metav1.OwnerReference `json:"ownerReferences,omitempty"`
	Finalizers                 []string                `json:"finalizers,omitempty"`
}

func (m *wireMeta) object() metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: m.Name, GenerateName: m.GenerateName, Namespace: m.Namespace, UID: m.UID,
		ResourceVersion: m.ResourceVersion, Generation: m.Generation, CreationTimestamp: m.CreationTimestamp,
		DeletionTimestamp: m.DeletionTimestamp, DeletionGracePeriodSeconds: m.DeletionGracePeriodSeconds,
		Labels: m.Labels, OwnerReferences: m.OwnerReferences, Finalizers: m.Finalizers}
}

// vmiWire is what is decoded of a VMI: its metadata as wireMeta, its spec
// as specWire, of its status what Lean keeps (leanVMI).
type vmiWire struct {
	metav1.TypeMeta `json:",inline"`
	Meta            wireMeta `json:"metadata"`
	Spec            specWire `json:"spec"`
	Status          struct {
		NodeName     string                                           `json:"nodeName,omitempty"`
		Phase        kubevirtv1.VirtualMachineInstancePhase           `json:"phase,omitempty"`
		ActivePods   map[types.UID]string                             `json:"activePods,omitempty"`
		VolumeStatus []volumeStatusWire                               `json:"volumeStatus,omitempty"`
		Migration    *kubevirtv1.VirtualMachineInstanceMigrationState `json:"migrationState,omitempty"`
		Conditions   []kubevirtv1.VirtualMachineInstanceCondition     `json:"conditions,omitempty"`
	} `json:"status"`
}

// specWire is what Lean keeps of a VMI spec or a VM template's: the
// volumes, and the disks marked shareable (leanDisks).
type specWire struct {
	Volumes []kubevirtv1.Volume `json:"volumes,omitempty"`
	// EvictionStrategy is a VMI's (a VM template's is dropped, as Lean
	// drops it).
	EvictionStrategy *kubevirtv1.EvictionStrategy `json:"evictionStrategy,omitempty"`
	Domain           struct {
		Devices struct {
			Disks shareableDisks `json:"disks,omitempty"`
		} `json:"devices"`
	} `json:"domain"`
}

func (w *specWire) object() kubevirtv1.VirtualMachineInstanceSpec {
	spec := kubevirtv1.VirtualMachineInstanceSpec{Volumes: w.Volumes}
	spec.Domain.Devices.Disks = w.Domain.Devices.Disks
	return spec
}

// shareableDisks decodes a domain's disks, keeping the name and flag of
// those marked shareable: most disks are not, and their names would be
// garbage at once. A disk whose JSON does not say "shareable" (and has no
// escape that could spell it) is skipped without decoding.
type shareableDisks []kubevirtv1.Disk

func (d *shareableDisks) UnmarshalJSONFrom(dec *jsontext.Decoder) error {
	*d = nil
	if dec.PeekKind() == 'n' {
		_, err := dec.ReadToken()
		return err
	}
	if _, err := dec.ReadToken(); err != nil { // [
		return err
	}
	for dec.PeekKind() != ']' {
		raw, err := dec.ReadValue()
		if err != nil {
			return err
		}
		if raw.Kind() == '{' && !bytes.Contains(raw, []byte("shareable")) && !bytes.Contains(raw, []byte("serial")) && bytes.IndexByte(raw, '\\') < 0 {
			continue
		}
		var disk leanDisk
		if err := jsonv2.Unmarshal(raw, &disk, leanDecoding); err != nil {
			return err
		}
		d.keep(&disk)
	}
	_, err := dec.ReadToken() // ]
	return err
}

// leanDisk is what is decoded of a disk.
type leanDisk struct {
	Name      string `json:"name"`
	Shareable *bool  `json:"shareable,omitempty"`
	Serial    string `json:"serial,omitempty"`
	Disk      *struct {
		Bus kubevirtv1.DiskBus `json:"bus,omitempty"`
	} `json:"disk,omitempty"`
}

// keep adds disk to d, as KeptDisk keeps it, if it is marked shareable or
// its serial is one a virtio guest truncates.
func (d *shareableDisks) keep(disk *leanDisk) {
	full := kubevirtv1.Disk{Name: disk.Name, Shareable: disk.Shareable, Serial: disk.Serial}
	if disk.Disk != nil {
		full.Disk = &kubevirtv1.DiskTarget{Bus: disk.Disk.Bus}
	}
	if full.Shareable != nil || snapshot.LongVirtioSerial(&full) {
		*d = append(*d, snapshot.KeptDisk(&full))
	}
}

// volumeStatusWire is what Lean keeps of a VMI's volume status.
type volumeStatusWire struct {
	Name          string                          `json:"name"`
	Phase         kubevirtv1.VolumePhase          `json:"phase,omitempty"`
	HotplugVolume *kubevirtv1.HotplugVolumeStatus `json:"hotplugVolume,omitempty"`
	Claim         *struct {
		Name string `json:"claimName,omitempty"`
	} `json:"persistentVolumeClaimInfo,omitempty"`
}

// object is what the checks read of w (snapshot.VMIOf of its typed form).
func (w *vmiWire) object() snapshot.VMI {
	vmi := w.typed()
	return snapshot.VMIOf(&vmi)
}

func (w *vmiWire) typed() kubevirtv1.VirtualMachineInstance {
	st := &w.Status
	vmi := kubevirtv1.VirtualMachineInstance{TypeMeta: w.TypeMeta, ObjectMeta: w.Meta.object(),
		Spec: w.Spec.object(),
		Status: kubevirtv1.VirtualMachineInstanceStatus{NodeName: st.NodeName, Phase: st.Phase, ActivePods: st.ActivePods,
			MigrationState: st.Migration, Conditions: snapshot.LiveMigratableOnly(st.Conditions)}}
	vmi.Spec.EvictionStrategy = w.Spec.EvictionStrategy
	if st.VolumeStatus != nil {
		vmi.Status.VolumeStatus = make([]kubevirtv1.VolumeStatus, len(st.VolumeStatus))
		for i := range st.VolumeStatus {
			in := &st.VolumeStatus[i]
			out := &vmi.Status.VolumeStatus[i]
			*out = kubevirtv1.VolumeStatus{Name: in.Name, Phase: in.Phase, HotplugVolume: in.HotplugVolume}
			if in.Claim != nil {
				out.PersistentVolumeClaimInfo = &kubevirtv1.PersistentVolumeClaimInfo{ClaimName: in.Claim.Name}
			}
		}
	}
	return vmi
}

// vmWire is what is decoded of a VM: its metadata as wireMeta, all of its
// spec but its template, of which the labels and specWire, and its
// dataVolumeTemplates, of which their names; all of its status.
type vmWire struct {
	metav1.TypeMeta `json:",inline"`
	Meta            wireMeta `json:"metadata"`
	Spec            struct {
		Running      *bool                                 `json:"running,omitempty"`
		RunStrategy  *kubevirtv1.VirtualMachineRunStrategy `json:"runStrategy,omitempty"`
		Instancetype *kubevirtv1.InstancetypeMatcher       `json:"instancetype,omitempty"`
		Preference   *kubevirtv1.PreferenceMatcher         `json:"preference,omitempty"`
		Template     *struct {
			Meta struct {
				Labels map[string]string `json:"labels,omitempty"`
			} `json:"metadata"`
			Spec specWire `json:"spec"`
		} `json:"template"`
		DataVolumeTemplates []struct {
			Meta struct {
				Name      string `json:"name,omitempty"`
				Namespace string `json:"namespace,omitempty"`
			} `json:"metadata"`
		} `json:"dataVolumeTemplates,omitempty"`
		UpdateVolumesStrategy *kubevirtv1.UpdateVolumesStrategy `json:"updateVolumesStrategy,omitempty"`
	} `json:"spec"`
	Status kubevirtv1.VirtualMachineStatus `json:"status"`
}

// object is what the checks read of w (snapshot.VMOf of its typed form).
func (w *vmWire) object() snapshot.VM {
	vm := w.typed()
	return snapshot.VMOf(&vm)
}

func (w *vmWire) typed() kubevirtv1.VirtualMachine {
	in := &w.Spec
	vm := kubevirtv1.VirtualMachine{TypeMeta: w.TypeMeta, ObjectMeta: w.Meta.object(), Status: w.Status,
		Spec: kubevirtv1.VirtualMachineSpec{Running: in.Running, RunStrategy: in.RunStrategy, Instancetype: in.Instancetype,
			Preference: in.Preference, UpdateVolumesStrategy: in.UpdateVolumesStrategy}}
	if t := in.Template; t != nil {
		vm.Spec.Template = &kubevirtv1.VirtualMachineInstanceTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: t.Meta.Labels},
			Spec: t.Spec.object()}
	}
	if in.DataVolumeTemplates != nil {
		vm.Spec.DataVolumeTemplates = make([]kubevirtv1.DataVolumeTemplateSpec, len(in.DataVolumeTemplates))
		for i := range in.DataVolumeTemplates {
			m := &in.DataVolumeTemplates[i].Meta
			vm.Spec.DataVolumeTemplates[i].ObjectMeta = metav1.ObjectMeta{Name: m.Name, Namespace: m.Namespace}
		}
	}
	return vm
}

// wirePage is one decoded LIST page.
type wirePage[W any] struct {
	Metadata metav1.ListMeta `json:"metadata"`
	Items    []W             `json:"items"`
}

// decode decodes one LIST page into pg, whose items' array it reuses:
// they are zeroed first, so nothing of the page before survives in them
// (what was copied out of them stays where it was).
func (pg *wirePage[W]) decode(body []byte) error {
	clear(pg.Items)
	pg.Items, pg.Metadata = pg.Items[:0], metav1.ListMeta{}
	return decodeBody(body, pg)
}

// decodeBody decodes a body of JSON or CBOR (isCBOR) into v.
func decodeBody(body []byte, v any) error {
	if isCBOR(body) {
		return cborPages.Unmarshal(body, v)
	}
	return jsonv2.Unmarshal(body, v, leanDecoding)
}

// leanList reads every page of a VMI or VM list as pages says, decoding
// each page into the wire form W and converting its items with object
// (what the checks read of them, snapshot.VMIOf and VMOf); page is told the count after each page, and
// answered, when set, that the server answered the first page.
//
// The next page is asked for as soon as the body of one has arrived (its
// continue token read ahead, see continueOf), so that the server reads and
// encodes page n+1 while page n is decoded. One page at most is in
// flight ahead: two bodies are held at a time. Everything else is as if
// the pages were read one after the other: they are decoded and told in
// order, an error answering page n+1 is returned after page n has been
// decoded and told, and a page ahead that is not needed (the read failed
// or ended) is cancelled and waited for.
func leanList[W any, T any](ctx context.Context, p *PageReader, gvr schema.GroupVersionResource, kind, ns string, limit int64,
	object func(*W) T, answered func(), page func(n int)) ([]T, error) {
	var out []T
	var pg wirePage[W]
	if limit > 0 {
		pg.Items = make([]W, 0, limit)
	}
	var ahead *pageAhead
	defer func() { ahead.drop() }()
	buf, err := p.page(ctx, gvr, kind, ns, limit, "", answered)
	for {
		if err != nil {
			return nil, err
		}
		next := continueOf(buf.Bytes())
		if next != "" {
			ahead = p.fetchAhead(ctx, gvr, kind, ns, limit, next)
		}
		err = pg.decode(buf.Bytes())
		bufs.Put(buf)
		if err != nil {
			return nil, fmt.Errorf("decoding a page of %s: %w", gvr.Resource, err)
		}
		if out == nil {
			out = make([]T, 0, len(pg.Items)+int(remaining(pg.Metadata.RemainingItemCount)))
		}
		for i := range pg.Items {
			out = append(out, object(&pg.Items[i]))
		}
		page(len(out))
		cont := pg.Metadata.Continue
		if cont == "" {
			return out, nil
		}
		if cont == next {
			buf, err = ahead.wait()
		} else {
			// The token read ahead is not the page's (a body continueOf
			// cannot read): ask for the page the decoded token names.
			ahead.drop()
			buf, err = p.page(ctx, gvr, kind, ns, limit, cont, nil)
		}
		ahead = nil
	}
}

// pageAhead is one page being fetched ahead of its turn.
type pageAhead struct {
	cancel context.CancelFunc
	done   chan struct{}
	buf    *bytes.Buffer
	err    error
}

// fetchAhead starts fetching the page that cont names.
func (p *PageReader) fetchAhead(ctx context.Context, gvr schema.GroupVersionResource, kind, ns string, limit int64, cont string) *pageAhead {
	ctx, cancel := context.WithCancel(ctx)
	a := &pageAhead{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(a.done)
		a.buf, a.err = p.page(ctx, gvr, kind, ns, limit, cont, nil)
	}()
	return a
}

// wait returns the page once fetched, as page returns it.
func (a *pageAhead) wait() (*bytes.Buffer, error) {
	<-a.done
	a.cancel()
	return a.buf, a.err
}

// drop cancels the fetch, if any, waits for it to end and puts its body
// back.
func (a *pageAhead) drop() {
	if a == nil {
		return
	}
	a.cancel()
	<-a.done
	if a.buf != nil {
		bufs.Put(a.buf)
		a.buf = nil
	}
}

// continueOf reads metadata.continue of a LIST page without decoding its
// items (a CBOR page: cborContinue). Of a JSON page it does not even scan
// them: the server writes the metadata either last (a
// custom resource's list, its members in the order of their names) or
// before the items (a built-in kind's list), and either is found by
// looking at the members around it only. A page with its metadata between
// other members is scanned up to it. A body it cannot read gives "", and a
// body with two metadata members what one of them says: the page's own
// decode has the final word (leanList checks that the token agrees).
func continueOf(body []byte) string {
	if isCBOR(body) {
		return cborContinue(body)
	}
	var m struct {
		Continue string `json:"continue"`
	}
	meta, ok := lastMember(body, "metadata")
	if !ok {
		var escaped bool
		if meta, ok, escaped = firstMember(body, "metadata"); escaped {
			// A name written with escapes, which no server writes:
			// decode the page's metadata alone, skipping the rest.
			var pg struct {
				Metadata *struct {
					Continue string `json:"continue"`
				} `json:"metadata"`
			}
			pg.Metadata = &m
			_ = jsonv2.Unmarshal(body, &pg, leanDecoding)
			return m.Continue
		}
		if !ok {
			return ""
		}
	}
	if jsonv2.Unmarshal(meta, &m, leanDecoding) != nil {
		return ""
	}
	return m.Continue
}

// isSpace reports whether c is JSON whitespace.
func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// quoted reports whether the quote at b[i] is escaped (follows an odd
// number of backslashes).
func quoted(b []byte, i int) bool {
	n := 0
	for i--; i >= 0 && b[i] == '\\'; i-- {
		n++
	}
	return n%2 == 1
}

// lastMember returns the value of the last member of the top-level object
// in b when that member is name and its value an object.
func lastMember(b []byte, name string) ([]byte, bool) {
	j := len(b)
	// back moves j to the byte before it that is not a space and says
	// whether it is one of want.
	back := func(want string) bool {
		for j--; j >= 0 && isSpace(b[j]); j-- {
		}
		return j >= 0 && strings.IndexByte(want, b[j]) >= 0
	}
	if !back("}") || !back("}") {
		return nil, false
	}
	end := j + 1
	// Back to the '{' that opens the value: outside strings, brackets
	// count; a string is passed over from its closing quote to its opening
	// one.
	for depth := 0; ; j-- {
		if j < 0 {
			return nil, false
		}
		switch b[j] {
		case '}', ']':
			depth++
		case '{', '[':
			depth--
		case '"':
			j = openingQuote(b, j)
		}
		if depth == 0 {
			break
		}
	}
	start := j
	if !back(":") || !back(`"`) {
		return nil, false
	}
	keyEnd := j
	j = openingQuote(b, j)
	if j < 0 || string(b[j+1:keyEnd]) != name || !back(",{") {
		return nil, false
	}
	return b[start:end], true
}

// openingQuote returns the index of the quote that opens the string whose
// closing quote is b[j], or -1: inside a string every quote is escaped.
func openingQuote(b []byte, j int) int {
	for j--; j >= 0 && (b[j] != '"' || quoted(b, j)); j-- {
	}
	return j
}

// firstMember returns the value of the first member name of the top-level
// object in b, passing over the members before it; escaped, when it meets
// a name written with escapes before it (which it does not read).
func firstMember(b []byte, name string) (value []byte, ok, escaped bool) {
	i := 0
	skip := func() {
		for i < len(b) && isSpace(b[i]) {
			i++
		}
	}
	skip()
	if i == len(b) || b[i] != '{' {
		return nil, false, false
	}
	for i++; ; i++ {
		skip()
		if i == len(b) || b[i] != '"' {
			return nil, false, false
		}
		keyStart := i + 1
		if i = skipValue(b, i); i < 0 {
			return nil, false, false
		}
		key := b[keyStart : i-1]
		if bytes.IndexByte(key, '\\') >= 0 {
			return nil, false, true
		}
		skip()
		if i == len(b) || b[i] != ':' {
			return nil, false, false
		}
		i++
		skip()
		start := i
		if i = skipValue(b, i); i < 0 {
			return nil, false, false
		}
		if string(key) == name {
			return b[start:i], true, false
		}
		skip()
		if i == len(b) || b[i] != ',' {
			return nil, false, false
		}
	}
}

// skipValue returns the index just past the JSON value at b[i], or -1.
// It checks no more than it needs to find the value's end.
func skipValue(b []byte, i int) int {
	depth := 0
	for ; i < len(b); i++ {
		switch b[i] {
		case '"':
			for {
				k := bytes.IndexByte(b[i+1:], '"')
				if k < 0 {
					return -1
				}
				i += 1 + k
				if !quoted(b, i) {
					break
				}
			}
		case '{', '[':
			depth++
			continue
		case '}', ']':
			depth--
			if depth < 0 {
				return -1
			}
		case ',', ':':
			if depth == 0 {
				return -1
			}
			continue
		default:
			if depth > 0 || isSpace(b[i]) {
				continue
			}
			// A number, true, false or null.
			for i < len(b) && !isSpace(b[i]) && b[i] != ',' && b[i] != '}' && b[i] != ']' {
				i++
			}
			return i
		}
		if depth == 0 {
			return i + 1
		}
	}
	return -1
}

var (
	vmiResource = kubevirtv1.SchemeGroupVersion.WithResource("virtualmachineinstances")
	vmResource  = kubevirtv1.SchemeGroupVersion.WithResource("virtualmachines")
)

// Decoder decodes pages of VMIs and VMs that are not an API server's (a
// support bundle's, package bundle) exactly as PageReader decodes its
// pages: a body {"items":[...]} into one page of wire forms that it
// reuses, whose items are then converted one after the other. The memory
// such a reader leaves behind is then laid out as a live audit's.
type Decoder struct {
	vmis wirePage[vmiWire]
	vms  wirePage[vmWire]
}

// VMIs decodes a page of VMIs and hands each to each, in order; on an
// error none is handed over.
func (d *Decoder) VMIs(body []byte, each func(snapshot.VMI)) error {
	return decodeEach(&d.vmis, body, (*vmiWire).object, each)
}

// VMs decodes a page of VMs as VMIs a page of VMIs.
func (d *Decoder) VMs(body []byte, each func(snapshot.VM)) error {
	return decodeEach(&d.vms, body, (*vmWire).object, each)
}

func decodeEach[W any, T any](pg *wirePage[W], body []byte, object func(*W) T, each func(T)) error {
	if err := pg.decode(body); err != nil {
		return err
	}
	for i := range pg.Items {
		each(object(&pg.Items[i]))
	}
	return nil
}

// Pager reads the VMIs and VMs as the checks read them, a page at a time:
// PageReader from an API server, or whatever holds them so already (a
// support bundle, package bundle). answered, when set, is called once the
// source has taken the read; page is told the count read so far after each
// page.
type Pager interface {
	LeanVMIs(ctx context.Context, ns string, limit int64, answered func(), page func(int)) ([]snapshot.VMI, error)
	LeanVMs(ctx context.Context, ns string, limit int64, answered func(), page func(int)) ([]snapshot.VM, error)
}

var _ Pager = (*PageReader)(nil)

// LeanVMIs lists the VMIs of ns (all namespaces when "") with p.
func (p *PageReader) LeanVMIs(ctx context.Context, ns string, limit int64, answered func(), page func(int)) ([]snapshot.VMI, error) {
	return leanList(ctx, p, vmiResource, "VirtualMachineInstance", ns, limit, (*vmiWire).object, answered, page)
}

// LeanVMs lists the VMs of ns (all namespaces when "") with p.
func (p *PageReader) LeanVMs(ctx context.Context, ns string, limit int64, answered func(), page func(int)) ([]snapshot.VM, error) {
	return leanList(ctx, p, vmResource, "VirtualMachine", ns, limit, (*vmWire).object, answered, page)
}
