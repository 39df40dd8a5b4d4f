// Package localenv composes tether's local world: a real control plane (the
// "infra" cluster), the KubeVirt emulator serving behind its aggregator, and
// optional tenant control planes (guest clusters whose VolumeAttachments say
// which hot-plugged volumes they want). Tests, `make env-up` and `make demo`
// all start the world through this package, so they see the same thing.
package localenv

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"k8s.io/client-go/rest"

	"github.com/tether-dev/tether/internal/testing/controlplane"
	"github.com/tether-dev/tether/internal/testing/emulator"
	"github.com/tether-dev/tether/internal/testing/fakeattacher"
	"github.com/tether-dev/tether/internal/testing/realkubevirt"
	"github.com/tether-dev/tether/internal/testing/realnode"
)

// Options configure Start.
type Options struct {
	// Dir keeps all state; empty means temporary directories removed by Stop.
	Dir string
	// ControllerManager starts kube-controller-manager in the infra cluster.
	ControllerManager bool
	// ServiceAccountCredentials runs the controller manager's controllers
	// under their own ServiceAccounts (see controlplane.Options).
	ServiceAccountCredentials bool
	// Tenants names tenant control planes to start beside the infra cluster.
	Tenants []string
	// MigrationDuration is how long an emulated migration runs.
	MigrationDuration time.Duration
	// StartTimeout bounds the start of each control plane.
	StartTimeout time.Duration
	// APIServerArgs are added to the infra API server's flags
	// ("--flag=value"), e.g. feature gates a benchmark turns on.
	APIServerArgs []string
	// Attacher starts the CSI attacher emulator (package attacher) for
	// fakeattacher.DefaultDriver and registers that CSIDriver (attachRequired:
	// true); with ControllerManager, the real attach/detach controller then
	// attaches volumes of pods bound to Nodes it manages.
	Attacher bool
	// KubeVirt chooses the world's KubeVirt: KubeVirtEmulator (the default),
	// KubeVirtReal (virt-api and virt-controller built from KubeVirt's
	// module, see package realkubevirt), or KubeVirtHandler (KubeVirtReal
	// with RealHandler).
	KubeVirt string
	// FeatureGates are listed in real KubeVirt's CR (KubeVirtReal only).
	FeatureGates []string
	// KubeVirtLine picks real KubeVirt's release line (realkubevirt.Options.Line).
	KubeVirtLine string
	// Nodes are real KubeVirt's kwok Nodes (KubeVirtReal only; default node-1, node-2).
	Nodes []string
	// RealNode joins a real node (package realnode: kubelet, containerd,
	// runc) to the infra cluster, with kube-scheduler, and runs the
	// controller manager's controllers that pods of Deployments need.
	// Start fails with realnode.Supported's reason where the host cannot
	// run one.
	RealNode bool
	// RealHandler runs real virt-handler on the real node (implies
	// KubeVirtReal and RealNode; see realkubevirt.StartRealHandler): VMIs
	// placed there boot real guests under QEMU's software emulation.
	RealHandler bool
}

// The KubeVirt a world runs.
const (
	KubeVirtEmulator = "emulator"
	KubeVirtReal     = "real"
	// KubeVirtHandler is KubeVirtReal with real virt-handler on a real node
	// (Options.RealHandler).
	KubeVirtHandler = "handler"
)

// KubeVirtFromEnv is $TETHER_KUBEVIRT ("real" or "emulator"), default emulator.
func KubeVirtFromEnv() string {
	if v := os.Getenv("TETHER_KUBEVIRT"); v != "" {
		return v
	}
	return KubeVirtEmulator
}

// Env is a running local world.
type Env struct {
	Infra    *controlplane.ControlPlane
	Emulator *emulator.Emulator
	// Real is real KubeVirt, when Options.KubeVirt is KubeVirtReal.
	Real    *realkubevirt.KubeVirt
	Tenants map[string]*controlplane.ControlPlane
	// Attacher is the CSI attacher emulator, when Options.Attacher is set.
	Attacher *fakeattacher.Attacher
	// Node is the real node, when Options.RealNode is set.
	Node *realnode.Node
	// Handler is real virt-handler on Node, when Options.RealHandler is set.
	Handler *realkubevirt.RealHandler

	cancel  context.CancelFunc
	tmpDirs []string
}

