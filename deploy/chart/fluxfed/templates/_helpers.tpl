{{/*
Object names are fixed, as in deploy/ and the docs (ClusterRole fluxfed-hub-burst, ServiceAccount
fluxfed-hub, ...): one release per cluster.
*/}}

{{/* The mode, checked. */}}
{{- define "fluxfed.mode" -}}
{{- if not (has .Values.mode (list "single" "hub" "member")) -}}
{{- fail (printf "mode must be single, hub or member, not %q" (toString .Values.mode)) -}}
{{- end -}}
{{- .Values.mode -}}
{{- end -}}

{{/* Labels of every object. */}}
{{- define "fluxfed.labels" -}}
app.kubernetes.io/name: fluxfed
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{/* Labels that select the manager's pods. */}}
{{- define "fluxfed.selectorLabels" -}}
app.kubernetes.io/name: fluxfed
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: manager
{{- end -}}

{{/* The rules of a generated role under files/rbac (make chart copies them from deploy/). */}}
{{- define "fluxfed.rules" -}}
{{- $role := .ctx.Files.Get (printf "files/rbac/%s.yaml" .name) | fromYaml -}}
{{- if not $role.rules -}}
{{- fail (printf "files/rbac/%s.yaml has no rules: run make chart" .name) -}}
{{- end -}}
{{- toYaml $role.rules -}}
{{- end -}}

{{/* A subject: ServiceAccount .name in the release namespace. */}}
{{- define "fluxfed.subject" -}}
- kind: ServiceAccount
  name: {{ .name }}
  namespace: {{ .ctx.Release.Namespace }}
{{- end -}}

{{/*
The manager's command: the hub is `/fluxfed manager --hub`; the operator alone (single and
member) is /fluxfed-manager, which has no hub and maps less memory.
*/}}
{{- define "fluxfed.command" -}}
{{- if eq (include "fluxfed.mode" .) "hub" -}}
- /fluxfed
{{- else -}}
- /fluxfed-manager
{{- end -}}
{{- end -}}

{{/* The manager's arguments. */}}
{{- define "fluxfed.args" -}}
{{- $m := .Values.manager -}}
{{- if eq (include "fluxfed.mode" .) "hub" }}
- manager
{{- end }}
{{- if $m.leaderElect }}
- --leader-elect
{{- end }}
{{- with $m.leaderElectionNamespace }}
- --leader-election-namespace={{ . }}
{{- end }}
- --metrics-bind-address={{ if .Values.metrics.enabled }}:{{ .Values.metrics.port }}{{ else }}0{{ end }}
{{- if and .Values.metrics.enabled (not .Values.metrics.secure) }}
- --metrics-secure=false
{{- end }}
- --health-probe-bind-address=:{{ .Values.probes.port }}
{{- with $m.kubeAPIQPS }}
- --kube-api-qps={{ . }}
{{- end }}
{{- with $m.kubeAPIBurst }}
- --kube-api-burst={{ . }}
{{- end }}
{{- with $m.maxConcurrentReconciles }}
- --max-concurrent-reconciles={{ . }}
{{- end }}
{{- with $m.logLevel }}
- --zap-log-level={{ . }}
{{- end }}
{{- if eq (include "fluxfed.mode" .) "hub" }}
{{- $h := .Values.hub }}
- --hub
{{- with $h.name }}
- --hub-name={{ . }}
{{- end }}
- --members-namespace={{ $h.membersNamespace | default .Release.Namespace }}
{{- with $h.dialAllow }}
- --dial-allow={{ join "," . }}
{{- end }}
{{- if $h.skipMemberNamespaces }}
- --skip-member-namespaces
{{- end }}
{{- with $h.leadAddressAllow }}
- --lead-address-allow={{ join "," . }}
{{- end }}
{{- if $h.gateway.enabled }}
- --gateway-bind-address=:{{ $h.gateway.port }}
- --gateway-service={{ .Release.Namespace }}/fluxfed-gateway
{{- end }}
{{- range $flag, $key := dict "member-api-qps" "memberAPIQPS" "member-api-burst" "memberAPIBurst" "member-connect-timeout" "memberConnectTimeout" "member-timeout" "memberTimeout" "member-health-interval" "memberHealthInterval" "member-health-timeout" "memberHealthTimeout" "cleanup-timeout" "cleanupTimeout" "orphan-sweep-interval" "orphanSweepInterval" "flux-interval" "fluxInterval" "flux-interval-max" "fluxIntervalMax" "flux-timeout" "fluxTimeout" "join-timeout" "joinTimeout" "lead-probe-interval" "leadProbeInterval" }}
{{- with index $h $key }}
- --{{ $flag }}={{ . }}
{{- end }}
{{- end }}
{{- end }}
{{- range $m.extraArgs }}
- {{ . | quote }}
{{- end }}
{{- end -}}

{{/*
Who owns an object that lookup returned (.obj; empty when it does not exist), as preflight.yaml
needs it: "" when there is none or it is this release's; "helm:RELEASE:NAMESPACE" for another
Helm release's; "cli:MEMBER" for what `fluxfed member add` installed (its label, annotation or
field manager, fluxfed-cli: FieldOwnerCLI in api/v1alpha2); "other" for anything else.
*/}}
{{- define "fluxfed.owner" -}}
{{- $o := .obj | default dict -}}
{{- if $o.metadata -}}
{{- $labels := $o.metadata.labels | default dict -}}
{{- $ann := $o.metadata.annotations | default dict -}}
{{- $rel := index $ann "meta.helm.sh/release-name" | default "" -}}
{{- $relNS := index $ann "meta.helm.sh/release-namespace" | default "" -}}
{{- $cli := or (eq (index $labels "app.kubernetes.io/managed-by" | default "") "fluxfed-cli") (hasKey $ann "fluxfed.io/member-name") -}}
{{- range $o.metadata.managedFields -}}
{{- if eq .manager "fluxfed-cli" -}}{{- $cli = true -}}{{- end -}}
{{- end -}}
{{- if and $rel (or (ne $rel .ctx.Release.Name) (ne $relNS .ctx.Release.Namespace)) -}}
helm:{{ $rel }}:{{ $relNS }}
{{- else if $rel -}}
{{- else if $cli -}}
cli:{{ index $ann "fluxfed.io/member-name" | default "" }}
{{- else -}}
other
{{- end -}}
{{- end -}}
{{- end -}}

{{/* The field managers that wrote an object lookup returned, for a message. */}}
{{- define "fluxfed.writers" -}}
{{- $names := list -}}
{{- range .metadata.managedFields -}}
{{- if ne .manager "kube-apiserver" -}}
{{- $names = append $names (printf "%q" .manager) -}}
{{- end -}}
{{- end -}}
{{- if $names -}}
field manager {{ $names | uniq | join ", " }}
{{- else -}}
a writer it does not name
{{- end -}}
{{- end -}}
