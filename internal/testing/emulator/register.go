package emulator

import (
	"context"
	"encoding/base64"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/tether-dev/tether/internal/testing/emulator/apiserver"
)

// APIServiceName is the name of the APIService the emulator registers.
const APIServiceName = apiserver.Version + "." + apiserver.Group

var apiServiceGVK = schema.GroupVersionKind{Group: "apiregistration.k8s.io", Version: "v1", Kind: "APIService"}

// register points the aggregator at the emulator: an ExternalName Service
// (localhost, the listener's port) and the APIService with our CA bundle.
func (e *Emulator) register(ctx context.Context) error {
	port := int32(e.Port())
	svc := &corev1.Service{}
	svc.Namespace, svc.Name = e.o.Namespace, e.o.ServiceName
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		err := e.client.Get(ctx, client.ObjectKeyFromObject(svc), svc)
		if apierrors.IsNotFound(err) {
			svc.ResourceVersion = ""
			setServiceSpec(svc, port)
			return e.client.Create(ctx, svc)
		}
		if err != nil {
			return err
		}
		if svc.Spec.Type != corev1.ServiceTypeExternalName {
			// A Service cannot switch to ExternalName while it has a cluster IP.
			if err := e.client.Delete(ctx, svc); err != nil && !apierrors.IsNotFound(err) {
				return err
			}
			return apierrors.NewConflict(schema.GroupResource{Resource: "services"}, svc.Name, fmt.Errorf("recreating"))
		}
		setServiceSpec(svc, port)
		return e.client.Update(ctx, svc)
	})
	if err != nil {
		return fmt.Errorf("emulator: service %s/%s: %w", e.o.Namespace, e.o.ServiceName, err)
	}

	spec := map[string]any{
		"group":                apiserver.Group,
		"version":              apiserver.Version,
		"groupPriorityMinimum": int64(1000),
		"versionPriority":      int64(15),
		"caBundle":             base64.StdEncoding.EncodeToString(e.certs.CAPEM),
		"service": map[string]any{
			"name":      e.o.ServiceName,
			"namespace": e.o.Namespace,
			"port":      int64(port),
		},
	}
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		as := &unstructured.Unstructured{}
		as.SetGroupVersionKind(apiServiceGVK)
		err := e.client.Get(ctx, client.ObjectKey{Name: APIServiceName}, as)
		if apierrors.IsNotFound(err) {
			as = &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
			as.SetGroupVersionKind(apiServiceGVK)
			as.SetName(APIServiceName)
			as.SetLabels(map[string]string{"app.kubernetes.io/managed-by": "kubevirt-emulator"})
			return e.client.Create(ctx, as)
		}
		if err != nil {
			return err
		}
		as.Object["spec"] = spec
		return e.client.Update(ctx, as)
	})
	if err != nil {
		return fmt.Errorf("emulator: APIService %s: %w", APIServiceName, err)
	}
	return nil
}

func setServiceSpec(svc *corev1.Service, port int32) {
	if svc.Labels == nil {
		svc.Labels = map[string]string{}
	}
	svc.Labels["app.kubernetes.io/managed-by"] = "kubevirt-emulator"
	svc.Spec.Type = corev1.ServiceTypeExternalName
	svc.Spec.ExternalName = "localhost"
	svc.Spec.Ports = []corev1.ServicePort{{
		Name: "https", Protocol: corev1.ProtocolTCP, Port: port, TargetPort: intstr.FromInt32(port),
	}}
}

// waitAvailable waits until the APIService reports Available=True.
func (e *Emulator) waitAvailable(ctx context.Context) error {
	var last string
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, e.o.AvailableTimeout, true,
		func(ctx context.Context) (bool, error) {
			as := &unstructured.Unstructured{}
			as.SetGroupVersionKind(apiServiceGVK)
			if err := e.client.Get(ctx, client.ObjectKey{Name: APIServiceName}, as); err != nil {
				last = err.Error()
				return false, nil
			}
			conds, _, _ := unstructured.NestedSlice(as.Object, "status", "conditions")
			for _, c := range conds {
				m, _ := c.(map[string]any)
				if m["type"] == "Available" {
					if m["status"] == "True" {
						return true, nil
					}
					last = fmt.Sprintf("%v: %v", m["reason"], m["message"])
				}
			}
			return false, nil
		})
	if err != nil {
		return fmt.Errorf("emulator: APIService %s not available (%s): %w", APIServiceName, last, err)
	}
	return nil
}

// Unregister deletes the APIService and its Service, so that the apiserver
// stops proxying to an emulator that is gone. Call it before Stop when the
// cluster outlives the emulator.
func (e *Emulator) Unregister(ctx context.Context) error {
	as := &unstructured.Unstructured{}
	as.SetGroupVersionKind(apiServiceGVK)
	as.SetName(APIServiceName)
	if err := e.client.Delete(ctx, as); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	svc := &corev1.Service{}
	svc.Namespace, svc.Name = e.o.Namespace, e.o.ServiceName
	if err := e.client.Delete(ctx, svc); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	return nil
}
