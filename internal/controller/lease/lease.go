// Package lease keeps one controller acting at a time: who holds the
// leader Lease, and what a standby says while it waits.
package lease

import (
	"context"
	"time"

	"github.com/go-logr/logr"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/tether-dev/tether/internal/clients"
)

// One controller at a time. A process started without leader election
// (a `tether controller` run from a laptop next to the one in the cluster)
// first looks at the Lease the replicas elect their leader with: if another
// process holds it, this one joins the election instead of acting on its
// own, and so acts only if it becomes the leader. Options.AllowSecond turns
// that off (two processes then keep two budgets and two sets of clocks).

// OtherHolder returns who holds the leader Lease, if anyone holds it now
// (renewed within its duration); "" when nobody does or it cannot be read.
func OtherHolder(ctx context.Context, rc *rest.Config, ns, name string, now time.Time, log logr.Logger) string {
	c, err := clients.New(rc)
	if err != nil {
		return ""
	}
	var l coordinationv1.Lease
	switch err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &l); {
	case apierrors.IsNotFound(err):
		return ""
	case err != nil:
		log.Info("cannot read the leader Lease: another controller would not be noticed", "lease", ns+"/"+name, "error", err.Error())
		return ""
	}
	return Holding(&l, now)
}

// holding returns the Lease's holder if it holds it at now.
func Holding(l *coordinationv1.Lease, now time.Time) string {
	s := l.Spec
	if s.HolderIdentity == nil || *s.HolderIdentity == "" || s.RenewTime == nil || s.LeaseDurationSeconds == nil {
		return ""
	}
	if now.After(s.RenewTime.Add(time.Duration(*s.LeaseDurationSeconds) * time.Second)) {
		return ""
	}
	return *s.HolderIdentity
}

// StandbyReport logs, while this process is not the leader, that it does
// not act and who does; it stops once elected.
type StandbyReport struct {
	Mgr   manager.Manager
	Log   logr.Logger
	Lease string
	Every time.Duration
}

// NeedLeaderElection: it runs on standbys.
func (s StandbyReport) NeedLeaderElection() bool { return false }

func (s StandbyReport) Start(ctx context.Context) error {
	t := time.NewTicker(s.Every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-s.Mgr.Elected():
			s.Log.Info("elected leader: acting", "lease", s.Lease)
			return nil
		case <-t.C:
			s.Log.Info("standby: another process leads and acts; this one does not act", "lease", s.Lease)
		}
	}
}
