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

{{/* ccm.lb: the load balancer as a dict {mode, namespace, configMap, env,
url}. The URL can come from four places, in the CCM's precedence (flag >
environment > cloud-sa.json): --metal-load-balancer in additionalCommands,
loadBalancer.mode (which sets METAL_LOAD_BALANCER: env), env.METAL_LOAD_BALANCER
(upstream's first documented way), config.loadbalancer (as upstream's chart
passes it). Two that differ are refused, naming both: the CCM would run one
and ignore the other without a word. Whichever it comes from, the URL
decides the RBAC, so `helm upgrade` from upstream's chart gets the rights
its value needs. A module's URL (wasm:///, wasm+oci://) is checked here
too, wherever it comes from. */}}
{{- define "ccm.lb" -}}
{{- $lb := .Values.loadBalancer -}}
{{- $ns := $lb.metallb.namespace | default "metallb-system" -}}
{{- $cm := $lb.metallb.configMap | default "config" -}}
{{- $out := dict "mode" $lb.mode "namespace" $ns "configMap" $cm "env" "" "url" "" -}}
{{- if and $lb.metallb.bgpType (ne $lb.mode "metallb") -}}
{{- fail (printf "loadBalancer.metallb.bgpType is for loadBalancer.mode metallb only (mode is %q): with an empty mode put ?bgpType=%s on config.loadbalancer" $lb.mode $lb.metallb.bgpType) -}}
{{- end -}}
{{- if and $lb.module.url (ne $lb.mode "module") -}}
{{- fail (printf "loadBalancer.module.url is for loadBalancer.mode module only (mode is %q), and would be ignored: set loadBalancer.mode to module" $lb.mode) -}}
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
{{- end -}}
{{- /* The sources, highest precedence first: {url, desc}, desc naming the value. */ -}}
{{- $sources := list -}}
{{- $args := .Values.additionalCommands | default list -}}
{{- range $i, $arg := $args -}}
{{- $arg = toString $arg -}}
{{- if and (hasPrefix "--metal-load-balancer=" $arg) (ne $arg "--metal-load-balancer=") -}}
{{- $sources = append $sources (dict "url" (trimPrefix "--metal-load-balancer=" $arg) "desc" (printf "additionalCommands %s" $arg)) -}}
{{- else if and (eq $arg "--metal-load-balancer") (lt (add1 $i) (len $args)) -}}
{{- $sources = append $sources (dict "url" (index $args (add1 $i) | toString) "desc" (printf "additionalCommands --metal-load-balancer %s" (index $args (add1 $i) | toString))) -}}
{{- end -}}
{{- end -}}
{{- with $out.env -}}
{{- if eq $lb.mode "module" -}}
{{- $sources = append $sources (dict "url" . "desc" (printf "loadBalancer.module.url %s" .)) -}}
{{- else -}}
{{- $sources = append $sources (dict "url" . "desc" (printf "loadBalancer.mode %s (METAL_LOAD_BALANCER=%s)" $lb.mode .)) -}}
{{- end -}}
{{- end -}}
{{- $userEnv := .Values.env | default dict -}}
{{- with index $userEnv "METAL_LOAD_BALANCER" | default "" | toString -}}
{{- /* empty is unset, to the CCM as to upstream */ -}}
{{- $sources = append $sources (dict "url" . "desc" (printf "env.METAL_LOAD_BALANCER %s" .)) -}}
{{- end -}}
{{- with (.Values.config | default dict).loadbalancer -}}
{{- $sources = append $sources (dict "url" (toString .) "desc" (printf "config.loadbalancer %s" .)) -}}
{{- end -}}
{{- range $sources -}}
{{- $first := index $sources 0 -}}
{{- if ne .url $first.url -}}
{{- fail (printf "%s and %s choose different load balancers; the CCM would run the first (flag > environment > cloud-sa.json) and ignore the second: choose it in one place (remove one of them, or make them equal)" $first.desc .desc) -}}
{{- end -}}
{{- end -}}
{{- $url := "" -}}
{{- $source := "" -}}
{{- with $sources -}}{{- $url = (index . 0).url -}}{{- $source = (index . 0).desc -}}{{- end -}}
{{- $_ := set $out "url" $url -}}
{{- if and (not $lb.mode) (hasPrefix "metallb://" $url) -}}
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
{{- if regexMatch "^wasm(\\+oci)?:" $url -}}
{{- include "ccm.module" (dict "Values" $.Values "url" $url "source" $source "out" $out) -}}
{{- end -}}
{{- toJson $out -}}
{{- end -}}

