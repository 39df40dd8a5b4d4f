package protect

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/rand"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/tether-dev/tether/internal/eventreason"
	"github.com/tether-dev/tether/internal/kevent"
	"github.com/tether-dev/tether/internal/metrics"
	"github.com/tether-dev/tether/internal/protect/inuse"
)

// EventStrandedFinalizer is recorded on an object that keeps inuse.Finalizer
// outside what the controller protects, with the command that releases it
// (contract: operators alert on it).
const EventStrandedFinalizer = eventreason.StrandedFinalizer

// Why a stranded finalizer stays (the reason label of
// tether_protection_stranded_finalizers).
const (
	// StrandedInUse: a VM still uses the object. Turning protection off
	// never silently takes it from an object in use.
	StrandedInUse = "InUse"
	// StrandedNoPatchRight: the controller may not patch the object.
	StrandedNoPatchRight = "NoPatchRight"
	// StrandedReleaseFailed: the live check or the release failed.
	StrandedReleaseFailed = "ReleaseFailed"
)

// Stranded is an object that keeps inuse.Finalizer outside the coverage.
type Stranded struct {
	Ref    inuse.Ref
	Reason string
	// Users are the VMs that hold it, from a live LIST.
	Users []string
	uid   types.UID
	rv    string
}

// ReleaseCommand is the command that removes every tether finalizer in
// namespace ns, in use or not.
func ReleaseCommand(ns string) string {
	return "tether protect --release -n " + ns + " --apply"
}

// StrandedMessage says why st keeps the finalizer and how to release it
// (contract: the Event's message).
func StrandedMessage(st Stranded, c Coverage) string {
	ns := st.Ref.Namespace
	why, again := "protection is disabled", "enable protection"
	if c.Enabled {
		why, again = "namespace "+ns+" is outside scope.namespaces", "add "+ns+" to scope.namespaces"
	}
	var kept string
	switch st.Reason {
	case StrandedInUse:
		kept = "it is kept because VirtualMachine(s) " + someNames(st.Users, 5) + " use it"
	case StrandedNoPatchRight:
		_, resource := resourceOf(st.Ref.Kind)
		kept = "tether may not patch " + resource + " in " + ns + " to release it"
	default:
		kept = "releasing it failed (see the controller's log)"
	}
	return fmt.Sprintf("%s keeps finalizer %s, which tether no longer maintains (%s); %s; "+
		"to keep it protected, %s; to release every tether finalizer of the namespace: %s",
		st.Ref, inuse.Finalizer, why, kept, again, ReleaseCommand(ns))
}

// someNames joins the first n names and counts the rest, so that the
// message, and the command at its end, fit in an Event.
func someNames(names []string, n int) string {
	if len(names) <= n {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:n], ", "), len(names)-n)
}

// pass is one round of settling; it remembers the access reviews.
type pass struct {
	*Sweeper
	patch map[string]bool
}

// settle releases ref when the reconciler's live check proves no VM holds
// it (or its namespace is being deleted) and the controller may patch it.
// It reports whether ref stays stranded, and why.
func (p *pass) settle(ctx context.Context, ref inuse.Ref) (Stranded, bool) {
	r := p.recs[ref.Kind]
	st := Stranded{Ref: ref}
	if !p.mayPatch(ctx, ref) {
		st.Reason = StrandedNoPatchRight
	} else if err := r.releaseIfUnused(ctx, ref); err != nil {
		// A guarded patch is refused when the object changed since the
		// live read: once more, from a fresh read.
		if err = r.releaseIfUnused(ctx, ref); err != nil {
			p.Log.Error(err, "releasing a stranded finalizer", "object", ref.String())
			st.Reason = StrandedReleaseFailed
		}
	}
	obj := newObject(ref.Kind)
	if err := p.Live.Get(ctx, client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}, obj); err != nil {
		if apierrors.IsNotFound(err) {
			return st, false
		}
		p.Log.Error(err, "reading a stranded object", "object", ref.String())
		st.Reason = StrandedReleaseFailed
		return st, true
	}
	if !inuse.HasFinalizer(obj) {
		return st, false
	}
	st.uid, st.rv = obj.GetUID(), obj.GetResourceVersion()
	users, err := r.users(ctx, p.Live, ref, obj, false)
	if err != nil {
		p.Log.Error(err, "listing the users of a stranded object", "object", ref.String())
	}
	st.Users = users
	if st.Reason == "" {
		st.Reason = StrandedInUse
		if len(users) == 0 {
			st.Reason = StrandedReleaseFailed
		}
	}
	return st, true
}

