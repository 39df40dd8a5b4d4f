package realhandler

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var vmiGVR = schema.GroupVersionResource{Group: "kubevirt.io", Version: "v1", Resource: "virtualmachineinstances"}

func TestBoot_aVMIRunsOnTheRealNode(t *testing.T) {
	env := get(t)
	ctx := context.Background()
	vmi := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance",
		"metadata": map[string]any{"name": "boot", "namespace": "default"},
		"spec": map[string]any{
			"nodeSelector": map[string]any{"kubernetes.io/hostname": env.Node.Name},
			"domain": map[string]any{
				"devices":   map[string]any{"autoattachPodInterface": false, "disks": []any{map[string]any{"name": "scratch", "disk": map[string]any{"bus": "virtio"}}}},
				"resources": map[string]any{"requests": map[string]any{"memory": "128Mi"}},
			},
			"volumes": []any{map[string]any{"name": "scratch", "emptyDisk": map[string]any{"capacity": "16Mi"}}},
		},
	}}
	if _, err := env.Dynamic.Resource(vmiGVR).Namespace("default").Create(ctx, vmi, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Minute)
	for time.Now().Before(deadline) {
		got, err := env.Dynamic.Resource(vmiGVR).Namespace("default").Get(ctx, "boot", metav1.GetOptions{})
		if err == nil {
			phase, _, _ := unstructured.NestedString(got.Object, "status", "phase")
			t.Logf("phase %s", phase)
			if phase == "Running" {
				return
			}
			if phase == "Failed" {
				t.Fatalf("VMI failed: %v\n%s", got.Object["status"], podLogs(env, "default", "virt-launcher-boot"))
			}
		}
		time.Sleep(5 * time.Second)
	}
	t.Fatal("VMI did not run")
}
