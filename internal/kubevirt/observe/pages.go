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

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/tether-dev/tether/internal/kubevirt/snapshot"
)

// PageReader reads the LIST pages of VMIs and VMs as bytes and decodes
// only what decisions read of them (see vmiWire and vmWire): a VMI's
// domain, networks and the rest of its spec are skipped, not decoded and
// then dropped. They are the largest objects tether reads, and the client's
// own decoder scans each page three times (for its kind, for the objects,
// and again for each VMI spec, which KubeVirt decodes a second time).
//
// The one-shot commands read with it; the controller reads its caches.
type PageReader struct {
	hc   *http.Client
	host string
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
// the caller puts the buffer back in bufs. An error answer is returned as
// the API error it is (apierrors.IsForbidden works on it), and a resource
// the server does not serve as a NoKindMatchError.
func (p *PageReader) page(ctx context.Context, gvr schema.GroupVersionResource, kind, ns string, limit int64, cont string) (*bytes.Buffer, error) {
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
	req.Header.Set("Accept", "application/json")
	resp, err := p.hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	buf := bufs.Get().(*bytes.Buffer)
	buf.Reset()
	if _, err := io.Copy(buf, resp.Body); err != nil {
		bufs.Put(buf)
		return nil, err
	}
	if resp.StatusCode == http.StatusOK {
		return buf, nil
	}
	defer bufs.Put(buf)
	var st metav1.Status
	if jsonv2.Unmarshal(buf.Bytes(), &st, leanDecoding) != nil || st.Kind != "Status" {
		st = metav1.Status{Status: metav1.StatusFailure, Code: int32(resp.StatusCode), Message: fmt.Sprintf("%s: %s", resp.Status, bytes.TrimSpace(buf.Bytes()))}
	}
	if resp.StatusCode == http.StatusNotFound && st.Details == nil {
		// The whole resource is not served (no Status about an object).
		return nil, &meta.NoKindMatchError{GroupKind: schema.GroupKind{Group: gvr.Group, Kind: kind}, SearchedVersions: []string{gvr.Version}}
	}
	return nil, &apierrors.StatusError{ErrStatus: st}
}

// leanDecoding: the server's JSON, names matched exactly as the API
// machinery's decoder matches them, unknown names skipped.
var leanDecoding = jsonv2.JoinOptions(jsonv2.MatchCaseInsensitiveNames(false), jsonv2.RejectUnknownMembers(false),
	jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))

// vmiWire is what is decoded of a VMI: all of it but the spec, of which
// only the volumes.
type vmiWire struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              struct {
		Volumes []kubevirtv1.Volume `json:"volumes,omitempty"`
	} `json:"spec"`
	Status kubevirtv1.VirtualMachineInstanceStatus `json:"status"`
}

func (w *vmiWire) object() kubevirtv1.VirtualMachineInstance {
	return kubevirtv1.VirtualMachineInstance{TypeMeta: w.TypeMeta, ObjectMeta: w.ObjectMeta,
		Spec: kubevirtv1.VirtualMachineInstanceSpec{Volumes: w.Spec.Volumes}, Status: w.Status}
}

// vmWire is what is decoded of a VM: all of it but its template's spec, of
// which only the volumes, and its dataVolumeTemplates, of which only their
// metadata.
type vmWire struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              struct {
		Running      *bool                                 `json:"running,omitempty"`
		RunStrategy  *kubevirtv1.VirtualMachineRunStrategy `json:"runStrategy,omitempty"`
		Instancetype *kubevirtv1.InstancetypeMatcher       `json:"instancetype,omitempty"`
		Preference   *kubevirtv1.PreferenceMatcher         `json:"preference,omitempty"`
		Template     *struct {
			ObjectMeta metav1.ObjectMeta `json:"metadata"`
			Spec       struct {
				Volumes []kubevirtv1.Volume `json:"volumes,omitempty"`
			} `json:"spec"`
		} `json:"template"`
		DataVolumeTemplates []struct {
			ObjectMeta metav1.ObjectMeta `json:"metadata"`
		} `json:"dataVolumeTemplates,omitempty"`
		UpdateVolumesStrategy *kubevirtv1.UpdateVolumesStrategy `json:"updateVolumesStrategy,omitempty"`
	} `json:"spec"`
	Status kubevirtv1.VirtualMachineStatus `json:"status"`
}

func (w *vmWire) object() kubevirtv1.VirtualMachine {
	in := &w.Spec
	vm := kubevirtv1.VirtualMachine{TypeMeta: w.TypeMeta, ObjectMeta: w.ObjectMeta, Status: w.Status,
		Spec: kubevirtv1.VirtualMachineSpec{Running: in.Running, RunStrategy: in.RunStrategy, Instancetype: in.Instancetype,
			Preference: in.Preference, UpdateVolumesStrategy: in.UpdateVolumesStrategy}}
	if t := in.Template; t != nil {
		vm.Spec.Template = &kubevirtv1.VirtualMachineInstanceTemplateSpec{ObjectMeta: t.ObjectMeta,
			Spec: kubevirtv1.VirtualMachineInstanceSpec{Volumes: t.Spec.Volumes}}
	}
	if in.DataVolumeTemplates != nil {
		vm.Spec.DataVolumeTemplates = make([]kubevirtv1.DataVolumeTemplateSpec, len(in.DataVolumeTemplates))
		for i := range in.DataVolumeTemplates {
			vm.Spec.DataVolumeTemplates[i].ObjectMeta = in.DataVolumeTemplates[i].ObjectMeta
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
	return jsonv2.Unmarshal(body, pg, leanDecoding)
}

// leanList reads every page of a VMI or VM list as pages says, decoding
// each page into the wire form W and converting its items with object,
// made lean (snapshot.Lean); page is told the count after each page.
func leanList[W any, T any](ctx context.Context, p *PageReader, gvr schema.GroupVersionResource, kind, ns string, limit int64,
	object func(*W) T, page func(n int)) ([]T, error) {
	var out []T
	var pg wirePage[W]
	if limit > 0 {
		pg.Items = make([]W, 0, limit)
	}
	cont := ""
	for {
		buf, err := p.page(ctx, gvr, kind, ns, limit, cont)
		if err != nil {
			return nil, err
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
			snapshot.Lean(&out[len(out)-1])
		}
		page(len(out))
		if cont = pg.Metadata.Continue; cont == "" {
			return out, nil
		}
	}
}

var (
	vmiResource = kubevirtv1.SchemeGroupVersion.WithResource("virtualmachineinstances")
	vmResource  = kubevirtv1.SchemeGroupVersion.WithResource("virtualmachines")
)

// leanVMIs lists the VMIs of ns (all namespaces when "") with p.
func (p *PageReader) leanVMIs(ctx context.Context, ns string, limit int64, page func(int)) ([]kubevirtv1.VirtualMachineInstance, error) {
	return leanList(ctx, p, vmiResource, "VirtualMachineInstance", ns, limit, (*vmiWire).object, page)
}

// leanVMs lists the VMs of ns (all namespaces when "") with p.
func (p *PageReader) leanVMs(ctx context.Context, ns string, limit int64, page func(int)) ([]kubevirtv1.VirtualMachine, error) {
	return leanList(ctx, p, vmResource, "VirtualMachine", ns, limit, (*vmWire).object, page)
}