// mayPatch asks the API server whether the controller may patch ref's kind
// in its namespace. When the review itself fails, the release is tried and
// a refusal ends as StrandedReleaseFailed.
func (p *pass) mayPatch(ctx context.Context, ref inuse.Ref) bool {
	group, resource := resourceOf(ref.Kind)
	key := resource + "/" + ref.Namespace
	if ok, seen := p.patch[key]; seen {
		return ok
	}
	rev := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
		ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: ref.Namespace, Verb: "patch", Group: group, Resource: resource},
	}}
	ok := true
	if err := p.Client.Create(ctx, rev); err != nil {
		p.Log.Error(err, "asking whether the controller may patch", "resource", resource, "namespace", ref.Namespace)
	} else {
		ok = rev.Status.Allowed
	}
	p.patch[key] = ok
	return ok
}

// resourceOf is the API group and resource of kind k.
func resourceOf(k inuse.Kind) (group, resource string) {
	switch k {
	case inuse.KindDataVolume:
		return "cdi.kubevirt.io", "datavolumes"
	case inuse.KindControllerRevision:
		return "apps", "controllerrevisions"
	}
	return "", "persistentvolumeclaims"
}

// publish makes known the stranded set: the gauge, one Event per object
// and message, and one warning per namespace whose list changed.
func (s *Sweeper) publish(ctx context.Context, known map[inuse.Ref]Stranded) []Stranded {
	out := make([]Stranded, 0, len(known))
	for _, st := range known {
		out = append(out, st)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Ref.String() < out[j].Ref.String() })
	s.mu.Lock()
	s.known = known
	for uid := range s.reported {
		if !slices.ContainsFunc(out, func(st Stranded) bool { return st.uid == uid }) {
			delete(s.reported, uid) // released or gone: forget it
		}
	}
	s.mu.Unlock()
	metrics.StrandedFinalizers.Reset()
	for _, st := range out {
		metrics.StrandedFinalizers.WithLabelValues(st.Ref.Namespace, string(st.Ref.Kind), st.Reason, ReleaseCommand(st.Ref.Namespace)).Inc()
		s.recordStranded(ctx, st)
	}
	s.warn(out)
	return out
}

// warn logs, per namespace whose stranded objects changed, what stays and
// the command that releases it.
func (s *Sweeper) warn(out []Stranded) {
	byNS := map[string][]string{}
	for _, st := range out {
		byNS[st.Ref.Namespace] = append(byNS[st.Ref.Namespace], string(st.Ref.Kind)+" "+st.Ref.Name+" ("+st.Reason+")")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.logged == nil {
		s.logged = map[string]string{}
	}
	for ns, objs := range byNS {
		sum := strings.Join(objs, ", ")
		if s.logged[ns] == sum {
			continue
		}
		s.logged[ns] = sum
		s.Log.Info("WARNING: stranded finalizers kept: tether no longer maintains them", "namespace", ns,
			"protectionEnabled", s.Enabled, "objects", objs, "releaseCommand", ReleaseCommand(ns))
	}
	for ns := range s.logged {
		if _, ok := byNS[ns]; !ok {
			delete(s.logged, ns)
		}
	}
}

// recordStranded writes one Warning Event per object and message. Best
// effort: an Event that cannot be written is tried again at the next
// publish, and changes nothing else.
func (s *Sweeper) recordStranded(ctx context.Context, st Stranded) {
	msg := StrandedMessage(st, s.Coverage)
	s.mu.Lock()
	seen := s.reported[st.uid] == msg
	s.mu.Unlock()
	if seen || st.uid == "" {
		return
	}
	ev := kevent.New(kevent.Spec{
		Namespace:  st.Ref.Namespace,
		NameSuffix: "tether-" + rand.String(8),
		Object: corev1.ObjectReference{
			APIVersion: apiVersion(st.Ref.Kind), Kind: string(st.Ref.Kind), Namespace: st.Ref.Namespace, Name: st.Ref.Name,
			UID: st.uid, ResourceVersion: st.rv,
		},
		Reason: EventStrandedFinalizer, Type: corev1.EventTypeWarning, Message: msg,
		Action: "KeepFinalizer", Component: s.Identity,
	}, time.Now())
	if err := s.Client.Create(ctx, ev); err != nil {
		s.Log.Error(err, "recording Event", "object", st.Ref.String())
		return
	}
	s.mu.Lock()
	if s.reported == nil {
		s.reported = map[types.UID]string{}
	}
	s.reported[st.uid] = msg
	s.mu.Unlock()
}
