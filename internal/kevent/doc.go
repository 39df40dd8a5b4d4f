// Package kevent makes the core/v1 Events tether records acceptable to the
// API server and to everything that reads Events.
//
// tether writes core/v1 Events with eventTime, reportingController and
// reportingInstance set (the "new" form). For that form the API server
// (k8s.io/kubernetes pkg/apis/core/validation, legacyValidateEvent) rejects
// an Event without action or reason, or whose message is longer than 1024
// characters, or whose reason, action or reportingInstance is longer than
// 128. Event writes are best effort, so a rejected Event would vanish
// without a trace: Fit clamps those fields instead.
//
// The core/v1 API does not check an Event's name, but events.k8s.io/v1 does
// (a DNS-1123 subdomain of at most 253 characters), and so do the tools
// that copy or export Events through it. Events are named
// "<object>.<suffix>" like the ones the kubelet and controllers write, so
// `kubectl get events` sorts them by object; Name shortens the object part
// when the whole would not be a valid name.
package kevent
