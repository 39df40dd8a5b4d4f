package protect

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/tether-dev/tether/internal/protect/inuse"
)

// Stranded finalizers: objects that carry inuse.Finalizer where no reconciler of
// the running controller keeps it in step, because protection was turned
// off or scope.namespaces no longer names their namespace. Nobody would
// ever release them, so their deletion (and their namespace's) would wait
// forever. The Sweeper finds them with a live LIST, releases those that a
// live check proves unused — through the reconciler's own release path —
// and reports the rest.

// Coverage is what the running controller protects.
type Coverage struct {
	// Enabled is protection.enabled.
	Enabled bool
	// Namespaces is scope.namespaces; empty means every namespace.
	Namespaces []string
}

// Covers reports whether the reconcilers keep the finalizer of objects in
// namespace ns in step. The VM selector does not narrow it: the reconcilers
// watch every object of a covered namespace, and their live check counts
// every VM there, so an object that only VMs outside the selector use stays
// protected and is released when they stop using it.
func (c Coverage) Covers(ns string) bool {
	return c.Enabled && (len(c.Namespaces) == 0 || slices.Contains(c.Namespaces, ns))
}

// Everything reports whether every namespace is covered: then nothing can be
// stranded.
func (c Coverage) Everything() bool { return c.Enabled && len(c.Namespaces) == 0 }

// SweepOptions configure the Sweeper.
type SweepOptions struct {
	Coverage
	// Identity names the reporting instance of the Events.
	Identity string
	Log      logr.Logger
	// Recheck is how often the objects found stranded are checked again,
	// so that one is released once its last VM goes (default 5m). The
	// live LIST of every object runs only at start.
	Recheck time.Duration
	// NamespacePoll is how often the namespaces holding stranded objects
	// are read, so that a namespace being deleted is never kept waiting
	// (default 10s).
	NamespacePoll time.Duration
	// PageSize bounds each page of the live LISTs (default 500).
	PageSize int64
	// BeforeLiveCheck is passed to the release path (see Options).
	BeforeLiveCheck func(ctx context.Context, ref inuse.Ref)
}

// Sweeper is the leader's runnable that settles stranded finalizers.
type Sweeper struct {
	SweepOptions
	// Client writes (finalizer patches, Events, access reviews); it never
	// reads protected objects.
	Client client.Client
	// Live reads from the server, never from a cache: the caches hold only
	// the covered namespaces.
	Live   client.Reader
	Mapper meta.RESTMapper

	// recs release through the reconcilers' own path, one per kind: live
	// reads, writes through Client.
	recs map[inuse.Kind]*Reconciler
	// relist: the last sweep could not list some kind; the next re-check
	// sweeps again. Only the sweeping goroutine uses it.
	relist   bool
	mu       sync.Mutex
	known    map[inuse.Ref]Stranded
	reported map[types.UID]string
	logged   map[string]string
}

// AddSweeper registers a Sweeper with mgr unless every namespace is
// covered. It runs on the leader only.
func AddSweeper(mgr manager.Manager, o SweepOptions) error {
	if o.Everything() {
		return nil
	}
	return mgr.Add(NewSweeper(mgr.GetClient(), mgr.GetAPIReader(), mgr.GetRESTMapper(), o))
}

// NewSweeper fills o's defaults.
func NewSweeper(c client.Client, live client.Reader, m meta.RESTMapper, o SweepOptions) *Sweeper {
	if o.Recheck <= 0 {
		o.Recheck = 5 * time.Minute
	}
	if o.NamespacePoll <= 0 {
		o.NamespacePoll = 10 * time.Second
	}
	if o.PageSize <= 0 {
		o.PageSize = 500
	}
	if o.Identity == "" {
		o.Identity = "tether-controller"
	}
	o.Log = o.Log.WithName("protect-stranded")
	s := &Sweeper{SweepOptions: o, Client: c, Live: live, Mapper: m, recs: map[inuse.Kind]*Reconciler{}}
	for _, k := range inuse.Kinds {
		s.recs[k] = &Reconciler{Kind: k, Cache: c, Live: live, Options: Options{
			Selector: labels.Everything(), Identity: o.Identity, Log: o.Log.WithValues("kind", string(k)),
			BeforeLiveCheck: o.BeforeLiveCheck,
		}}
	}
	return s
}

// Start sweeps once, then re-checks what stays stranded until ctx ends.
func (s *Sweeper) Start(ctx context.Context) error {
	s.Sweep(ctx)
	recheckEvery, pollEvery := s.intervals()
	recheck := time.NewTimer(recheckEvery)
	defer recheck.Stop()
	poll := time.NewTimer(pollEvery)
	defer poll.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-recheck.C:
			if s.relist {
				s.Sweep(ctx)
			} else {
				s.settleKnown(ctx, func(string) bool { return true })
			}
			recheckEvery, _ = s.intervals()
			recheck.Reset(recheckEvery)
		case <-poll.C:
			s.settleKnown(ctx, s.terminating(ctx))
			_, pollEvery = s.intervals()
			poll.Reset(pollEvery)
		}
	}
}

