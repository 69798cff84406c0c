{{/* Namespace of every namespaced object. */}}
{{- define "poolguard.namespace" -}}
{{- .Values.namespace | default .Release.Namespace -}}
{{- end -}}

{{/* The webhook Service the API server calls. */}}
{{- define "poolguard.serviceName" -}}
{{- .Values.webhook.serviceName | default (printf "%s-webhook" (include "poolguard.fullname" .)) -}}
{{- end -}}

{{/* app.kubernetes.io/name of every object: nameOverride, else the chart's name. */}}
{{- define "poolguard.name" -}}
{{- .Values.nameOverride | default .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The prefix of every object's name (poolguard-webhook, ...): fullnameOverride, else the
name. Not the release name: poolguard is one install per cluster (its webhook configurations
are cluster-wide), and the kustomize manifests use the same fixed names. */}}
{{- define "poolguard.fullname" -}}
{{- .Values.fullnameOverride | default (include "poolguard.name" .) | trunc 40 | trimSuffix "-" -}}
{{- end -}}

{{/* registry/repository, then @digest if set (a digest wins over the tag), else :tag. */}}
{{- define "poolguard.image" -}}
{{- $repo := .Values.image.repository -}}
{{- with .Values.image.registry }}{{ $repo = printf "%s/%s" . $repo }}{{ end -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" $repo .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" $repo (.Values.image.tag | default .Chart.AppVersion) -}}
{{- end -}}
{{- end -}}

{{/* Labels on every object (and pod template): the kustomize base's, managed by Helm, and
commonLabels (which cannot replace these). */}}
{{- define "poolguard.labels" -}}
{{- $base := dict "app.kubernetes.io/name" (include "poolguard.name" .) "app.kubernetes.io/part-of" "poolguard" "app.kubernetes.io/version" .Chart.AppVersion "app.kubernetes.io/managed-by" .Release.Service -}}
{{- toYaml (merge $base (deepCopy (.Values.commonLabels | default dict))) -}}
{{- end -}}

{{/* metadata labels and annotations of an object:
(dict "ctx" $ "component" "x" "labels" (dict ...) "annotations" (dict ...)).
The chart's own labels win over `labels`, which win over nothing else. */}}
{{- define "poolguard.meta" -}}
{{- $own := dict "helm.sh/chart" (printf "%s-%s" .ctx.Chart.Name .ctx.Chart.Version) -}}
{{- with .component }}{{ $_ := set $own "app.kubernetes.io/component" . }}{{ end -}}
{{- $labels := merge $own (fromYaml (include "poolguard.labels" .ctx)) (deepCopy (.labels | default dict)) -}}
{{- $annotations := merge (dict "poolguard.dev/certificates" .ctx.Values.certificates.source) (deepCopy (.annotations | default dict)) -}}
labels:
  {{- toYaml $labels | nindent 2 }}
annotations:
  {{- toYaml $annotations | nindent 2 }}
{{- end -}}

{{/* metadata of a pod template: (dict "ctx" $ "component" "x" "values" .Values.webhook);
the component's podLabels and podAnnotations cannot replace the chart's own. */}}
{{- define "poolguard.podMeta" -}}
{{- $values := .values | default dict -}}
{{- $labels := merge (dict "app.kubernetes.io/component" .component) (fromYaml (include "poolguard.labels" .ctx)) (deepCopy ($values.podLabels | default dict)) -}}
{{- $annotations := merge (dict "poolguard.dev/certificates" .ctx.Values.certificates.source) (deepCopy ($values.podAnnotations | default dict)) -}}
labels:
  {{- toYaml $labels | nindent 2 }}
annotations:
  {{- toYaml $annotations | nindent 2 }}
{{- end -}}

