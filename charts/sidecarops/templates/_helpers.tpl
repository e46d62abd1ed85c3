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
{{- $ref := printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) -}}
{{- if .Values.image.digest }}{{ $ref = printf "%s@%s" $ref .Values.image.digest }}{{ end -}}
{{ $ref }}
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
