{{/* The labels every object carries. */}}
{{- define "vfccm.labels" -}}
app.kubernetes.io/name: vsphere-federated-ccm
{{- end }}

{{/* The ConfigMap holding vsphere.conf. */}}
{{- define "vfccm.configMapName" -}}
{{- .Values.cloudConfig.existingConfigMap | default "vsphere-federated-ccm-config" -}}
{{- end }}

{{/* Every Secret the CCM may read: secret.name, each secretName of the
cloud config, and extraSecretNames; sorted, unique. */}}
{{- define "vfccm.secretNames" -}}
{{- $names := list .Values.secret.name -}}
{{- with .Values.cloudConfig.global.secretName }}{{ $names = append $names . }}{{ end -}}
{{- range $name, $vc := .Values.cloudConfig.vcenter }}{{ with $vc.secretName }}{{ $names = append $names . }}{{ end }}{{ end -}}
{{- $names = concat $names .Values.extraSecretNames -}}
{{- $names | compact | uniq | sortAlpha | toJson -}}
{{- end }}