{{/* The labels a component's Deployment, Services and PDB select: (dict "ctx" $ "component" "x"). */}}
{{- define "poolguard.selector" -}}
app.kubernetes.io/name: {{ include "poolguard.name" .ctx }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{/* The policy as rendered into the ConfigMap, with `enforcement` applied. */}}
{{- define "poolguard.policy" -}}
{{- $policy := deepCopy .Values.policy -}}
{{- if .Values.enforcement -}}
{{- $scale := get $policy "scaleDown" | default dict -}}
{{- $_ := set $scale "enforcement" .Values.enforcement -}}
{{- $_ := set $policy "scaleDown" $scale -}}
{{- end -}}
{{- include "poolguard.policyRules" $policy -}}
{{- toYaml $policy -}}
{{- end -}}

{{/*
The policy's rules across fields, which values.schema.json (generated from the policy
model: `make chart-schema`) cannot express; `serve` refuses such a policy at start, so the
chart refuses it here rather than render webhook pods that would never start.
*/}}
{{- define "poolguard.policyRules" -}}
{{- $pools := .pools | default list -}}
{{- $names := list -}}
{{- range $i, $pool := $pools -}}
{{- if has $pool.name $names -}}
{{- fail (printf "policy.pools[%d].name: duplicate pool %q" $i $pool.name) -}}
{{- end -}}
{{- $names = append $names $pool.name -}}
{{- end -}}
{{- $unprotected := list (list "defaultDeletionCost" (float64 (.defaultDeletionCost | default 0))) -}}
{{- range $i, $pool := $pools -}}
{{- if not $pool.protected -}}
{{- $unprotected = append $unprotected (list (printf "pools[%d] (%q)" $i $pool.name) (float64 $pool.deletionCost)) -}}
{{- end -}}
{{- end -}}
{{- range $i, $pool := $pools -}}
{{- if $pool.protected -}}
{{- range $other := $unprotected -}}
{{- if lt (float64 $pool.deletionCost) (index $other 1) -}}
{{- fail (printf "policy.pools[%d].deletionCost: protected pool %q has cost %v, lower than %v of %s; the ReplicaSet controller deletes lower costs first, so give protected pools the highest costs" $i $pool.name $pool.deletionCost (index $other 1) (index $other 0)) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- $scale := .scaleDown | default dict -}}
{{- $exempt := $scale.exemptUsers | default list -}}
{{- $autoscalers := $scale.autoscalers | default dict -}}
{{- range $i, $user := $autoscalers.users | default list -}}
{{- if has $user $exempt -}}
{{- fail (printf "policy.scaleDown.autoscalers.users[%d]: %q is also in scaleDown.exemptUsers, whose requests are never checked, so it would never be clamped; list it in one of the two" $i $user) -}}
{{- end -}}
{{- end -}}
{{- $gitOps := $scale.gitOps | default dict -}}
{{- range $i, $user := $gitOps.users | default list -}}
{{- if has $user $exempt -}}
{{- fail (printf "policy.scaleDown.gitOps.users[%d]: %q is also in scaleDown.exemptUsers, whose requests are never checked, so its enforcement would never apply; list it in one of the two" $i $user) -}}
{{- end -}}
{{- if has $user ($autoscalers.users | default list) -}}
{{- fail (printf "policy.scaleDown.gitOps.users[%d]: %q is also in scaleDown.autoscalers.users, which has an enforcement of its own; list it in one of the two" $i $user) -}}
{{- end -}}
{{- end -}}
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
{{- if and .Values.metrics.serviceMonitor.enabled .Values.metrics.podMonitor.enabled -}}
{{- fail "metrics.serviceMonitor.enabled and metrics.podMonitor.enabled: choose one (both would scrape every pod twice)" -}}
{{- end -}}
{{- range $component := list "webhook" "reconciler" -}}
{{- $pdb := (get $.Values $component).podDisruptionBudget -}}
{{- if and $pdb.enabled (kindIs "invalid" $pdb.maxUnavailable) (kindIs "invalid" $pdb.minAvailable) -}}
{{- fail (printf "%s.podDisruptionBudget: set minAvailable or maxUnavailable" $component) -}}
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