{{/* ccm.module: a module's URL (from any source) and loadBalancer.module:
pinned by digest when pulled from a registry; the namespace of its
objects, from loadBalancer.module.namespace or the URL's ?namespace= (where
modules such as examples/modules/bird write them), which must agree; and
RBAC rules for that namespace, without which every write of the module is
denied. Sets mode module and the Role's namespace in out. */}}
{{- define "ccm.module" -}}
{{- $m := .Values.loadBalancer.module -}}
{{- $url := .url -}}
{{- if and (hasPrefix "wasm+oci:" $url) (not (regexMatch "^wasm\\+oci://[^/?#@]+/[^?#@]+@sha256:[0-9a-fA-F]{64}([?#].*)?$" $url)) -}}
{{- fail (printf "%s is not pinned by digest (a tag can change under the CCM, which refuses it at start): use the URL `make module-image` printed, wasm+oci://<registry>/<repository>@sha256:<manifest digest> (crane digest <registry>/<repository>:<tag> finds the digest too)" .source) -}}
{{- end -}}
{{- $urlNS := "" -}}
{{- range splitList "&" (regexReplaceAll "#.*$" (regexReplaceAll "^[^?]*\\??" $url "") "") -}}
{{- if hasPrefix "namespace=" . -}}{{- $urlNS = trimPrefix "namespace=" . -}}{{- end -}}
{{- end -}}
{{- if and $m.namespace $urlNS (ne $m.namespace $urlNS) -}}
{{- fail (printf "loadBalancer.module.namespace %s contradicts ?namespace=%s of %s: the module writes its objects where ?namespace= says, and the Role must be there; set loadBalancer.module.namespace to %s, or leave it empty" $m.namespace $urlNS .source $urlNS) -}}
{{- end -}}
{{- $ns := $m.namespace | default $urlNS -}}
{{- if and $ns (not $m.rules) .Values.clusterRole.create -}}
{{- fail (printf "loadBalancer.module.rules is empty, but the module writes its objects in the namespace %s (loadBalancer.module.namespace or the URL's ?namespace=): without a Role there every write is denied. List the rules of the kinds its describe declares, for example rules: [{apiGroups: [\"\"], resources: [configmaps], verbs: [get, list, watch, create, patch, update, delete]}]" $ns) -}}
{{- end -}}
{{- $_ := set .out "mode" "module" -}}
{{- $_ := set .out "namespace" $ns -}}
{{- end -}}

{{/* ccm.image: the container's image. Refuses upstream's: `helm get
values` of an upstream release carries its image.repository and the
image.tag its users pin (its chart's default tag is "main"), and this chart
would run upstream's binary with this CCM's flags and mounts. Upstream's
repositories: equinix/cloud-provider-equinix-metal (Docker Hub, ghcr.io,
mirrors keeping the path), kubernetes-sigs/…, and its former name
packethost/packet-ccm; its release tags: v3.x (this CCM's releases are
below v3; see RELEASING.md, and change this rule before tagging v3). */}}
{{- define "ccm.image" -}}
{{- $repo := .Values.image.repository | toString -}}
{{- $tag := .Values.image.tag | default "" | toString -}}
{{- $fix := "remove image from your values (the chart's default is this CCM's image, the one make image pushed), or set image.repository and image.tag to this CCM's image" -}}
{{- if regexMatch "(^|/)((equinix|kubernetes-sigs)/cloud-provider-equinix-metal|packethost/packet-ccm)$" $repo -}}
{{- fail (printf "image.repository %s is upstream's CCM (kubernetes-sigs/cloud-provider-equinix-metal), whose binary does not take this chart's flags: %s" $repo $fix) -}}
{{- end -}}
{{- if regexMatch "^v3\\." $tag -}}
{{- fail (printf "image.tag %s is a release of upstream's CCM (kubernetes-sigs/cloud-provider-equinix-metal v3), whose binary does not take this chart's flags: %s" $tag $fix) -}}
{{- end -}}
{{- printf "%s:%s" $repo ($tag | default .Chart.AppVersion) -}}
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