// intervals are Recheck and NamespacePoll, stretched with the number of
// stranded objects and of their namespaces so that neither costs more than
// a few requests a second (a re-check reads an object and lists its
// namespace's VMs twice; a poll reads one namespace).
func (s *Sweeper) intervals() (recheck, poll time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	nss := map[string]bool{}
	for r := range s.known {
		nss[r.Namespace] = true
	}
	return max(s.Recheck, time.Duration(len(s.known))*time.Second),
		max(s.NamespacePoll, time.Duration(len(nss))*200*time.Millisecond)
}

// Sweep lists every object of the protected kinds live, page by page,
// settles each that carries inuse.Finalizer outside the coverage, and returns
// those that stay stranded.
func (s *Sweeper) Sweep(ctx context.Context) []Stranded {
	var refs []inuse.Ref
	s.relist = false
	for _, k := range inuse.Kinds {
		if !installed(s.Mapper, k) {
			continue
		}
		found, err := s.listMarked(ctx, k)
		if err != nil {
			s.relist = s.relist || s.listFailed(k, err)
			continue
		}
		refs = append(refs, found...)
	}
	p := &pass{Sweeper: s, patch: map[string]bool{}}
	known := map[inuse.Ref]Stranded{}
	for _, ref := range refs {
		if ctx.Err() != nil {
			break
		}
		if st, ok := p.settle(ctx, ref); ok {
			known[ref] = st
		}
	}
	return s.publish(ctx, known)
}

// listMarked returns the objects of kind k outside the coverage that carry
// inuse.Finalizer, from a paginated live LIST of every namespace.
func (s *Sweeper) listMarked(ctx context.Context, k inuse.Kind) ([]inuse.Ref, error) {
	var out []inuse.Ref
	cont := ""
	for {
		list, all := newList(k)
		if err := s.Live.List(ctx, list, client.Limit(s.PageSize), client.Continue(cont)); err != nil {
			return nil, err
		}
		for _, o := range all() {
			if inuse.HasFinalizer(o) && !s.Covers(o.GetNamespace()) {
				out = append(out, inuse.Ref{Kind: k, Namespace: o.GetNamespace(), Name: o.GetName()})
			}
		}
		if cont = list.GetContinue(); cont == "" {
			return out, nil
		}
	}
}

// listFailed logs why the objects of kind k could not be looked at; a
// refused LIST names the missing right. It reports whether trying again
// later may help (not for a refusal or an API that is not served).
func (s *Sweeper) listFailed(k inuse.Kind, err error) bool {
	group, resource := resourceOf(k)
	switch {
	case meta.IsNoMatchError(err):
		return false
	case apierrors.IsForbidden(err):
		s.Log.Info("WARNING: cannot look for stranded finalizers of this kind: the controller may not list it in all namespaces",
			"kind", string(k), "missing", "list "+resource+" (apiGroup \""+group+"\") cluster-wide", "error", err.Error())
		return false
	}
	s.Log.Error(err, "listing objects to find stranded finalizers; trying again at the next re-check", "kind", string(k))
	return true
}

// settleKnown settles again the known stranded objects whose namespace
// passes pick.
func (s *Sweeper) settleKnown(ctx context.Context, pick func(ns string) bool) {
	s.mu.Lock()
	known := make(map[inuse.Ref]Stranded, len(s.known))
	for r, st := range s.known {
		known[r] = st
	}
	s.mu.Unlock()
	p := &pass{Sweeper: s, patch: map[string]bool{}}
	changed := false
	for ref := range known {
		if !pick(ref.Namespace) {
			continue
		}
		changed = true
		if st, ok := p.settle(ctx, ref); ok {
			known[ref] = st
		} else {
			delete(known, ref)
		}
	}
	if changed {
		s.publish(ctx, known)
	}
}

// terminating returns a predicate true for the namespaces of known stranded
// objects that are being deleted (or gone), read live once each.
func (s *Sweeper) terminating(ctx context.Context) func(string) bool {
	s.mu.Lock()
	nss := map[string]bool{}
	for r := range s.known {
		nss[r.Namespace] = false
	}
	s.mu.Unlock()
	r := s.recs[inuse.KindPVC]
	for ns := range nss {
		term, err := r.namespaceTerminating(ctx, ns)
		if err != nil {
			s.Log.Error(err, "reading a namespace of stranded finalizers", "namespace", ns)
		}
		nss[ns] = term
	}
	return func(ns string) bool { return nss[ns] }
}
