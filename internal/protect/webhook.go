package protect

import (
	"context"
	"slices"
	"time"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/tether-dev/tether/internal/metrics"
	"github.com/tether-dev/tether/internal/protect/inuse"
)

// WebhookPath is where the controller's webhook server answers the
// VirtualMachine admission reviews (contract: config/webhook).
const WebhookPath = "/protect/v1/virtualmachines"

// DefaultWebhookReadTimeout bounds the live reads of one review: the
// handler answers before the API server's timeoutSeconds (config/webhook:
// 5s) runs out.
const DefaultWebhookReadTimeout = 2 * time.Second

// WebhookOptions configure the admission webhook.
type WebhookOptions struct {
	// Namespaces protection covers; empty means every namespace.
	Namespaces []string
	// ReadTimeout bounds the live reads of one review; zero means
	// DefaultWebhookReadTimeout.
	ReadTimeout time.Duration
	Log         logr.Logger
}

// VMAdmission refuses VM writes that add a reference to a PVC or DataVolume
// being deleted (Admit). It reads the referenced objects live, never from a
// cache: a deletion must be seen as soon as the API server has stored it.
type VMAdmission struct {
	// Live reads from the API server.
	Live client.Reader
	// DataVolumes is false when CDI is not installed.
	DataVolumes bool
	WebhookOptions
}

// SetupWebhook registers the VM admission handler and the attachment pod
// eviction guard (eviction.go) with mgr's webhook server.
func SetupWebhook(mgr manager.Manager, o WebhookOptions) {
	h := &VMAdmission{Live: mgr.GetAPIReader(), DataVolumes: installed(mgr.GetRESTMapper(), inuse.KindDataVolume), WebhookOptions: o}
	h.Log = o.Log.WithName("protect-admission")
	mgr.GetWebhookServer().Register(WebhookPath, &webhook.Admission{Handler: h})
	// The guard of attachment pods is served beside it; only the opt-in
	// registration (chart protection.webhook.attachmentPodEvictions)
	// sends it reviews.
	e := &EvictionAdmission{Live: mgr.GetAPIReader(), WebhookOptions: o}
	e.Log = o.Log.WithName("protect-eviction")
	mgr.GetWebhookServer().Register(EvictionPath, &webhook.Admission{Handler: e})
}

// Handle answers one admission review.
func (h *VMAdmission) Handle(ctx context.Context, req admission.Request) admission.Response {
	w, err := ParseVMWrite(&req.AdmissionRequest)
	if err != nil {
		// A request the handler cannot read is let through, like one it
		// cannot answer (failure policy Ignore); the log says why.
		h.Log.Error(err, "admission request not understood", "uid", req.UID)
		metrics.Admission.WithLabelValues(metrics.AdmissionUnknown).Inc()
		return admission.Allowed("tether: request not understood")
	}
	covered := h.covers(req.Namespace)
	refs := AddedReferences(w)
	if !covered || len(refs) == 0 {
		return admission.Allowed("")
	}
	v := Admit(w, covered, h.states(ctx, refs))
	switch {
	case !v.Allowed:
		h.Log.Info("refused: the VM references objects being deleted", "vm", req.Namespace+"/"+req.Name, "operation", string(req.Operation), "user", req.UserInfo.Username, "refused", v.Refused)
		metrics.Admission.WithLabelValues(metrics.AdmissionRefused).Inc()
		return admission.Denied(v.Message)
	case len(v.Unknown) > 0:
		metrics.Admission.WithLabelValues(metrics.AdmissionUnknown).Inc()
		return admission.Allowed("tether: could not read every referenced object")
	}
	metrics.Admission.WithLabelValues(metrics.AdmissionAllowed).Inc()
	return admission.Allowed("")
}

func (h *VMAdmission) covers(ns string) bool {
	return len(h.Namespaces) == 0 || slices.Contains(h.Namespaces, ns)
}

// states reads every ref live, within the read timeout.
func (h *VMAdmission) states(ctx context.Context, refs []inuse.Ref) map[inuse.Ref]ObjectState {
	d := h.ReadTimeout
	if d <= 0 {
		d = DefaultWebhookReadTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	out := make(map[inuse.Ref]ObjectState, len(refs))
	for _, r := range refs {
		if r.Kind == inuse.KindDataVolume && !h.DataVolumes {
			continue
		}
		obj := newObject(r.Kind)
		err := h.Live.Get(ctx, client.ObjectKey{Namespace: r.Namespace, Name: r.Name}, obj)
		switch {
		case apierrors.IsNotFound(err) || meta.IsNoMatchError(err):
		case err != nil:
			h.Log.Error(err, "reading a referenced object", "object", r.String())
			out[r] = ObjectState{Err: err}
		case obj.GetDeletionTimestamp() != nil:
			out[r] = ObjectState{Deleting: true, Since: *obj.GetDeletionTimestamp()}
		}
	}
	return out
}

// compile-time check: the handler is an admission.Handler.
var _ admission.Handler = (*VMAdmission)(nil)
