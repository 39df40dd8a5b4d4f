// Package apiserver plays KubeVirt's virt-api for the emulator: the
// aggregated API v1.subresources.kubevirt.io (discovery, addvolume and
// removevolume on VMs and VMIs, pkg/virt-api/rest/volumes.go of KubeVirt
// v1.9.0), its authentication of the apiserver's proxied requests, its
// serving certificates, and injected faults.
package apiserver

import (
	"context"
	"encoding/json"
	"github.com/go-logr/logr"
	"net/http"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/tether-dev/tether/internal/testing/emulator/gates"
)

const (
	// Group and Version are those of virt-api's aggregated API.
	Group           = "subresources.kubevirt.io"
	Version         = "v1"
	groupVersion    = Group + "/" + Version
	resourceVM      = "virtualmachines"
	resourceVMI     = "virtualmachineinstances"
	subAddVolume    = "addvolume"
	subRemoveVolume = "removevolume"
)

// Server is the emulated virt-api.
type Server struct {
	client  client.Client
	log     logr.Logger
	gates   func(context.Context) (gates.Gates, error)
	faults  *Faults
	stopped <-chan struct{}
	auth    *requestHeader
}

// New returns a virt-api that reads and writes through c (live, no cache),
// reads the feature gates with readGates, answers with faults first and
// ends hanging calls once stopped is closed.
func New(c client.Client, log logr.Logger, readGates func(context.Context) (gates.Gates, error), faults *Faults, stopped <-chan struct{}) *Server {
	return &Server{client: c, log: log, gates: readGates, faults: faults, stopped: stopped, auth: &requestHeader{client: c}}
}

// LoadAuth reads the requestheader client CA the apiserver proxies with.
func (s *Server) LoadAuth(ctx context.Context) error { return s.auth.load(ctx) }

// Handler routes virt-api's HTTP API.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		_, _ = w.Write([]byte("ok"))
	})
	mux.Handle("/", s.authenticated(http.HandlerFunc(s.serveAPI)))
	return mux
}

// authenticated lets through only requests proxied by the apiserver.
func (s *Server) authenticated(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		user, _, err := s.auth.authenticate(r)
		if err != nil {
			s.log.V(1).Info("refused unauthenticated request", "path", r.URL.Path, "reason", err.Error())
			writeStatus(w, apierrors.NewUnauthorized(err.Error()))
			return
		}
		if user != "" {
			s.log.V(2).Info("request", "method", r.Method, "path", r.URL.Path, "user", user)
		}
		next.ServeHTTP(w, r)
	})
}

func (s *Server) serveAPI(w http.ResponseWriter, r *http.Request) {
	path := strings.TrimSuffix(r.URL.Path, "/")
	switch path {
	case "/apis":
		s.discovery(w, r, groupList())
		return
	case "/apis/" + Group:
		s.discovery(w, r, group())
		return
	case "/apis/" + groupVersion:
		s.discovery(w, r, resourceList())
		return
	}
	// /apis/subresources.kubevirt.io/v1/namespaces/{ns}/{resource}/{name}/{sub}
	parts := strings.Split(strings.TrimPrefix(path, "/apis/"+groupVersion+"/"), "/")
	if !strings.HasPrefix(path, "/apis/"+groupVersion+"/") || len(parts) != 5 || parts[0] != "namespaces" ||
		(parts[2] != resourceVM && parts[2] != resourceVMI) ||
		(parts[4] != subAddVolume && parts[4] != subRemoveVolume) {
		writeStatus(w, apierrors.NewNotFound(subresourceGroupResource(""), r.URL.Path))
		return
	}
	c := call{ns: parts[1], resource: parts[2], name: parts[3], sub: parts[4]}
	if r.Method != http.MethodPut {
		writeStatus(w, apierrors.NewMethodNotSupported(subresourceGroupResource(c.resource+"/"+c.sub), r.Method))
		return
	}
	if f, ok := s.faults.take(c); ok {
		s.serveFault(r.Context(), w, c, f)
		return
	}
	if serr := s.changeVolume(r, c); serr != nil {
		s.log.V(1).Info("volume request refused", "resource", c.resource, "namespace", c.ns, "name", c.name,
			"subresource", c.sub, "code", serr.ErrStatus.Code, "message", serr.ErrStatus.Message)
		writeStatus(w, serr)
		return
	}
	s.log.Info("volume request accepted", "resource", c.resource, "namespace", c.ns, "name", c.name, "subresource", c.sub)
	w.WriteHeader(http.StatusAccepted)
}

func (s *Server) discovery(w http.ResponseWriter, r *http.Request, body any) {
	if r.Method != http.MethodGet {
		writeStatus(w, apierrors.NewMethodNotSupported(subresourceGroupResource(""), r.Method))
		return
	}
	writeJSON(w, http.StatusOK, body)
}

func groupList() *metav1.APIGroupList {
	return &metav1.APIGroupList{
		TypeMeta: metav1.TypeMeta{Kind: "APIGroupList", APIVersion: "v1"},
		Groups:   []metav1.APIGroup{*group()},
	}
}

func group() *metav1.APIGroup {
	v := metav1.GroupVersionForDiscovery{GroupVersion: groupVersion, Version: Version}
	return &metav1.APIGroup{
		TypeMeta:         metav1.TypeMeta{Kind: "APIGroup", APIVersion: "v1"},
		Name:             Group,
		Versions:         []metav1.GroupVersionForDiscovery{v},
		PreferredVersion: v,
	}
}

func resourceList() *metav1.APIResourceList {
	list := &metav1.APIResourceList{
		TypeMeta:     metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"},
		GroupVersion: groupVersion,
	}
	for _, res := range []string{resourceVM, resourceVMI} {
		for _, sub := range []string{subAddVolume, subRemoveVolume} {
			list.APIResources = append(list.APIResources, metav1.APIResource{
				Name:       res + "/" + sub,
				Namespaced: true,
				Kind:       kindOf(res),
				Verbs:      metav1.Verbs{"update"},
			})
		}
	}
	return list
}

func kindOf(resource string) string {
	if resource == resourceVM {
		return "VirtualMachine"
	}
	return "VirtualMachineInstance"
}

func writeStatus(w http.ResponseWriter, serr *apierrors.StatusError) {
	st := serr.ErrStatus.DeepCopy()
	st.Kind, st.APIVersion = "Status", "v1"
	if st.Status == "" {
		st.Status = metav1.StatusFailure
	}
	writeJSON(w, int(st.Code), st)
}

func writeJSON(w http.ResponseWriter, code int, body any) {
	data, err := json.Marshal(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_, _ = w.Write(data)
}
