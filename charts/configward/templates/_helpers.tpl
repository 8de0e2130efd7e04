{{/* Name of every object: the release name, plus "-configward" unless it already says so. */}}
{{- define "configward.fullname" -}}
{{- if contains "configward" .Release.Name -}}
{{- .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-configward" .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "configward.labels" -}}
app.kubernetes.io/name: configward
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/* Selector labels of one component (webhook or controller). */}}
{{- define "configward.selectorLabels" -}}
app.kubernetes.io/name: configward
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "configward.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}

{{/*
priorityClassName of both pods: the user's class, else the chart's own
(priorityClass.create), else none. dig: a release upgraded with
--reuse-values from a chart without priorityClass has no such key.
*/}}
{{- define "configward.priorityClassName" -}}
{{- if .Values.priorityClassName -}}
{{ .Values.priorityClassName }}
{{- else if dig "priorityClass" "create" true .Values.AsMap -}}
{{ include "configward.fullname" . }}-critical
{{- end -}}
{{- end -}}

{{- define "configward.webhookServiceAccount" -}}{{ include "configward.fullname" . }}-webhook{{- end -}}
{{- define "configward.controllerServiceAccount" -}}{{ include "configward.fullname" . }}-controller{{- end -}}
{{- define "configward.tlsSecret" -}}{{ include "configward.fullname" . }}-webhook-tls{{- end -}}

{{/*
Namespaces the webhooks never see. kubernetes.io/metadata.name is set by the
API server from the namespace's name and cannot be changed, so this cannot be
forged by labelling a namespace.
*/}}
{{/*
namespaceSelector of a webhook: never the excluded namespaces, nor those
carrying the ignore label when the installation honours it (unless
"seeIgnored": the webhook that records namespaces getting it). Pass "scope" to
add one expression on a label configward maintains (the fail-closed and
fail-open copies of the change-control and schema webhooks), e.g.
(dict "root" . "scope" (dict "key" "configward.dev/change-control" "operator" "In" "values" (list "governed"))).
*/}}
{{- define "configward.namespaceSelector" -}}
{{- $root := .root | default . -}}
matchExpressions:
- key: kubernetes.io/metadata.name
  operator: NotIn
  values:
  {{- $excluded := concat (list "kube-system" "kube-node-lease" "kube-public" $root.Release.Namespace $root.Values.certManager.namespace) $root.Values.webhooks.excludedNamespaces | uniq }}
  {{- range $excluded }}
  - {{ . | quote }}
  {{- end }}
{{- if and $root.Values.webhooks.ignoreLabel.enabled (not .seeIgnored) }}
- key: configward.dev/ignore
  operator: DoesNotExist
{{- end }}
{{- with .scope }}
- key: {{ .key }}
  operator: {{ .operator }}
  values: [{{ join ", " .values }}]
{{- end }}
{{- end -}}

{{/*
The ignore-label argument both processes take when the label is honoured.
*/}}
{{- define "configward.ignoreLabelArg" -}}
{{- if .Values.webhooks.ignoreLabel.enabled }}
- --ignore-namespace-label=configward.dev/ignore
{{- end }}
{{- end -}}

{{/*
Arguments the same for the webhook and the controller: change control (the
webhook judges, the controller labels the namespaces under change control;
cert-manager's identities included) and where the config-hash key lives.
*/}}
{{- define "configward.changeControlArgs" -}}
{{- $cc := .Values.changeControl -}}
{{- with $cc.pipelineUsers }}
- --pipeline-users={{ join "," . }}
{{- end }}
{{- with $cc.pipelineGroups }}
- --pipeline-groups={{ join "," . }}
{{- end }}
{{- with $cc.pipelineServiceAccounts }}
- --pipeline-service-accounts={{ join "," . }}
{{- end }}
{{- with $cc.namespaceSelector }}
- --change-control-namespace-selector={{ . }}
{{- end }}
{{- /* Always given, so an empty certManager.serviceAccounts means no one rather than the binary's default. */}}
- --cert-manager-service-accounts={{ join "," .Values.certManager.serviceAccounts }}
{{- include "configward.ignoreLabelArg" . }}
- --hash-key-namespace={{ .Release.Namespace }}
- --hash-key-secret={{ .Values.hashKey.secretName }}
{{- end -}}

