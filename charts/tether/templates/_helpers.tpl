{{/*
Object names are those of config/ (tether-controller, ...), so that the
docs, the controller's error messages and kubectl commands apply unchanged.
One release per cluster: the ClusterRoles and the admission objects are
cluster-wide.
*/}}
{{- define "tether.name" -}}tether-controller{{- end }}

{{- define "tether.selectorLabels" -}}
app.kubernetes.io/name: tether
app.kubernetes.io/component: controller
{{- end }}

{{- define "tether.commonLabels" -}}
app.kubernetes.io/part-of: tether
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end }}

{{- define "tether.labels" -}}
{{ include "tether.selectorLabels" . }}
{{ include "tether.commonLabels" . }}
{{- end }}

{{/* namespaced is "true" when scope.namespaces limits the controller. */}}
{{- define "tether.namespaced" -}}
{{- if .Values.scope.namespaces }}true{{ end }}
{{- end }}

{{- define "tether.subject" -}}
- kind: ServiceAccount
  name: {{ include "tether.name" . }}
  namespace: {{ .Release.Namespace }}
{{- end }}

{{/* The storage checks enabled in the values, as a list. */}}
{{- define "tether.storageChecks" -}}
{{- $on := list }}
{{- range $name := list "StaleVolumeAttachment" "MultiAttachConflict" "BlockedDeletion" }}
{{- if (index $.Values.checks $name | default dict).enabled }}{{ $on = append $on $name }}{{ end }}
{{- end }}
{{- join "," $on }}
{{- end }}

{{/*
validate refuses combinations the controller would refuse at start, or that
would leave it without the rights it needs, naming the values to change.
*/}}
{{- define "tether.validate" -}}
{{- $v := .Values }}
{{- if and (include "tether.namespaced" .) (include "tether.storageChecks" .) }}
{{- fail (printf "checks %s read cluster-wide (Nodes, VolumeAttachments, PVs, pods on a node): they cannot run with scope.namespaces set; disable them or empty scope.namespaces" (include "tether.storageChecks" .)) }}
{{- end }}
{{- if and (include "tether.namespaced" .) $v.storageRemediation.enabled }}
{{- fail "storageRemediation.enabled needs the cluster-wide RBAC of the storage checks: empty scope.namespaces, or set storageRemediation.enabled: false" }}
{{- end }}
{{- if and $v.storage.forceDetach (not $v.storageRemediation.enabled) }}
{{- fail "storage.forceDetach needs the rights of storageRemediation: set storageRemediation.enabled: true, or storage.forceDetach: false" }}
{{- end }}
{{- if and $v.protection.webhook.enabled (not $v.protection.enabled) }}
{{- fail "protection.webhook.enabled needs protection.enabled: true (the controller refuses to serve the webhook without protection)" }}
{{- end }}
{{- if and $v.protection.webhook.enabled (not $v.protection.webhook.certManager) (not $v.protection.webhook.caBundle) }}
{{- fail "protection.webhook.certManager is false: set protection.webhook.caBundle to the base64 PEM of the CA of the certificate in protection.webhook.secretName" }}
{{- end }}
{{- if and (gt (int $v.replicas) 1) (not $v.leaderElection.enabled) }}
{{- fail (printf "replicas is %d and leaderElection.enabled is false: every replica would act; set leaderElection.enabled: true or replicas: 1" (int $v.replicas)) }}
{{- end }}
{{- if and $v.tenantAuthoritative (not $v.tenants) }}
{{- fail "tenantAuthoritative needs at least one entry in tenants" }}
{{- end }}
{{- if and $v.checks.TenantNodeDown $v.checks.TenantNodeDown.enabled (not $v.tenants) }}
{{- fail "checks.TenantNodeDown.enabled fences tenant nodes and needs at least one entry in tenants (each with config/rbac/tenant-fencer.yaml bound in its cluster)" }}
{{- end }}
{{- end }}
