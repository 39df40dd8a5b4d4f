{{/*
The controller's RBAC rules, as config/rbac defines them (role.yaml,
protection/role.yaml, storage-remediation/role.yaml). A test renders the
chart and compares every grant with config/ and `tether manifests rbac`.
*/}}

{{/* What a Role can grant: the rules of config/rbac/role.yaml on namespaced kinds. */}}
{{- define "tether.rules.namespaced" -}}
- apiGroups: [kubevirt.io]
  resources: [virtualmachines, virtualmachineinstances]
  verbs: [get, list, watch]
- apiGroups: [""]
  resources: [pods]
  verbs: [get, list, watch]
- apiGroups: [""]
  resources: [persistentvolumeclaims]
  verbs: [get, list, watch]
- apiGroups: [cdi.kubevirt.io]
  resources: [datavolumes]
  verbs: [get, list, watch]
- apiGroups: [subresources.kubevirt.io]
  resources: [virtualmachines/removevolume, virtualmachineinstances/removevolume]
  verbs: [update]
{{ include "tether.rules.records" . }}
- apiGroups: [""]
  resources: [events]
  verbs: [create, patch]
- apiGroups: [events.k8s.io]
  resources: [events]
  verbs: [create, patch]
{{- end }}

{{/* tether's own records. */}}
{{- define "tether.rules.records" -}}
- apiGroups: [tether.dev]
  resources: [findings]
  verbs: [get, list, watch, create, update, patch, delete]
- apiGroups: [tether.dev]
  resources: [findings/status]
  verbs: [get, update, patch]
{{- end }}

{{/* What only a ClusterRole can grant: the KubeVirt CR, wherever it lives. */}}
{{- define "tether.rules.kubevirts" -}}
- apiGroups: [kubevirt.io]
  resources: [kubevirts]
  verbs: [get, list, watch]
{{- end }}

{{/* The storage checks' cluster-wide reads. */}}
{{- define "tether.rules.storageReads" -}}
- apiGroups: [""]
  resources: [nodes, persistentvolumes]
  verbs: [get, list, watch]
- apiGroups: [storage.k8s.io]
  resources: [volumeattachments]
  verbs: [get, list, watch]
- apiGroups: [storage.k8s.io]
  resources: [csidrivers]
  verbs: [list, watch]
{{- end }}

{{/* Protection's finalizer patches (config/rbac/protection). */}}
{{- define "tether.rules.protection" -}}
- apiGroups: [""]
  resources: [persistentvolumeclaims]
  verbs: [get, list, watch, patch]
- apiGroups: [cdi.kubevirt.io]
  resources: [datavolumes]
  verbs: [get, list, watch, patch]
- apiGroups: [apps]
  resources: [controllerrevisions]
  verbs: [get, list, watch, patch]
- apiGroups: [""]
  resources: [namespaces]
  verbs: [get]
{{- end }}

{{/* The storage remediations' writes (config/rbac/storage-remediation). */}}
{{- define "tether.rules.storageRemediation" -}}
- apiGroups: [""]
  resources: [pods]
  verbs: [delete]
- apiGroups: [storage.k8s.io]
  resources: [volumeattachments]
  verbs: [delete, patch]
{{- end }}

{{/* The policy reports the controller writes with --policy-reports, in
both report APIs as config/rbac/policyreports grants them (--report-api
picks one); no cluster kinds when the scope is namespaces. */}}
{{- define "tether.rules.policyReports" -}}
- apiGroups: [wgpolicyk8s.io]
  resources: [policyreports{{ if not (include "tether.namespaced" .) }}, clusterpolicyreports{{ end }}]
  verbs: [get, list, watch, create, update, patch, delete]
- apiGroups: [openreports.io]
  resources: [reports{{ if not (include "tether.namespaced" .) }}, clusterreports{{ end }}]
  verbs: [get, list, watch, create, update, patch, delete]
{{- end }}

{{/* A ClusterRole and its binding to the controller: (list $ name rules). */}}
{{- define "tether.clusterRole" -}}
{{- $ := index . 0 }}
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: {{ index . 1 }}
  labels:
    {{- include "tether.labels" $ | nindent 4 }}
rules:
{{ index . 2 }}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: {{ index . 1 }}
  labels:
    {{- include "tether.labels" $ | nindent 4 }}
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: {{ index . 1 }}
subjects:
{{ include "tether.subject" $ }}
{{- end }}

{{/* A Role and its binding to the controller: (list $ name namespace rules). */}}
{{- define "tether.role" -}}
{{- $ := index . 0 }}
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: {{ index . 1 }}
  namespace: {{ index . 2 }}
  labels:
    {{- include "tether.labels" $ | nindent 4 }}
rules:
{{ index . 3 }}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: {{ index . 1 }}
  namespace: {{ index . 2 }}
  labels:
    {{- include "tether.labels" $ | nindent 4 }}
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: Role
  name: {{ index . 1 }}
subjects:
{{ include "tether.subject" $ }}
{{- end }}
