package virtapi

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	virtv1 "kubevirt.io/api/core/v1"
)

type seen struct {
	method, path, contentType string
	body                      map[string]any
}

// fakeServer answers every request with code and body, recording it.
func fakeServer(t *testing.T, code int, body any) (rest.Interface, *seen) {
	t.Helper()
	got := &seen{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got.method, got.path, got.contentType = r.Method, r.URL.Path, r.Header.Get("Content-Type")
		data, _ := io.ReadAll(r.Body)
		_ = json.Unmarshal(data, &got.body)
		if body != nil {
			w.Header().Set("Content-Type", "application/json")
		}
		w.WriteHeader(code)
		if body != nil {
			_ = json.NewEncoder(w).Encode(body)
		}
	}))
	t.Cleanup(srv.Close)
	c, err := NewSubresourceClient(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	return c, got
}

func status(code int32, reason metav1.StatusReason, msg string) *metav1.Status {
	return &metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusFailure,
		Code: code, Reason: reason, Message: msg}
}

func TestAddVolumeSendsOptions(t *testing.T) {
	c, got := fakeServer(t, http.StatusAccepted, nil)
	opts := &virtv1.AddVolumeOptions{
		Name: "data", Disk: &virtv1.Disk{},
		VolumeSource: &virtv1.HotplugVolumeSource{PersistentVolumeClaim: &virtv1.PersistentVolumeClaimVolumeSource{
			PersistentVolumeClaimVolumeSource: corev1.PersistentVolumeClaimVolumeSource{ClaimName: "pvc"},
		}},
		DryRun: DryRunAll,
	}
	if err := AddVolume(context.Background(), c, VM, "ns", "vm1", opts); err != nil {
		t.Fatal(err)
	}
	if got.method != http.MethodPut || got.path != "/apis/subresources.kubevirt.io/v1/namespaces/ns/virtualmachines/vm1/addvolume" {
		t.Errorf("request %s %s", got.method, got.path)
	}
	if got.contentType != "application/json" || got.body["name"] != "data" {
		t.Errorf("body %v (%s)", got.body, got.contentType)
	}
	if dr, _ := got.body["dryRun"].([]any); len(dr) != 1 || dr[0] != "All" {
		t.Errorf("dryRun %v, want [All]", got.body["dryRun"])
	}
}

func TestRemoveVolumeErrorsKeepTheStatus(t *testing.T) {
	cases := []struct {
		name  string
		code  int
		body  any
		check func(error) bool
	}{
		{"409 Status -> IsConflict", 409, status(409, metav1.StatusReasonConflict, "VMI is migrating"), apierrors.IsConflict},
		{"404 Status -> IsNotFound", 404, status(404, metav1.StatusReasonNotFound, `virtualmachineinstance.kubevirt.io "x" not found`), apierrors.IsNotFound},
		{"400 Status -> IsBadRequest", 400, status(400, metav1.StatusReasonBadRequest, "VMI ns/x is owned by a VM"), apierrors.IsBadRequest},
		{"403 from the apiserver -> IsForbidden", 403, status(403, metav1.StatusReasonForbidden, "forbidden"), apierrors.IsForbidden},
		{"500 without a Status body -> IsInternalError", 500, nil, apierrors.IsInternalError},
		{"503 without a Status body -> IsServiceUnavailable", 503, nil, apierrors.IsServiceUnavailable},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cl, got := fakeServer(t, c.code, c.body)
			err := RemoveVolume(context.Background(), cl, VMI, "ns", "x", &virtv1.RemoveVolumeOptions{Name: "data"})
			if !c.check(err) {
				t.Fatalf("error %v (reason %q)", err, apierrors.ReasonForError(err))
			}
			if got.path != "/apis/subresources.kubevirt.io/v1/namespaces/ns/virtualmachineinstances/x/removevolume" {
				t.Errorf("path %s", got.path)
			}
			if st, ok := c.body.(*metav1.Status); ok && err.Error() != st.Message {
				t.Errorf("message %q, want %q", err.Error(), st.Message)
			}
		})
	}
}

func TestCallsCheckArguments(t *testing.T) {
	c, _ := fakeServer(t, http.StatusAccepted, nil)
	ctx := context.Background()
	if err := AddVolume(ctx, c, VM, "ns", "vm", nil); err == nil {
		t.Error("nil options -> error")
	}
	if err := RemoveVolume(ctx, c, Kind("pods"), "ns", "vm", &virtv1.RemoveVolumeOptions{Name: "x"}); err == nil {
		t.Error("unknown kind -> error")
	}
	if err := RemoveVolume(ctx, c, VM, "", "vm", &virtv1.RemoveVolumeOptions{Name: "x"}); err == nil {
		t.Error("no namespace -> error")
	}
}
