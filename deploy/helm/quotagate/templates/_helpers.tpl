{{- define "quotagate.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "quotagate.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "quotagate.labels" -}}
{{ include "quotagate.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{/* A map as TOML key = value lines: keys quoted (Kafka's names have dots), values as JSON,
     which TOML reads the same for strings, numbers, booleans and arrays of them. */}}
{{- define "quotagate.tomlPairs" -}}
{{- range $key, $value := . }}
{{ $key | quote }} = {{ $value | toJson }}
{{- end }}
{{- end -}}

{{- define "quotagate.tls" -}}
{{- has .Values.listener.securityProtocol (list "SSL" "SASL_SSL") -}}
{{- end -}}

{{/* The gateway ports a client may be sent to: the listener's, and per-broker ports. */}}
{{- define "quotagate.brokerPorts" -}}
{{- if eq .Values.listener.routing "ports" -}}
{{- $p := .Values.listener.ports -}}
{{- range $i := until (int $p.brokerPortCount) }}
- {{ add $p.brokerPortStart $i }}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "quotagate.validate" -}}
{{- if and (gt (int .Values.replicaCount) 1) (not .Values.fleet.enabled) -}}
{{- fail "replicaCount > 1 needs fleet.enabled: true (each replica would otherwise enforce its own quotas, and keep its own store)" -}}
{{- end -}}
{{- $workers := .Values.gateway.workers | toString -}}
{{- if and (ne $workers "1") (not .Values.fleet.enabled) -}}
{{- fail "gateway.workers other than 1 needs fleet.enabled: true (the workers share their quotas through the store in the upstream cluster)" -}}
{{- end -}}
{{- if and (eq .Values.listener.routing "sni") (ne (include "quotagate.tls" .) "true") -}}
{{- fail "listener.routing: sni needs listener.securityProtocol SSL or SASL_SSL (the TLS handshake carries the server name)" -}}
{{- end -}}
{{- if and (eq (include "quotagate.tls" .) "true") (not .Values.listener.tlsSecret) -}}
{{- fail "an SSL or SASL_SSL listener needs listener.tlsSecret, a kubernetes.io/tls Secret with tls.crt and tls.key" -}}
{{- end -}}
{{- end -}}
