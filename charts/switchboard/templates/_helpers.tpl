{{- define "switchboard.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "switchboard.labels" -}}
app.kubernetes.io/name: switchboard-operator
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/part-of: switchboard
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "switchboard.selectorLabels" -}}
app.kubernetes.io/name: switchboard-operator
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "switchboard.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "switchboard.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "switchboard.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{- define "switchboard.gatewayName" -}}
{{- printf "%s-gateway" (include "switchboard.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "switchboard.gatewaySelectorLabels" -}}
app.kubernetes.io/name: switchboard-gateway
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "switchboard.gatewayLabels" -}}
{{ include "switchboard.gatewaySelectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/part-of: switchboard
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "switchboard.gatewayKeySecret" -}}
{{- printf "%s-key" (include "switchboard.gatewayName" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- /* The ConfigMap the gateway publishes its public key in, for the operator. */ -}}
{{- define "switchboard.gatewayPublicKeyConfigMap" -}}
{{- printf "%s-public-key" (include "switchboard.gatewayName" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- /* Whether the operator follows that ConfigMap (no runtime.gatewayPublicKey given). */ -}}
{{- define "switchboard.followsGatewayKey" -}}
{{- if and .Values.gateway.enabled (not .Values.runtime.gatewayPublicKey) }}true{{ end -}}
{{- end -}}

{{- /* The metadata lines the chart adds to each CRD (see crds.yaml), framed as the
"\nmetadata:\n" they replace. */ -}}
{{- define "switchboard.crdMetadata" }}
metadata:
  annotations:
    helm.sh/resource-policy: keep
  labels:
    app.kubernetes.io/part-of: switchboard
    app.kubernetes.io/managed-by: {{ .Release.Service }}
    helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{ end -}}

{{/* Whether the gateway sends end-of-call reports ("true" or empty). */}}
{{- define "switchboard.recordWebhook" -}}
{{- with .Values.gateway.record -}}
{{- if and .webhook.url .webhook.existingSecret (or .databaseUrl .existingSecret) }}true{{ end -}}
{{- end -}}
{{- end }}

{{- define "switchboard.sipSelectorLabels" -}}
app.kubernetes.io/name: switchboard-sip
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "switchboard.sipLabels" -}}
{{ include "switchboard.sipSelectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/part-of: switchboard
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}
