package emulator

import (
	"encoding/json"
	"net/http"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const (
	subresourceGroup   = "subresources.kubevirt.io"
	subresourceVersion = "v1"
	groupVersion       = subresourceGroup + "/" + subresourceVersion
	resourceVM         = "virtualmachines"
	resourceVMI        = "virtualmachineinstances"
	subAddVolume       = "addvolume"
	subRemoveVolume    = "removevolume"
)

// handler routes the emulator's HTTP API.
func (e *Emulator) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		_, _ = w.Write([]byte("ok"))
	})
	mux.Handle("/", e.authenticated(http.HandlerFunc(e.serveAPI)))
	return mux
}

// authenticated lets through only requests proxied by the apiserver.
func (e *Emulator) authenticated(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		user, _, err := e.auth.authenticate(r)
		if err != nil {
			e.log.V(1).Info("refused unauthenticated request", "path", r.URL.Path, "reason", err.Error())
			writeStatus(w, apierrors.NewUnauthorized(err.Error()))
			return
		}
		if user != "" {
			e.log.V(2).Info("request", "method", r.Method, "path", r.URL.Path, "user", user)
		}
		next.ServeHTTP(w, r)
	})
}

func (e *Emulator) serveAPI(w http.ResponseWriter, r *http.Request) {
	path := strings.TrimSuffix(r.URL.Path, "/")
	switch path {
	case "/apis":
		e.discovery(w, r, groupList())
		return
	case "/apis/" + subresourceGroup:
		e.discovery(w, r, group())
		return
	case "/apis/" + groupVersion:
		e.discovery(w, r, resourceList())
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
	if f, ok := e.faults.take(c); ok {
		e.serveFault(r.Context(), w, c, f)
		return
	}
	if serr := e.changeVolume(r, c); serr != nil {
		e.log.V(1).Info("volume request refused", "resource", c.resource, "namespace", c.ns, "name", c.name,
			"subresource", c.sub, "code", serr.ErrStatus.Code, "message", serr.ErrStatus.Message)
		writeStatus(w, serr)
		return
	}
	e.log.Info("volume request accepted", "resource", c.resource, "namespace", c.ns, "name", c.name, "subresource", c.sub)
	w.WriteHeader(http.StatusAccepted)
}

func (e *Emulator) discovery(w http.ResponseWriter, r *http.Request, body any) {
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
	v := metav1.GroupVersionForDiscovery{GroupVersion: groupVersion, Version: subresourceVersion}
	return &metav1.APIGroup{
		TypeMeta:         metav1.TypeMeta{Kind: "APIGroup", APIVersion: "v1"},
		Name:             subresourceGroup,
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
