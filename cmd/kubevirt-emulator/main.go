// Command kubevirt-emulator plays KubeVirt (virt-api's volume subresources,
// virt-controller, virt-handler) against a real kube-apiserver for tests and
// demos. It must never be pointed at a production cluster. See package
// internal/testing/emulator for what it does and does not emulate.
//
//	kubevirt-emulator --kubeconfig FILE [--listen 127.0.0.1:0] [--namespace kubevirt]
//	    [--node-name node-1] [--target-node-name node-2] [--migration-duration 3s]
//	    [--no-nodes] [--keep-registration] [-v N]
//
// It runs until SIGINT or SIGTERM and then removes its APIService and
// Service (unless --keep-registration), so the apiserver stops proxying to it.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/tether-dev/tether/internal/testing/emulator"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "kubevirt-emulator:", err)
		os.Exit(1)
	}
}

func run() error {
	var (
		kubeconfig = flag.String("kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig of an admin user (default $KUBECONFIG)")
		o          emulator.Options
		keep       = flag.Bool("keep-registration", false, "leave the APIService and Service in place on exit")
		verbosity  = flag.Int("v", 0, "log verbosity (0-2)")
	)
	flag.StringVar(&o.ListenAddr, "listen", "127.0.0.1:0", "TLS listen address; the apiserver reaches it as localhost:<port>")
	flag.StringVar(&o.Namespace, "namespace", "kubevirt", "namespace of the Service, the KubeVirt object and the fault ConfigMap")
	flag.StringVar(&o.NodeName, "node-name", "node-1", "node that new VMIs run on")
	flag.StringVar(&o.TargetNodeName, "target-node-name", "node-2", "node that migrations move VMIs to")
	flag.DurationVar(&o.MigrationDuration, "migration-duration", 3*time.Second, "how long a migration runs")
	flag.BoolVar(&o.NoNodes, "no-nodes", false, "do not create Node objects or keep them Ready")
	flag.Parse()
	if flag.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %v", flag.Args())
	}
	if err := validate(*kubeconfig, o); err != nil {
		return err
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		return fmt.Errorf("--kubeconfig: %w", err)
	}
	o.Config = cfg
	handler := slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.Level(-*verbosity)})
	o.Log = logr.FromSlogHandler(handler)

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	e, err := emulator.Start(ctx, o)
	if err != nil {
		return err
	}
	fmt.Printf("kubevirt emulator serving %s on %s\n", emulator.APIServiceName, e.Addr())
	<-ctx.Done()
	if !*keep {
		uctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if err := e.Unregister(uctx); err != nil {
			o.Log.Error(err, "unregister failed")
		}
		cancel()
	}
	e.Stop()
	return nil
}

func validate(kubeconfig string, o emulator.Options) error {
	if kubeconfig == "" {
		return errors.New("--kubeconfig is required (or set KUBECONFIG)")
	}
	if _, _, err := net.SplitHostPort(o.ListenAddr); err != nil {
		return fmt.Errorf("--listen %q: %w", o.ListenAddr, err)
	}
	if o.NodeName == "" || o.Namespace == "" {
		return errors.New("--node-name and --namespace must not be empty")
	}
	if o.MigrationDuration <= 0 {
		return errors.New("--migration-duration must be positive")
	}
	return nil
}