// Start brings the world up. On error, everything started is stopped.
func Start(ctx context.Context, o Options) (env *Env, err error) {
	env = &Env{Tenants: map[string]*controlplane.ControlPlane{}}
	defer func() {
		if err != nil {
			env.Stop()
			env = nil
		}
	}()
	sub := func(name string) string {
		if o.Dir == "" {
			return ""
		}
		d := filepath.Join(o.Dir, name)
		_ = os.MkdirAll(d, 0o700)
		return d
	}
	if o.RealHandler || o.KubeVirt == KubeVirtHandler {
		o.KubeVirt, o.RealNode, o.RealHandler = KubeVirtReal, true, true
	}
	real := o.KubeVirt == KubeVirtReal
	if o.KubeVirt != "" && !real && o.KubeVirt != KubeVirtEmulator {
		return env, fmt.Errorf("unknown KubeVirt %q: use %q, %q or %q", o.KubeVirt, KubeVirtEmulator, KubeVirtReal, KubeVirtHandler)
	}
	infra := controlplane.Options{
		Dir: sub("infra"), ControllerManager: o.ControllerManager, StartTimeout: o.StartTimeout,
		ServiceAccountCredentials: o.ServiceAccountCredentials, ExtraAPIServerArgs: o.APIServerArgs,
	}
	if real {
		// Real KubeVirt needs what a real cluster has: service-account
		// tokens in pods, the garbage collector, and claims that get bound.
		infra.ControllerManager, infra.ServiceAccountAdmission = true, true
		infra.Controllers = append(append([]string(nil), controlplane.DefaultControllers...), "persistentvolume-binder-controller")
	}
	if o.RealNode {
		if err := realnode.Supported(); err != nil {
			return env, err
		}
		// Pods on a real node need their service-account tokens, the
		// kube-root-ca.crt ConfigMap, and Deployments need their controllers.
		infra.ControllerManager, infra.ServiceAccountAdmission = true, true
		infra.Controllers = append(realnode.Controllers(), infra.Controllers...)
		if o.RealHandler {
			infra.Controllers = append(infra.Controllers, "daemonset-controller")
		}
	}
	env.Infra, err = controlplane.Start(ctx, infra)
	if err != nil {
		return env, fmt.Errorf("infra control plane: %w", err)
	}
	for _, name := range o.Tenants {
		tcp, err := controlplane.Start(ctx, controlplane.Options{Dir: sub("tenant-" + name), StartTimeout: o.StartTimeout})
		if err != nil {
			return env, fmt.Errorf("tenant control plane %q: %w", name, err)
		}
		env.Tenants[name] = tcp
	}
	// The emulator's loops live as long as the environment, not the caller's
	// start-up context.
	runCtx, cancel := context.WithCancel(context.Background())
	env.cancel = cancel
	if real {
		dir := sub("kubevirt")
		if dir == "" {
			if dir, err = os.MkdirTemp("", "tether-kubevirt-"); err != nil {
				return env, err
			}
			env.tmpDirs = append(env.tmpDirs, dir)
		}
		nodes := o.Nodes
		if len(nodes) == 0 {
			nodes = []string{"node-1", "node-2"}
		}
		env.Real, err = realkubevirt.Start(ctx, realkubevirt.Options{
			Config: env.Infra.Config, Dir: dir, FeatureGates: o.FeatureGates, Nodes: nodes, Line: o.KubeVirtLine,
		})
		if err != nil {
			return env, fmt.Errorf("real kubevirt: %w", err)
		}
	} else {
		env.Emulator, err = emulator.Start(runCtx, emulator.Options{
			Config: env.Infra.Config, MigrationDuration: o.MigrationDuration,
		})
		if err != nil {
			return env, fmt.Errorf("kubevirt emulator: %w", err)
		}
	}
	if o.RealNode {
		logf := func(format string, args ...any) { fmt.Fprintf(os.Stderr, format+"\n", args...) }
		env.Node, err = realnode.Start(ctx, env.Infra, realnode.Options{Scheduler: true, Logf: logf, OwnNamespaces: o.RealHandler})
		if err != nil {
			return env, fmt.Errorf("real node: %w", err)
		}
	}
	if o.RealHandler {
		env.Handler, err = env.Real.StartRealHandler(ctx, env.Node, "")
		if err != nil {
			return env, err
		}
	}
	if o.Attacher {
		env.Attacher, err = fakeattacher.Start(ctx, fakeattacher.Options{Config: env.Infra.Config})
		if err != nil {
			return env, fmt.Errorf("csi attacher: %w", err)
		}
	}
	return env, nil
}

// Config is the infra cluster's admin configuration.
func (e *Env) Config() *rest.Config { return e.Infra.Config }

// Stop ends everything, emulator first. Safe on a partly started Env.
func (e *Env) Stop() {
	if e == nil {
		return
	}
	if e.Node != nil {
		e.Node.Stop()
		e.Node = nil
	}
	if e.Attacher != nil {
		e.Attacher.Stop()
		e.Attacher = nil
	}
	if e.Emulator != nil {
		e.Emulator.Stop()
		e.Emulator = nil
	}
	if e.Real != nil {
		e.Real.Stop()
		e.Real = nil
	}
	if e.cancel != nil {
		e.cancel()
	}
	for name, t := range e.Tenants {
		t.Stop()
		delete(e.Tenants, name)
	}
	e.Infra.Stop()
	for _, d := range e.tmpDirs {
		_ = os.RemoveAll(d)
	}
}
