{{/* Names and labels. */}}
{{- define "tenancy.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "tenancy.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else if contains "tenancy" .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name (include "tenancy.name" .) | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}

{{- define "tenancy.selectorLabels" -}}
app.kubernetes.io/name: {{ include "tenancy.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: scheduler
{{- end }}

{{- define "tenancy.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "tenancy.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: jupyterhub-tenancy
{{- end }}

{{- define "tenancy.cullerSelectorLabels" -}}
app.kubernetes.io/name: {{ include "tenancy.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: idle-culler
{{- end }}

{{- define "tenancy.cullerLabels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "tenancy.cullerSelectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: jupyterhub-tenancy
{{- end }}

{{- define "tenancy.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "tenancy.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* The hub side. */}}
{{- define "tenancy.servicePrefix" -}}
{{- printf "%s/services/%s/" (trimSuffix "/" .Values.hub.baseUrl) .Values.hub.serviceName }}
{{- end }}

{{- define "tenancy.tokenSecretName" -}}
{{- default (printf "%s-hub-token" (include "tenancy.fullname" .)) .Values.hub.existingSecret }}
{{- end }}

{{- define "tenancy.tokenSecretKey" -}}
{{- if .Values.hub.existingSecret }}{{ .Values.hub.existingSecretKey }}{{ else }}api-token{{ end }}
{{- end }}

{{/* The database. */}}
{{- define "tenancy.sqlite" -}}
{{- not (or .Values.database.url .Values.database.urlSecret) }}
{{- end }}

{{- define "tenancy.claimName" -}}
{{- default (printf "%s-db" (include "tenancy.fullname" .)) .Values.persistence.existingClaim }}
{{- end }}

{{/* The quota tree. */}}
{{- define "tenancy.treeNamespace" -}}
{{- default .Release.Namespace .Values.quotaTree.namespace }}
{{- end }}

{{- define "tenancy.treeObject" -}}
{{- if eq .Values.quotaTree.clusterObject "-" }}
{{- else if .Values.quotaTree.clusterObject }}{{ .Values.quotaTree.clusterObject }}
{{- else if and .Values.quotaTree.spec (eq .Values.quotaTree.storage "object") }}
{{- printf "%s/%s" (include "tenancy.treeNamespace" .) .Values.quotaTree.name }}
{{- else }}kube-system/
{{- end }}
{{- end }}

{{/* A value as a Python expression: True/False/None, a JSON string or number, or
     json.loads("...") for lists and dicts (helm's quote is Go's %q: a valid Python literal). */}}
{{- define "tenancy.py" -}}
{{- if kindIs "bool" . }}{{ ternary "True" "False" . }}
{{- else if kindIs "invalid" . }}None
{{- else if or (kindIs "map" .) (kindIs "slice" .) }}json.loads({{ toJson . | quote }})
{{- else }}{{ toJson . }}
{{- end }}
{{- end }}

{{/* Cluster-scoped names hold the namespace: one release per namespace may share a cluster. */}}
{{- define "tenancy.clusterRoleName" -}}
{{- printf "%s-%s" (include "tenancy.fullname" .) .Release.Namespace | trunc 63 | trimSuffix "-" }}
{{- end }}