{{/* Scheduling of a component's pods: (dict "ctx" $ "values" .Values.webhook). affinity and
topologySpreadConstraints go through `tpl`, so their label selectors can name the chart's
labels ({{ include "poolguard.name" . }}) and follow nameOverride. */}}
{{- define "poolguard.podScheduling" -}}
{{- with .values.priorityClassName }}
priorityClassName: {{ . }}
{{- end }}
{{- with .values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .values.affinity }}
affinity:
  {{- tpl (toYaml .) $.ctx | nindent 2 }}
{{- end }}
{{- with .values.topologySpreadConstraints }}
topologySpreadConstraints:
  {{- tpl (toYaml .) $.ctx | nindent 2 }}
{{- end }}
{{- end -}}

{{/* A component's PodDisruptionBudget: (dict "ctx" $ "component" "x" "values" <its podDisruptionBudget>).
maxUnavailable, when set, replaces minAvailable (the API takes only one of them). */}}
{{- define "poolguard.pdb" -}}
{{- if .values.enabled }}
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: {{ include "poolguard.fullname" .ctx }}-{{ .component }}
  namespace: {{ include "poolguard.namespace" .ctx }}
  {{- include "poolguard.meta" (dict "ctx" .ctx "component" .component) | nindent 2 }}
spec:
  {{- if not (kindIs "invalid" .values.maxUnavailable) }}
  maxUnavailable: {{ .values.maxUnavailable }}
  {{- else }}
  minAvailable: {{ .values.minAvailable }}
  {{- end }}
  {{- with .values.unhealthyPodEvictionPolicy }}
  unhealthyPodEvictionPolicy: {{ . }}
  {{- end }}
  selector:
    matchLabels:
      {{- include "poolguard.selector" (dict "ctx" .ctx "component" .component) | nindent 6 }}
{{- end }}
{{- end -}}


{{/* interval, scrapeTimeout and relabelings of a ServiceMonitor or PodMonitor endpoint. */}}
{{- define "poolguard.scrapeSettings" -}}
interval: {{ .interval }}
{{- with .scrapeTimeout }}
scrapeTimeout: {{ . }}
{{- end }}
{{- with .relabelings }}
relabelings:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .metricRelabelings }}
metricRelabelings:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/* A component's resources with the memory the sizing table gives for expectedPods:
(dict "resources" <its resources> "pods" .Values.expectedPods "component" "webhook|reconciler").
The figures are docs/performance.md "Sizing", in MiB: fixed, per cache, per 10,000 pods
(webhook/cluster/memory_budget.py holds the same; tests/deploy/test_chart.py compares
them). The webhook counts one cache (serve's default of one worker). The request is the
need, the limit the need over 0.9 (the share past which poolguard warns), each rounded up
to 64Mi. A memory request or limit set in resources is kept as it is. */}}
{{- define "poolguard.resources" -}}
{{- $figures := get (dict "webhook" (list 50 45 60) "reconciler" (list 0 60 60)) .component -}}
{{- $need := add (index $figures 0) (index $figures 1) (div (mul (int64 .pods) (index $figures 2)) 10000) -}}
{{- $resources := deepCopy (.resources | default dict) -}}
{{- $requests := get $resources "requests" | default dict -}}
{{- if not (hasKey $requests "memory") -}}
{{- $_ := set $requests "memory" (printf "%dMi" (mul (div (add $need 63) 64) 64)) -}}
{{- end -}}
{{- $limits := get $resources "limits" | default dict -}}
{{- if not (hasKey $limits "memory") -}}
{{- $_ := set $limits "memory" (printf "%dMi" (mul (div (add (mul $need 10) 575) 576) 64)) -}}
{{- end -}}
{{- $_ := set $resources "requests" $requests -}}
{{- $_ := set $resources "limits" $limits -}}
{{- toYaml $resources -}}
{{- end -}}