{{/*
Requests from Kubernetes' own components that write what these webhooks judge
are skipped before any network hop, so they never wait on configward: each is
named with its reason in internal/webhookscope (Unjudged), and a chart test
keeps this list equal to that one. kube-apiserver, kube-controller-manager
and kube-scheduler; the controllers that create pods, ReplicaSets and Jobs of
the workload kinds (what they write was judged at its template); the garbage
collector (owner references, finalizers); namespace deletion; the root CA
publisher (kube-root-ca.crt); and kubelets (mirror pods). Every other
identity, kube-system add-ons included, is judged. Only cluster
administrators can act as these.
*/}}
{{- define "configward.matchConditions" -}}
- name: exclude-kubernetes-components
  expression: "!(request.userInfo.username in ['system:apiserver', 'system:kube-controller-manager', 'system:kube-scheduler', 'system:serviceaccount:kube-system:cronjob-controller', 'system:serviceaccount:kube-system:daemon-set-controller', 'system:serviceaccount:kube-system:deployment-controller', 'system:serviceaccount:kube-system:generic-garbage-collector', 'system:serviceaccount:kube-system:job-controller', 'system:serviceaccount:kube-system:namespace-controller', 'system:serviceaccount:kube-system:replicaset-controller', 'system:serviceaccount:kube-system:root-ca-cert-publisher', 'system:serviceaccount:kube-system:statefulset-controller'])"
- name: exclude-nodes
  expression: "!('system:nodes' in request.userInfo.groups)"
{{- end -}}

{{/*
The change-control webhooks skip only the Kubernetes components that write
or delete ConfigMaps and Secrets in every namespace, exactly the list the
handler never blocks (internal/changecontrol; a chart test keeps the two in
step). Every other identity in kube-system, add-ons included, is judged:
change control knows no blanket exemption.
*/}}
{{- define "configward.changeControlMatchConditions" -}}
- name: exclude-kubernetes-config-writers
  expression: "!(request.userInfo.username in [{{ include "configward.kubernetesConfigWriters" . }}])"
{{- end -}}

{{- define "configward.kubernetesConfigWriters" -}}
'system:apiserver', 'system:kube-controller-manager', 'system:serviceaccount:kube-system:generic-garbage-collector', 'system:serviceaccount:kube-system:legacy-service-account-token-cleaner', 'system:serviceaccount:kube-system:namespace-controller', 'system:serviceaccount:kube-system:root-ca-cert-publisher'
{{- end -}}

{{/* clientConfig of one webhook: the Service, or externalURL when set. */}}
{{- define "configward.clientConfig" -}}
{{- if .root.Values.webhook.externalURL -}}
url: {{ printf "%s%s" (trimSuffix "/" .root.Values.webhook.externalURL) .path | quote }}
{{- else -}}
service:
  name: {{ include "configward.fullname" .root }}-webhook
  namespace: {{ .root.Release.Namespace }}
  path: {{ .path }}
  port: 443
{{- end -}}
{{- end -}}

{{/* The restricted pod security profile. */}}
{{- define "configward.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
# The kubelet gives mounted Secrets (the serving key) this group.
fsGroup: 65532
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{- define "configward.containerSecurityContext" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
privileged: false
capabilities:
  drop: [ALL]
{{- end -}}

{{- /*
Custom workload kinds (values workloadKinds): one file, rendered into a
ConfigMap and mounted into both pods, that both processes read with
--workload-kinds. The checksum annotation restarts both pods when the
declaration changes: the processes read it only at start.
*/}}
{{- define "configward.workloadKinds.annotations" -}}
{{- if .Values.workloadKinds }}
checksum/workload-kinds: {{ toYaml .Values.workloadKinds | sha256sum }}
{{- end }}
{{- end }}

{{- define "configward.workloadKinds.arg" -}}
{{- if .Values.workloadKinds }}
- --workload-kinds=/etc/configward/workload-kinds/workload-kinds.yaml
{{- end }}
{{- end }}

{{- define "configward.workloadKinds.volumeMount" -}}
{{- if .Values.workloadKinds }}
- name: workload-kinds
  mountPath: /etc/configward/workload-kinds
  readOnly: true
{{- end }}
{{- end }}

{{- define "configward.workloadKinds.volume" -}}
{{- if .Values.workloadKinds }}
- name: workload-kinds
  configMap:
    name: {{ include "configward.fullname" . }}-workload-kinds
{{- end }}
{{- end }}

{{- /*
One admission rule per declared kind, for the config-hash and validate
webhooks (the only two that judge workloads).
*/}}
{{- define "configward.workloadKinds.rules" -}}
{{- range .Values.workloadKinds }}
- apiGroups: [{{ .group | quote }}]
  apiVersions: [{{ .version | quote }}]
  operations: [CREATE, UPDATE]
  resources: [{{ .resource | quote }}]
{{- end }}
{{- end }}

{{- /* RBAC on the declared kinds: verbs is a list. */}}
{{- define "configward.workloadKinds.rbac" -}}
{{- $verbs := .verbs -}}
{{- range .root.Values.workloadKinds }}
- apiGroups: [{{ .group | quote }}]
  resources: [{{ .resource | quote }}]
  verbs: [{{ join ", " $verbs }}]
{{- end }}
{{- end }}
