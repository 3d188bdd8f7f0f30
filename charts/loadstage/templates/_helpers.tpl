{{- define "loadstage.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "loadstage.labels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/component: operator
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "loadstage.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: operator
{{- end -}}

{{- define "loadstage.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "loadstage.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "loadstage.image" -}}
{{- printf "%s:%s" .image.repository (default .root.Chart.AppVersion .image.tag) -}}
{{- end -}}

{{/* Rules loadstage needs in a namespace it watches, beside what Kopf needs. */}}
{{- define "loadstage.rules" -}}
# Kopf: watch LoadExperiments, keep its finalizer and progress annotations, write status.
- apiGroups: [loadstage.io]
  resources: [loadexperiments]
  verbs: [get, list, watch, patch]
- apiGroups: [loadstage.io]
  resources: [loadexperiments/status]
  verbs: [get, patch]
# Kopf and loadstage: Events for every transition and finished stage.
- apiGroups: [""]
  resources: [events]
  verbs: [create]
# loadstage: the target (Redis and runner Deployments and Services), reconfigured per variant.
- apiGroups: [apps]
  resources: [deployments]
  verbs: [get, list, create, patch, delete]
- apiGroups: [apps]
  resources: [deployments/status]
  verbs: [get]
- apiGroups: [""]
  resources: [services]
  verbs: [get, list, create, delete]
# loadstage: one master Job and one worker Job per stage.
- apiGroups: [batch]
  resources: [jobs]
  verbs: [get, list, create, delete]
- apiGroups: [batch]
  resources: [jobs/status]
  verbs: [get]
# loadstage: readiness reasons of target pods, and the master pod's termination message.
- apiGroups: [""]
  resources: [pods]
  verbs: [get, list]
# loadstage: checks that a custom locustfile's ConfigMap exists.
- apiGroups: [""]
  resources: [configmaps]
  verbs: [get]
# loadstage: the target's peak CPU and memory, where metrics-server runs.
- apiGroups: [metrics.k8s.io]
  resources: [pods]
  verbs: [get, list]
{{- with .Values.rbac.redisPasswordSecrets }}
# loadstage: the Redis password of experiments with spec.redis.passwordSecret (these Secrets only).
- apiGroups: [""]
  resources: [secrets]
  resourceNames: {{ toJson . }}
  verbs: [get]
{{- end }}
{{- end -}}
