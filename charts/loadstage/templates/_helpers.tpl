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

{{/* What the Kopf framework needs to operate on LoadExperiments. */}}
{{- define "loadstage.frameworkRules" -}}
# Watch LoadExperiments; keep Kopf's finalizer and progress annotations on them (patch).
- apiGroups: [loadstage.io]
  resources: [loadexperiments]
  verbs: [get, list, watch, patch]
# Post Events about LoadExperiments.
- apiGroups: [""]
  resources: [events]
  verbs: [create]
{{- end -}}

{{/* What loadstage itself needs to run experiments. */}}
{{- define "loadstage.experimentRules" -}}
# Write each experiment's status: phase, conditions, stage results.
- apiGroups: [loadstage.io]
  resources: [loadexperiments/status]
  verbs: [get, patch]
# Children are owned by their experiment with blockOwnerDeletion; where OwnerReferencesPermissionEnforcement
# admits them (OpenShift), that needs update on the owner's finalizers subresource, and nothing more.
- apiGroups: [loadstage.io]
  resources: [loadexperiments/finalizers]
  verbs: [update]
# The target: Redis and runner Deployments, reconfigured per variant, deleted by the cleanup policy.
- apiGroups: [apps]
  resources: [deployments]
  verbs: [get, list, create, patch, delete]
# InPlace targets: every HorizontalPodAutoscaler that scales the target Deployment is pinned while the
# experiment runs, and restored. spec.verify: the exported HPA scales a copy of the target, then goes.
- apiGroups: [autoscaling]
  resources: [horizontalpodautoscalers]
  verbs: [get, list, create, patch, delete]
# Whether the target is ready.
- apiGroups: [apps]
  resources: [deployments/status]
  verbs: [get]
# Services of the target and of each stage's Locust master.
- apiGroups: [""]
  resources: [services]
  verbs: [get, list, create, delete]
# One master Job and one worker Job per stage; injectors lost mid-stage are annotated on the worker Job.
- apiGroups: [batch]
  resources: [jobs]
  verbs: [get, list, create, patch, delete]
# Why pods do not come or were restarted: their controllers' FailedCreate Events (a ResourceQuota refusing
# them) and the kubelet's Killing Events (a failed liveness probe). Read only.
- apiGroups: [""]
  resources: [events]
  verbs: [list]
# NetworkPolicies per experiment (spec.networkPolicies): its Redis, Locust masters and target admit only
# the experiment's own pods and the operator.
- apiGroups: [networking.k8s.io]
  resources: [networkpolicies]
  verbs: [get, list, create, delete]
# A disruption budget per running stage, so that a drain waits for it; deleted when the stage ends.
- apiGroups: [policy]
  resources: [poddisruptionbudgets]
  verbs: [get, list, create, delete]
# Whether a stage's Jobs failed.
- apiGroups: [batch]
  resources: [jobs/status]
  verbs: [get]
# Why target pods are not ready, and the master pod's termination message (the stage result),
# watched so that a stage's end is seen at once.
- apiGroups: [""]
  resources: [pods]
  verbs: [get, list, watch]
# The master pod's last log line: the stage's histograms and rows (its artifact).
- apiGroups: [""]
  resources: [pods/log]
  verbs: [get]
# That a custom locustfile's ConfigMap exists; each stage's artifact, kept in a ConfigMap owned by the
# experiment (read back after a restart). Nothing is updated or deleted: garbage collection removes them.
- apiGroups: [""]
  resources: [configmaps]
  verbs: [get, create]
# The target's peak CPU and memory, where metrics-server runs.
- apiGroups: [metrics.k8s.io]
  resources: [pods]
  verbs: [get, list]
{{- if .Values.generatedRedisPasswords.enabled }}
# Each deployed Redis's generated password, in a Secret owned by its experiment. Create only: the operator
# derives a password again from its key, and reads no Secret back.
- apiGroups: [""]
  resources: [secrets]
  verbs: [create]
{{- end }}
{{- with .Values.rbac.redisPasswordSecrets }}
# The Redis password of experiments with spec.redis.passwordSecret, for the sampler (these Secrets only).
- apiGroups: [""]
  resources: [secrets]
  resourceNames: {{ toJson . }}
  verbs: [get]
{{- end }}
{{- end -}}
