{{/* Hand-written (charts/generate.py writes the other templates). */}}

{{/* The image: repository:tag, pinned by @digest when one is given. */}}
{{- define "memcached-webhook.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}{{ with .Values.image.digest }}@{{ . }}{{ end }}
{{- end -}}

{{/* Non-empty when the server reads the API server: then it gets a projected token and egress
to the API server's ports: --autoscaler-conflicts (the watch) and --metrics-secure (the scrapes'
TokenReviews and SubjectAccessReviews). */}}
{{- define "memcached-webhook.apiAccess" -}}
{{- if or .Values.autoscalerConflicts .Values.metricsSecure }}true{{ end -}}
{{- end -}}
