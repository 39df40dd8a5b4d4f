package controller

import (
	"fmt"
	"slices"

	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/tether-dev/tether/internal/clients"
	"github.com/tether-dev/tether/internal/config"
	"github.com/tether-dev/tether/internal/controller/access"
	"github.com/tether-dev/tether/internal/kubevirt/check"
	"github.com/tether-dev/tether/internal/kubevirt/snapshot"
)

// loopGathers are the kinds each loop's gatherer reads into the snapshot
// its checks decide from (each row of checkLoops). The rows of a loop may
// read no other kind, and the loop watches every one of them, each resource
// as the kind table names it (TestLoopsGatherAndWatchWhatTheirRowsRead):
// so a loop decides from what `tether audit` would read, and a change of
// any of it wakes the loop. The namespace loop gathers and watches only the
// kinds its enabled checks read (namespaceLoop).
func loopGathers() map[check.Loop]snapshot.Kinds {
	out := map[check.Loop]snapshot.Kinds{}
	for _, l := range checkLoops() {
		out[l.name] = l.gathers
	}
	return out
}

// gathered are the kinds the loops cfg enables read.
func gathered(cfg *config.Config) snapshot.Kinds {
	var out snapshot.Kinds
	for loop, kinds := range loopGathers() {
		switch {
		case loop == check.LoopNamespace:
			if names, k, _ := namespaceLoop(cfg.Enabled); len(names) > 0 {
				out |= k
			}
		case slices.ContainsFunc(check.InLoop(loop), cfg.Enabled):
			out |= kinds
		}
	}
	return out
}

// kindReads are the grants reading kinds takes, as the kind table says:
// list and watch of each resource a cache holds, and get of those read by
// name when live is set (the live re-read before an action: the caches
// need no get). Each is asked cluster-wide where the row reads it so.
func kindReads(kinds snapshot.Kinds, live bool) []access.Grant {
	var out []access.Grant
	for _, row := range kinds.Rows() {
		for _, res := range row.Resources {
			for _, verb := range row.Verbs() {
				g := access.Grant{Verb: verb, Group: res.Group, Resource: res.Resource, ClusterWide: row.ClusterWide(res)}
				if (verb != "get" || live) && !slices.Contains(out, g) {
					out = append(out, g)
				}
			}
		}
	}
	return out
}

// wakeFunc says how a change of the resource res, of kind k, wakes a loop:
// the handler that maps it to the loop's work items, and the events that
// count. A nil handler: the loop has none, and its setup fails.
type wakeFunc func(k snapshot.Kinds, res snapshot.Resource) (handler.EventHandler, []predicate.Predicate)

// kindWatch is the watch of one resource of a kind a loop reads.
type kindWatch struct {
	kind    snapshot.Kinds
	obj     client.Object
	handler handler.EventHandler
	preds   []predicate.Predicate
}

// watchesOf are the watches of every resource of the kinds, the object of
// each made from its row of the kind table, woken as wake says.
func watchesOf(kinds snapshot.Kinds, wake wakeFunc) []kindWatch {
	var out []kindWatch
	for _, row := range kinds.Rows() {
		for _, res := range row.Resources {
			h, preds := wake(row.Kind, res)
			out = append(out, kindWatch{kind: row.Kind, obj: objectOf(res), handler: h, preds: preds})
		}
	}
	return out
}

// addWatches adds the watches of the kinds to b, as wake says. A kind with no
// handler is an error: its changes would go unseen.
func addWatches(b *builder.Builder, loop string, kinds snapshot.Kinds, wake wakeFunc) (*builder.Builder, error) {
	for _, w := range watchesOf(kinds, wake) {
		if w.handler == nil {
			return nil, fmt.Errorf("controller: the %s loop reads %s but nothing of it wakes the loop", loop, w.kind)
		}
		// One WithPredicates per watch: a second one would replace the first.
		b = b.Watches(w.obj, w.handler, builder.WithPredicates(w.preds...))
	}
	return b, nil
}

// objectOf is an empty object of res, of the clients' scheme type
// (TestKindTable_watchIsWhatTheCachesHold holds every resource of the
// table to the scheme).
func objectOf(res snapshot.Resource) client.Object {
	o, err := clients.Scheme().New(res.GroupVersionKind)
	if err != nil {
		panic(fmt.Sprintf("controller: the kind table's %s is not in the clients' scheme: %v", res.GroupVersionKind, err))
	}
	return o.(client.Object)
}
