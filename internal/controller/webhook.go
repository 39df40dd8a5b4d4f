package controller

import (
	"fmt"
	"net"
	"strconv"

	"sigs.k8s.io/controller-runtime/pkg/webhook"
)

// webhookEnabled reports whether o asks for the admission webhook.
func webhookEnabled(o Options) bool {
	return o.WebhookAddr != "" && o.WebhookAddr != "0"
}

// webhookServer is the TLS server of the protection admission webhook, or
// nil when it is disabled. Every replica serves it: it reads live and needs
// neither the leader's caches nor its lease.
func webhookServer(o Options) (webhook.Server, error) {
	if !webhookEnabled(o) {
		return nil, nil
	}
	host, p, err := net.SplitHostPort(o.WebhookAddr)
	port, perr := strconv.Atoi(p)
	if err != nil || perr != nil || port < 1 || port > 65535 {
		return nil, fmt.Errorf("controller: --webhook-bind-address %q is not host:port (e.g. :9443), or 0 to disable the webhook", o.WebhookAddr)
	}
	return webhook.NewServer(webhook.Options{Host: host, Port: port, CertDir: o.WebhookCertDir}), nil
}
