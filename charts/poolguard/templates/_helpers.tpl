{{/* Namespace of every namespaced object. */}}
{{- define "poolguard.namespace" -}}
{{- .Values.namespace | default .Release.Namespace -}}
{{- end -}}

{{/* The webhook Service the API server calls. */}}
{{- define "poolguard.serviceName" -}}
{{- .Values.webhook.serviceName -}}
{{- end -}}

{{- define "poolguard.image" -}}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) -}}
{{- end -}}

{{/* Labels on every object (and pod template): the kustomize base's, managed by Helm. */}}
{{- define "poolguard.labels" -}}
app.kubernetes.io/name: poolguard
app.kubernetes.io/part-of: poolguard
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{/* metadata labels and annotations of an object: (dict "ctx" $ "component" "x" "labels" (dict ...)). */}}
{{- define "poolguard.meta" -}}
labels:
  {{- include "poolguard.labels" .ctx | nindent 2 }}
  helm.sh/chart: {{ printf "%s-%s" .ctx.Chart.Name .ctx.Chart.Version }}
  {{- with .component }}
  app.kubernetes.io/component: {{ . }}
  {{- end }}
  {{- with .labels }}
  {{- toYaml . | nindent 2 }}
  {{- end }}
annotations:
  poolguard.dev/certificates: {{ .ctx.Values.certificates.source }}
{{- end -}}

{{/* metadata of a pod template. */}}
{{- define "poolguard.podMeta" -}}
labels:
  {{- include "poolguard.labels" .ctx | nindent 2 }}
  app.kubernetes.io/component: {{ .component }}
annotations:
  poolguard.dev/certificates: {{ .ctx.Values.certificates.source }}
{{- end -}}

{{- define "poolguard.selector" -}}
app.kubernetes.io/name: poolguard
app.kubernetes.io/component: {{ . }}
{{- end -}}

{{/* The policy as rendered into the ConfigMap, with `enforcement` applied. */}}
{{- define "poolguard.policy" -}}
{{- $policy := deepCopy .Values.policy -}}
{{- if .Values.enforcement -}}
{{- $scale := get $policy "scaleDown" | default dict -}}
{{- $_ := set $scale "enforcement" .Values.enforcement -}}
{{- $_ := set $policy "scaleDown" $scale -}}
{{- end -}}
{{- toYaml $policy -}}
{{- end -}}

{{/* The restricted-PSS security context shared by every container. */}}
{{- define "poolguard.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: 10001
runAsGroup: 10001
fsGroup: 10001
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{- define "poolguard.containerSecurityContext" -}}
runAsNonRoot: true
runAsUser: 10001
runAsGroup: 10001
readOnlyRootFilesystem: true
allowPrivilegeEscalation: false
privileged: false
capabilities:
  drop: ["ALL"]
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{/* Fail rendering on values that would make a broken install. */}}
{{- define "poolguard.validate" -}}
{{- if not (has .Values.certificates.source (list "self-signed" "cert-manager")) -}}
{{- fail (printf "certificates.source: %q is not one of self-signed, cert-manager" .Values.certificates.source) -}}
{{- end -}}
{{- if and .Values.enforcement (not (has .Values.enforcement (list "dryrun" "warn" "enforce"))) -}}
{{- fail (printf "enforcement: %q is not one of dryrun, warn, enforce" .Values.enforcement) -}}
{{- end -}}
{{- range $name, $hook := .Values.webhooks -}}
{{- if not (has $hook.failurePolicy (list "Ignore" "Fail")) -}}
{{- fail (printf "webhooks.%s.failurePolicy: %q is not one of Ignore, Fail" $name $hook.failurePolicy) -}}
{{- end -}}
{{- if or (lt (int $hook.timeoutSeconds) 1) (gt (int $hook.timeoutSeconds) 30) -}}
{{- fail (printf "webhooks.%s.timeoutSeconds: %v is outside 1-30" $name $hook.timeoutSeconds) -}}
{{- end -}}
{{- end -}}
{{- if and .Values.metrics.serviceMonitor.enabled (not .Values.metrics.service.enabled) -}}
{{- fail "metrics.serviceMonitor.enabled needs metrics.service.enabled (it selects those Services)" -}}
{{- end -}}
{{- end -}}

{{/* `python -m certs sync` arguments shared by the hook Jobs and the renewal CronJob. */}}
{{- define "poolguard.certsSyncArgs" -}}
- sync
{{- range (list "--namespace" (include "poolguard.namespace" .) "--service" (include "poolguard.serviceName" .) "--secret" .Values.certificates.secretName "--days" (toString .Values.certificates.selfSigned.days) "--ca-days" (toString .Values.certificates.selfSigned.caDays)) }}
- {{ . | quote }}
{{- end }}
{{- end -}}
