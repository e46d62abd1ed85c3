{{/*
Object names are fixed: the manager looks its webhook configurations, Service, certificate Secret and
lease up by these names (package manager), and a cluster has one installation.
*/}}

{{/* Labels Helm adds to every object; selectors use only the two config/default has. */}}
{{- define "sidecarops.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
{{- end }}

{{- define "sidecarops.selectorLabels" -}}
app.kubernetes.io/name: sidecarops
app.kubernetes.io/component: manager
{{- end }}

{{- define "sidecarops.image" -}}
{{- $i := .Values.manager.image -}}
{{- $ref := printf "%s:%s" $i.repository ($i.tag | default .Chart.AppVersion) -}}
{{- if $i.digest }}{{ $ref = printf "%s@%s" $ref $i.digest }}{{ end -}}
{{ $ref }}
{{- end }}

{{/*
Every refusal of the values the schema cannot state (it checks each value alone, and lets OpenKruise's
values through to be named here), collected, so that one `helm install` names every problem, one a
line, rather than one per attempt. deployment.yaml, which every release renders, includes it; a
template must not `fail` on values of its own, or it would hide the others again. The schema's errors
come first, all at once, before any template runs.
*/}}
{{- define "sidecarops.refusals" -}}
{{- $problems := list -}}
{{- $openKruise := include "sidecarops.openKruiseOnly" . | fromJsonArray -}}
{{- range $openKruise }}
{{- $problems = append $problems (printf "a value of OpenKruise's chart that this chart does not take: %s" .) }}
{{- end }}
{{- $gates := include "sidecarops.parsedFeatureGates" . | fromJson -}}
{{- if $gates.podWebhookOff }}
{{- $problems = append $problems "featureGates: PodWebhook=false turns off the pod webhook, which is all sidecarops does: no SidecarSet would inject. To let pods be created while no replica answers, set webhookConfiguration.failurePolicy.pods: Ignore (with webhookConfiguration.failOpen: true) instead" }}
{{- end }}
{{- with $gates.refused }}
{{- $problems = append $problems (printf "featureGates: %s: not what sidecarops honours (it takes %s, PodWebhook=true and EnableSortSidecarContainerByName=false); docs/install.md, \"Values from OpenKruise's chart\", says why" (join ", " .) (join ", " $gates.honoured)) }}
{{- end }}
{{- with .Values.whitelistNamespace }}
{{- if and $.Values.patchPodMetadataWhiteList (ne . $.Release.Namespace) }}
{{- $problems = append $problems (printf "patchPodMetadataWhiteList with whitelistNamespace=%s: the manager reads the whitelist in %s, where the chart makes no ConfigMap; edit the kruise-configuration there, or leave whitelistNamespace empty" . .) }}
{{- end }}
{{- end }}
{{- $m := .Values.monitoring -}}
{{- if and (or $m.service.enabled $m.serviceMonitor.enabled) (not .Values.manager.metrics.enabled) }}
{{- $problems = append $problems "monitoring.service and monitoring.serviceMonitor need manager.metrics.enabled" }}
{{- end }}
{{- if $m.podMonitor.enabled }}
{{- if not (include "sidecarops.podMonitorNamespaces" . | fromJsonArray) }}
{{- $problems = append $problems "monitoring.podMonitor needs the agent's namespaces: monitoring.podMonitor.namespaces or agent.rbac.namespaces" }}
{{- end }}
{{- if not $m.podMonitor.tokenSecret.name }}
{{- $problems = append $problems "monitoring.podMonitor needs monitoring.podMonitor.tokenSecret.name: the agent refuses Prometheus' own token (docs/agent.md, \"Scraping the agent\")" }}
{{- end }}
{{- end }}
{{- with $problems }}
{{- $lines := list (printf "the values have %d %s:" (len .) (ternary "problem" "problems" (eq (len .) 1))) }}
{{- range . }}{{ $lines = append $lines (printf "- %s" .) }}{{ end }}
{{- if $openKruise }}
{{- $lines = append $lines "OpenKruise's values above: docs/install.md, \"Values from OpenKruise's chart\", maps each of them" }}
{{- end }}
{{- fail (join "\n" $lines) }}
{{- end }}
{{- end }}

{{/*
Values of OpenKruise's chart (openkruise/kruise) this chart has no use for, each with what takes its
place, as a JSON list. The schema lets them through so that sidecarops.refusals names each one, where
the schema's "additional properties not allowed" would leave an administrator who brought OpenKruise's
values file with nothing to map them to. docs/install.md, "Values from OpenKruise's chart", is the table.
*/}}
{{- define "sidecarops.openKruiseOnly" -}}
{{- $top := dict
  "crds" "the chart always installs the SidecarSet CRD; crd.keep keeps it at helm uninstall"
  "installation" "the release's namespace is helm's --namespace (with --create-namespace)"
  "externalCerts" "certificates.provider: cert-manager"
  "enableKubeCacheMutationDetector" "none: a debugging switch of OpenKruise's"
  "daemon" "none: sidecarops runs no daemon on the nodes"
  "helmHooks" "none: the chart has no hooks" -}}
{{- $manager := dict
  "pprofAddr" "extraArgs: [--pprof-bind-address=127.0.0.1:6060]"
  "resyncPeriod" "none: no informer resync; SidecarSet status is recounted every --sidecarset-status-recount-interval (extraArgs)"
  "loggingFormat" "extraArgs: [--zap-encoder=console] (default json)"
  "nodeAffinity" "manager.affinity.nodeAffinity" -}}
{{- $found := list -}}
{{- range $k := keys $top | sortAlpha }}
{{- if hasKey $.Values $k }}{{ $found = append $found (printf "%s (here: %s)" $k (get $top $k)) }}{{ end }}
{{- end }}
{{- range $k := keys $manager | sortAlpha }}
{{- if hasKey $.Values.manager $k }}{{ $found = append $found (printf "manager.%s (here: %s)" $k (get $manager $k)) }}{{ end }}
{{- end }}
{{- /* OpenKruise's values file names its own image under the same key: it would run as ours and crash. */}}
{{- if hasSuffix "/kruise-manager" (printf "/%s" .Values.manager.image.repository) }}
{{- $found = append $found (printf "manager.image.repository %s (here: sidecarops' manager image, by default ghcr.io/sidecarops/manager)" .Values.manager.image.repository) }}
{{- end }}
{{- toJson $found }}
{{- end }}

{{/*
featureGates parsed, as JSON: gates, a dict of the gates sidecarops honours; refused, the gates that
change nothing here, which sidecarops.refusals names rather than ignores, since the administrator who
set one expects it to do something; podWebhookOff, the one gate that would turn sidecarops off. The
schema checks the syntax. A gate whose one setting is what sidecarops always does (OpenKruise's
default for both) is taken at that setting only.
*/}}
{{- define "sidecarops.parsedFeatureGates" -}}
{{- $honoured := list "SidecarSetPatchPodMetadataDefaultsAllowed" -}}
{{- $fixed := dict "PodWebhook" "true" "EnableSortSidecarContainerByName" "false" -}}
{{- $gates := dict -}}
{{- $refused := list -}}
{{- $podWebhookOff := false -}}
{{- range $g := splitList "," .Values.featureGates }}
{{- if $g }}
{{- $name := first (splitList "=" $g) }}
{{- $value := last (splitList "=" $g) }}
{{- if eq $g "PodWebhook=false" }}
{{- $podWebhookOff = true }}
{{- else if has $name $honoured }}
{{- $_ := set $gates $name (eq $value "true") }}
{{- else if ne (get $fixed $name) $value }}
{{- $refused = append $refused $g }}
{{- end }}
{{- end }}
{{- end }}
{{- toJson (dict "gates" $gates "refused" $refused "podWebhookOff" $podWebhookOff "honoured" $honoured) }}
{{- end }}

{{/* The gates sidecarops honours, as a JSON dict (fromJson it); sidecarops.refusals refuses the rest. */}}
{{- define "sidecarops.featureGates" -}}
{{- toJson (include "sidecarops.parsedFeatureGates" . | fromJson).gates }}
{{- end }}

{{/* The namespaces the PodMonitor scrapes, as a JSON list: its own, or the agent's RBAC's. */}}
{{- define "sidecarops.podMonitorNamespaces" -}}
{{- toJson (.Values.monitoring.podMonitor.namespaces | default .Values.agent.rbac.namespaces) }}
{{- end }}

{{/* cert-manager's cainjector writes caBundle from the Certificate's Secret. */}}
{{- define "sidecarops.caInjection" -}}
{{- if eq .Values.certificates.provider "cert-manager" }}
cert-manager.io/inject-ca-from: {{ .Release.Namespace }}/sidecarops-webhook-cert
{{- end }}
{{- end }}

{{- define "sidecarops.webhookService" -}}
service:
  name: sidecarops-webhook
  namespace: {{ .Release.Namespace }}
{{- end }}
