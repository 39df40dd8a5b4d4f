package crd_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/tether-dev/tether/api/v1alpha1"
	"github.com/tether-dev/tether/config/crd"
	"github.com/tether-dev/tether/internal/testing/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m, testenv.Options{}) }

var findingsGVR = schema.GroupVersionResource{Group: "tether.dev", Version: "v1alpha1", Resource: "findings"}

func install(t *testing.T, env *testenv.Env) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := crd.Install(ctx, env.Config); err != nil {
		t.Fatalf("Install: %v", err)
	}
}

func finding(ns, name string) *v1alpha1.Finding {
	now := metav1.NewTime(time.Now().UTC().Truncate(time.Second))
	later := metav1.NewTime(now.Add(10 * time.Minute))
	return &v1alpha1.Finding{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: "Finding"},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{v1alpha1.LabelCheck: "OrphanHotplugVolume"}},
		Spec: v1alpha1.FindingSpec{
			ID:      "6725a6484f36",
			Check:   "OrphanHotplugVolume",
			Subject: v1alpha1.SubjectRef{APIVersion: "kubevirt.io/v1", Kind: "VirtualMachineInstance", Name: "node-2", UID: "0b7c6a1e-1111-2222-3333-444455556666"},
			Volume:  "pvc-ccc",
		},
		Status: v1alpha1.FindingStatus{
			Phase:         v1alpha1.PhaseWaiting,
			Reason:        "GracePeriod",
			Message:       "waiting for the grace period",
			Severity:      "warning",
			FirstObserved: &now,
			LastObserved:  &now,
			SafeSince:     &now,
			ActAfter:      &later,
			Evidence:      []string{`VMI node-2 lists hot-plug volume "pvc-ccc"`, `VM node-2 spec does not list volume "pvc-ccc"`},
			Action:        v1alpha1.ProposedAction{Type: "VMIRemoveVolume", Safe: true, Remedy: "virtctl removevolume node-2 --volume-name=pvc-ccc"},
			Attempts:      2,
			LastAttempt:   &now,
			ResolvedAt:    &later,
		},
	}
}

func toUnstructured(t *testing.T, f *v1alpha1.Finding) *unstructured.Unstructured {
	t.Helper()
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(f)
	if err != nil {
		t.Fatal(err)
	}
	return &unstructured.Unstructured{Object: m}
}

func fromUnstructured(t *testing.T, u *unstructured.Unstructured) *v1alpha1.Finding {
	t.Helper()
	f := &v1alpha1.Finding{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, f); err != nil {
		t.Fatal(err)
	}
	return f
}

