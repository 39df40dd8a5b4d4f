package act

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/tether-dev/tether/internal/clients"
	"github.com/tether-dev/tether/internal/drift"
	"github.com/tether-dev/tether/internal/eventreason"
	"github.com/tether-dev/tether/internal/kevent"
	"github.com/tether-dev/tether/internal/kubevirt/check"
)

// Event reasons (contract: users alert on them). The reasons of an
// applied or failed action are the check's (its row's Events); the others
// are common to every check.
const (
	ReasonOrphanDetached     = check.ReasonOrphanDetached
	ReasonDanglingRemoved    = check.ReasonDanglingRemoved
	ReasonOrphanDetachFailed = check.ReasonOrphanDetachFailed
	ReasonActionRefused      = eventreason.ActionRefused
	ReasonActionPending      = eventreason.ActionPending
	ReasonActionDeferred     = eventreason.ActionDeferred
	// StaleVolumeAttachment's outcomes.
	ReasonStaleAttachmentReleased      = check.ReasonStaleAttachmentReleased
	ReasonStaleAttachmentReleaseFailed = check.ReasonStaleAttachmentReleaseFailed
)

// Recorder writes one core/v1 Event per action outcome on the finding's
// subject, synchronously (a one-shot command exits right after acting).
type Recorder struct {
	Client    client.Client
	Component string
}

func newClient(cfg *rest.Config) (client.Client, error) { return clients.New(cfg) }

func reasonFor(f drift.Finding, o drift.Outcome) (string, string) {
	row, err := check.Lookup(f.Check)
	if err != nil || row.Events == (check.Events{}) {
		row.Events = check.Events{Applied: ReasonOrphanDetached, Failed: ReasonOrphanDetachFailed}
	}
	switch o {
	case drift.Applied:
		return row.Events.Applied, corev1.EventTypeNormal
	case drift.Pending:
		return ReasonActionPending, corev1.EventTypeWarning
	case drift.Migrating:
		return ReasonActionDeferred, corev1.EventTypeNormal
	case drift.Refused:
		return ReasonActionRefused, corev1.EventTypeNormal
	}
	return row.Events.Failed, corev1.EventTypeWarning
}

func (r *Recorder) record(ctx context.Context, f drift.Finding, res drift.Result) {
	reason, typ := reasonFor(f, res.Outcome)
	r.Event(ctx, f, reason, typ, fmt.Sprintf("%s %s volume %q: %s (finding %s)", f.Check, f.Action.Type, f.Volume, res.Message, f.ID))
}

// Event records one Event on the finding's subject. Best effort: an Event
// that cannot be written never changes an outcome. Its name, message and
// action are fitted to the API server's limits (kevent), so a long object
// name or message never makes the Event vanish.
func (r *Recorder) Event(ctx context.Context, f drift.Finding, reason, typ, msg string) {
	if r == nil || r.Client == nil || f.Object.Name == "" {
		return
	}
	apiVersion, evNS, objNS := "kubevirt.io/v1", f.Namespace, f.Namespace
	switch f.Object.Kind {
	case "Pod", "PersistentVolumeClaim":
		apiVersion = "v1"
	case "DataVolume":
		apiVersion = "cdi.kubevirt.io/v1beta1"
	case "PersistentVolume":
		apiVersion, evNS, objNS = "v1", metav1.NamespaceDefault, ""
	case "Node":
		// A tenant's Node: the Event goes to the infra namespace of its VM.
		apiVersion, objNS = "v1", ""
		if evNS == "" {
			evNS = metav1.NamespaceDefault
		}
	case check.KindVolumeAttachment:
		apiVersion, evNS, objNS = "storage.k8s.io/v1", metav1.NamespaceDefault, ""
	}
	ev := kevent.New(kevent.Spec{
		Namespace:  evNS,
		NameSuffix: fmt.Sprintf("tether-%s-%s", f.ID, rand.String(5)),
		Labels:     map[string]string{"tether.dev/finding": f.ID},
		Object: corev1.ObjectReference{
			APIVersion: apiVersion, Kind: f.Object.Kind, Namespace: objNS, Name: f.Object.Name, UID: f.Object.UID,
		},
		Reason: reason, Type: typ, Message: msg, Action: string(f.Action.Type), Component: r.Component,
	}, time.Now())
	_ = r.Client.Create(ctx, ev)
}
