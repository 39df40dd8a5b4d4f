// Package reportcrds holds minimal, structural definitions of the policy
// report APIs tether writes, for tests against a real API server that has
// neither Kyverno nor Policy Reporter installed:
//
//   - wgpolicyk8s.io/v1alpha2 PolicyReport and ClusterPolicyReport, after
//     the schema Kyverno ships (config/crds/policyreport in kyverno/kyverno,
//     v1.17 line);
//   - openreports.io/v1alpha1 Report and ClusterReport, after
//     openreports/reports-api v0.1 (crd/openreports.io/v1alpha1).
//
// Each keeps every field tether writes with the upstream types, enums and
// required fields, so that the API server rejects what the real CRDs would
// reject; fields tether never writes (scope, scopeSelector, configuration,
// resourceSelector) are left out, and pruning would drop them.
package reportcrds

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tether-dev/tether/internal/report/reportapi"
)

// For returns the namespaced and the cluster-scoped definition of api.
func For(api reportapi.API) []*apiextensionsv1.CustomResourceDefinition {
	ns, cl := api.Kinds()
	nsRes, clRes := api.Resources()
	return []*apiextensionsv1.CustomResourceDefinition{
		define(api, ns, nsRes, apiextensionsv1.NamespaceScoped),
		define(api, cl, clRes, apiextensionsv1.ClusterScoped),
	}
}

func define(api reportapi.API, kind, plural string, scope apiextensionsv1.ResourceScope) *apiextensionsv1.CustomResourceDefinition {
	root := map[string]apiextensionsv1.JSONSchemaProps{
		"apiVersion": str(), "kind": str(), "metadata": {Type: "object"},
		"summary": obj(map[string]apiextensionsv1.JSONSchemaProps{
			"pass": integer(), "fail": integer(), "warn": integer(), "error": integer(), "skip": integer(),
		}),
		"results": {Type: "array", Items: &apiextensionsv1.JSONSchemaPropsOrArray{Schema: ptr(result())}},
	}
	if api == reportapi.OpenReports {
		root["source"] = str()
	}
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: plural + "." + api.Group()},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: api.Group(),
			Names: apiextensionsv1.CustomResourceDefinitionNames{Kind: kind, ListKind: kind + "List", Plural: plural, Singular: lower(kind)},
			Scope: scope,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: api.Version(), Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: ptr(obj(root))},
			}},
		},
	}
}

// result is one result's schema: policy required, result and severity
// enums, the protobuf timestamp with both fields required, resources as
// object references, properties as a string map.
func result() apiextensionsv1.JSONSchemaProps {
	r := obj(map[string]apiextensionsv1.JSONSchemaProps{
		"source": str(), "policy": str(), "rule": str(), "category": str(), "message": str(),
		"scored":   {Type: "boolean"},
		"result":   enum("pass", "fail", "warn", "error", "skip"),
		"severity": enum("critical", "high", "low", "medium", "info"),
		"timestamp": func() apiextensionsv1.JSONSchemaProps {
			t := obj(map[string]apiextensionsv1.JSONSchemaProps{
				"seconds": {Type: "integer", Format: "int64"}, "nanos": {Type: "integer", Format: "int32"},
			})
			t.Required = []string{"nanos", "seconds"}
			return t
		}(),
		"resources": {Type: "array", Items: &apiextensionsv1.JSONSchemaPropsOrArray{Schema: ptr(obj(map[string]apiextensionsv1.JSONSchemaProps{
			"apiVersion": str(), "kind": str(), "name": str(), "namespace": str(), "uid": str(),
			"fieldPath": str(), "resourceVersion": str(),
		}))}},
		"properties": {Type: "object", AdditionalProperties: &apiextensionsv1.JSONSchemaPropsOrBool{Allows: true, Schema: ptr(str())}},
	})
	r.Required = []string{"policy"}
	return r
}

func str() apiextensionsv1.JSONSchemaProps { return apiextensionsv1.JSONSchemaProps{Type: "string"} }
func integer() apiextensionsv1.JSONSchemaProps {
	return apiextensionsv1.JSONSchemaProps{Type: "integer"}
}

func obj(props map[string]apiextensionsv1.JSONSchemaProps) apiextensionsv1.JSONSchemaProps {
	return apiextensionsv1.JSONSchemaProps{Type: "object", Properties: props}
}

func enum(values ...string) apiextensionsv1.JSONSchemaProps {
	s := str()
	for _, v := range values {
		s.Enum = append(s.Enum, apiextensionsv1.JSON{Raw: []byte(`"` + v + `"`)})
	}
	return s
}

func ptr[T any](v T) *T { return &v }

func lower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}