// TestInstallAndRoundTrip: installing twice works; a Finding with every
// field set survives the apiserver (nothing pruned) through the main
// resource and the status subresource; kubectl shows the columns.
func TestInstallAndRoundTrip(t *testing.T) {
	env := testenv.Get(t)
	install(t, env)
	install(t, env) // idempotent: the second run updates nothing and still waits for Established
	ns := env.Namespace(t)
	ctx := context.Background()
	api := env.Dynamic.Resource(findingsGVR).Namespace(ns)

	want := finding(ns, "orphan-pvc-ccc")
	created, err := api.Create(ctx, toUnstructured(t, want), metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	if got := fromUnstructured(t, created); got.Status.Phase != "" {
		t.Errorf("create set the status (%q); only the status subresource may write it", got.Status.Phase)
	}
	withStatus := toUnstructured(t, want)
	withStatus.SetResourceVersion(created.GetResourceVersion())
	updated, err := api.UpdateStatus(ctx, withStatus, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("update status: %v", err)
	}
	got := fromUnstructured(t, updated)
	if !apiequality.Semantic.DeepEqual(got.Spec, want.Spec) {
		t.Errorf("spec changed by the apiserver:\n got %+v\nwant %+v", got.Spec, want.Spec)
	}
	if !apiequality.Semantic.DeepEqual(got.Status, want.Status) {
		t.Errorf("status changed by the apiserver:\n got %+v\nwant %+v", got.Status, want.Status)
	}

	out, err := env.Kubectl(t, "get", "findings", "-A")
	if err != nil {
		t.Fatalf("kubectl get findings -A: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	header := strings.Fields(lines[0])
	wantHeader := []string{"NAMESPACE", "NAME", "CHECK", "SUBJECT", "VOLUME", "PHASE", "REASON", "AGE"}
	if strings.Join(header, " ") != strings.Join(wantHeader, " ") {
		t.Errorf("header %v, want %v\n%s", header, wantHeader, out)
	}
	row := ""
	for _, l := range lines[1:] {
		if strings.HasPrefix(l, ns+" ") {
			row = l
		}
	}
	for _, cell := range []string{"orphan-pvc-ccc", "OrphanHotplugVolume", "node-2", "pvc-ccc", "Waiting", "GracePeriod"} {
		if !strings.Contains(row, cell) {
			t.Errorf("row %q lacks %q\n%s", row, cell, out)
		}
	}
	out, err = env.Kubectl(t, "get", "tf", "-n", ns, "-o", "wide")
	if err != nil || !strings.Contains(out, "ACT-AFTER") {
		t.Errorf("kubectl get tf -o wide: %v\n%s", err, out)
	}
}

// TestValidation: the apiserver refuses Findings that the schema forbids,
// with a message naming the field.
func TestValidation(t *testing.T) {
	env := testenv.Get(t)
	install(t, env)
	ns := env.Namespace(t)
	dir := t.TempDir()
	create := func(name, body string) (string, error) {
		p := filepath.Join(dir, name+".yaml")
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return env.Kubectl(t, "create", "-n", ns, "-f", p)
	}

	out, err := create("no-check", `apiVersion: tether.dev/v1alpha1
kind: Finding
metadata: {name: no-check}
spec:
  id: abc
  subject: {kind: VirtualMachineInstance, name: vm-1}
`)
	if err == nil || !strings.Contains(out, "spec.check") || !strings.Contains(out, "Required") {
		t.Errorf("a Finding without spec.check: err %v, output %s", err, out)
	}

	out, err = create("empty-subject", `apiVersion: tether.dev/v1alpha1
kind: Finding
metadata: {name: empty-subject}
spec: {id: abc, check: OrphanHotplugVolume, subject: {kind: VirtualMachineInstance}}
`)
	if err == nil || !strings.Contains(out, "spec.subject.name") {
		t.Errorf("a Finding without subject name: err %v, output %s", err, out)
	}

	if out, err := create("ok", `apiVersion: tether.dev/v1alpha1
kind: Finding
metadata: {name: ok}
spec: {id: abc, check: OrphanHotplugVolume, subject: {kind: VirtualMachineInstance, name: vm-1}, volume: v1}
`); err != nil {
		t.Fatalf("a valid Finding: %v\n%s", err, out)
	}
	out, err = env.Kubectl(t, "patch", "finding", "ok", "-n", ns, "--type=merge", "-p", `{"spec":{"volume":"v2"}}`)
	if err == nil || !strings.Contains(out, "spec is immutable") {
		t.Errorf("changing spec: err %v, output %s", err, out)
	}
	out, err = env.Kubectl(t, "patch", "finding", "ok", "-n", ns, "--subresource=status", "--type=merge", "-p", `{"status":{"phase":"Done"}}`)
	if err == nil || !strings.Contains(out, "status.phase") {
		t.Errorf("an unknown phase: err %v, output %s", err, out)
	}
	out, err = env.Kubectl(t, "patch", "finding", "ok", "-n", ns, "--subresource=status", "--type=merge", "-p", `{"status":{"phase":"Blocked","reason":"VMIMigrating"}}`)
	if err != nil {
		t.Errorf("a valid status: %v\n%s", err, out)
	}
}

// TestInstallUpdatesADrifted: a definition changed in the cluster is put
// back by Install.
func TestInstallUpdatesADrifted(t *testing.T) {
	env := testenv.Get(t)
	install(t, env)
	out, err := env.Kubectl(t, "patch", "crd", crd.Name, "--type=json",
		"-p", `[{"op":"remove","path":"/spec/names/shortNames"}]`)
	if err != nil {
		t.Fatalf("patch: %v\n%s", err, out)
	}
	install(t, env)
	out, err = env.Kubectl(t, "get", "crd", crd.Name, "-o", "jsonpath={.spec.names.shortNames}")
	if err != nil || !strings.Contains(out, "tf") {
		t.Errorf("short names after Install: %q, %v", out, err)
	}
}
