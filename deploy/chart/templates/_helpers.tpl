{{/* Names. The defaults are those of deploy/ (and upstream's manifests), so
the chart and the kustomize manifests are interchangeable. */}}
{{- define "ccm.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "ccm.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- include "ccm.name" . -}}
{{- end -}}
{{- end -}}

{{- define "ccm.serviceAccountName" -}}
{{- default "cloud-controller-manager" .Values.serviceAccount.name -}}
{{- end -}}

{{- define "ccm.clusterRoleName" -}}
{{- default (include "ccm.fullname" .) .Values.clusterRole.name -}}
{{- end -}}

{{- define "ccm.configSecretName" -}}
{{- default "metal-cloud-config" .Values.configSecret.name -}}
{{- end -}}

{{- define "ccm.policiesConfigMap" -}}
{{- if .Values.policies.create -}}metal-ccm-policies{{- else -}}{{ .Values.policies.existingConfigMap }}{{- end -}}
{{- end -}}

{{- define "ccm.selectorLabels" -}}
app.kubernetes.io/name: {{ include "ccm.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "ccm.labels" -}}
{{ include "ccm.selectorLabels" . }}
app.kubernetes.io/part-of: cloud-provider-equinix-metal
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end -}}

{{- define "ccm.subject" -}}
- kind: ServiceAccount
  name: {{ include "ccm.serviceAccountName" . }}
  namespace: {{ .Release.Namespace }}
{{- end -}}

{{/* ccm.lb: the load balancer as a dict {mode, namespace, configMap, env}.
An explicit loadBalancer.mode wins and sets METAL_LOAD_BALANCER (env); an
empty mode reads config.loadbalancer (as upstream's chart passes it), so
`helm upgrade` from upstream's chart gets the RBAC its value needs. */}}
{{- define "ccm.lb" -}}
{{- $lb := .Values.loadBalancer -}}
{{- $ns := $lb.metallb.namespace | default "metallb-system" -}}
{{- $cm := $lb.metallb.configMap | default "config" -}}
{{- $out := dict "mode" $lb.mode "namespace" $ns "configMap" $cm "env" "" -}}
{{- if and $lb.metallb.bgpType (ne $lb.mode "metallb") -}}
{{- fail (printf "loadBalancer.metallb.bgpType is for loadBalancer.mode metallb only (mode is %q): with an empty mode put ?bgpType=%s on config.loadbalancer" $lb.mode $lb.metallb.bgpType) -}}
{{- end -}}
{{- if eq $lb.mode "metallb" -}}
{{- $_ := set $out "env" (printf "metallb:///%s" $ns) -}}
{{- with $lb.metallb.bgpType -}}{{- $_ := set $out "env" (printf "metallb:///%s?bgpType=%s" $ns .) -}}{{- end -}}
{{- else if eq $lb.mode "metallb-legacy" -}}
{{- $_ := set $out "env" (printf "metallb:///%s/%s" $ns $cm) -}}
{{- else if eq $lb.mode "kube-vip" -}}
{{- $_ := set $out "env" "kube-vip://" -}}
{{- else if eq $lb.mode "module" -}}
{{- $_ := set $out "env" (required "loadBalancer.module.url is required with loadBalancer.mode module (wasm:///etc/ccm/modules/<name>.wasm or wasm+oci://<registry>/<repo>@sha256:<digest>)" $lb.module.url) -}}
{{- $_ := set $out "namespace" $lb.module.namespace -}}
{{- else -}}
{{- $url := (.Values.config.loadbalancer | default "") | toString -}}
{{- if hasPrefix "metallb://" $url -}}
{{- $path := regexReplaceAll "^metallb:///?" (regexReplaceAll "\\?.*$" $url "") "" -}}
{{- $parts := splitList "/" (trimAll "/" $path) -}}
{{- if and (ne (trimAll "/" $path) "") (gt (len $parts) 0) -}}{{- $_ := set $out "namespace" (index $parts 0) -}}{{- end -}}
{{- if gt (len $parts) 1 -}}
{{- $_ := set $out "mode" "metallb-legacy" -}}{{- $_ := set $out "configMap" (index $parts 1) -}}
{{- else if contains "crdConfiguration=false" $url -}}
{{- $_ := set $out "mode" "metallb-legacy" -}}{{- $_ := set $out "configMap" "config" -}}
{{- else -}}
{{- $_ := set $out "mode" "metallb" -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- toJson $out -}}
{{- end -}}

{{/* ccm.configSetByChart: refuses the cloud-sa.json fields that the chart
sets with a --metal-* flag (deployment.yaml's args): a flag wins over
cloud-sa.json, so a value under config would be ignored without a word.
values.schema.json lists them (it lists every field the CCM reads), with
the same advice in their descriptions. */}}
{{- define "ccm.configSetByChart" -}}
{{- $setByChart := dict
  "policyDir" (list "metal-policy-dir" "put policies in policies.files or name policies.existingConfigMap")
  "moduleCacheDir" (list "metal-module-cache-dir" "the cache is an emptyDir at /var/cache/ccm, sized by modules.cacheSizeLimit")
  "moduleMemoryLimitMiB" (list "metal-module-memory-limit-mib" "set modules.memoryLimitMiB instead")
  "moduleTimeout" (list "metal-module-timeout" "set modules.timeout instead")
  "readinessAddress" (list "metal-readiness-address" "the readiness probe asks :10270")
-}}
{{- range $key, $flag := $setByChart -}}
{{- if hasKey ($.Values.config | default dict) $key -}}
{{- fail (printf "config.%s is set by the chart as --%s, which wins over cloud-sa.json: %s" $key (index $flag 0) (index $flag 1)) -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* ccm.metricsServerName: the name the secure port's certificate
(metrics.tls.secretName) is for and the ServiceMonitor verifies. */}}
{{- define "ccm.metricsServerName" -}}
{{- .Values.metrics.tls.serverName | default (printf "%s-metrics.%s.svc" (include "ccm.fullname" .) .Release.Namespace) -}}
{{- end -}}
