package v1alpha1

// Every annotation and label key users write or read on their own objects,
// and the condition types and reasons of configward's CRDs, in one place:
// the packages that act on them import them from here, and the
// documentation (README.md, docs/) is checked against them (test/docs).

// Annotations on ConfigMaps and Secrets.
const (
	// ReloadAnnotation declares how consumers take in changes of a
	// ConfigMap or Secret: rollout (the default), hot or ignore.
	ReloadAnnotation = "configward.dev/reload"
	// SchemaAnnotation on a ConfigMap names the ConfigSchema (in its
	// namespace) that governs it.
	SchemaAnnotation = "configward.dev/schema"
	// BreakGlassAnnotation on an update, with a reason the object did not
	// carry before, lets that update change governed content out of the
	// pipeline; the change is recorded.
	BreakGlassAnnotation = "configward.dev/break-glass"
	// BreakGlassDeleteAnnotation on the stored object lets it be deleted
	// out of the pipeline. A delete carries no object, so the reason is set
	// first with a metadata-only update; the object is gone afterwards, so
	// the reason cannot be replayed on it.
	BreakGlassDeleteAnnotation = "configward.dev/break-glass-delete"
	// BreakGlassDeliveryAnnotation, set to BreakGlassImmediate in the same
	// write as a new break-glass reason, delivers that content to every
	// wave at once, without checks, where delivery in waves is on. Without
	// it a break-glass write skips approvals only.
	BreakGlassDeliveryAnnotation = "configward.dev/break-glass-delivery"
	BreakGlassImmediate          = "Immediate"
	// BreakGlassSeenAnnotation on a ConfigDelivery keeps the config's
	// break-glass reason when the delivery started, honoured or not, so the
	// next delivery tells a new reason from one left on the object by an
	// earlier write. Only configward writes it.
	BreakGlassSeenAnnotation = "configward.dev/break-glass-seen"
	// BreakGlassSealAnnotation binds a break-glass reason to the content
	// of the write that set it: configward's admission webhook writes it
	// (delivery.BreakGlassSeal) on every write that sets a new reason, and
	// a delivery honours the reason only for the content it was sealed to.
	BreakGlassSealAnnotation = "configward.dev/break-glass-seal"
)

// Reload modes, the values of ReloadAnnotation.
const (
	ReloadRollout = "rollout"
	ReloadHot     = "hot"
	ReloadIgnore  = "ignore"
)

// Annotations on workloads and their pod templates.
const (
	// ConfigHashAnnotation on a pod template holds the hash of the config
	// its pods consume; a change to it is what rolls the workload.
	ConfigHashAnnotation = "configward.dev/config-hash"
	// RolloutAnnotation set to RolloutDisabled on a workload opts it out of
	// config-hash rollouts.
	RolloutAnnotation = "configward.dev/rollout"
	RolloutDisabled   = "disabled"
	// ConfigSnapshotsAnnotation on a pod template, beside the config hash,
	// names the snapshot of each ConfigMap and Secret the revision reads
	// ("ConfigMap/app=app-1f2e3d4c5b,Secret/db=db-6a7b8c9d0e"), where a
	// ConfigPolicy turns revisions on. Pods inherit it, and each pod's
	// references are pointed at those snapshots when it is created.
	ConfigSnapshotsAnnotation = "configward.dev/config-snapshots"
	// RolledBackFromAnnotation on a workload (not its template) records the
	// config hash it was rolled back from (kubectl rollout undo to a
	// revision with snapshots): configward leaves the restored revision in
	// place until that config changes again or a new revision is written.
	RolledBackFromAnnotation = "configward.dev/rolled-back-from"
	// SecretVersionsAnnotation on a workload (not its template) records,
	// per SecretProviderClass it mounts through the Secrets Store CSI
	// driver, keyed digests of the secret versions its pods have reported,
	// and of the versions its last rotation rolled to (see
	// internal/secretversions). configward's controller writes it; the
	// config hash reads the rolled part, so recording versions first seen
	// (a baseline) never changes the pod template.
	SecretVersionsAnnotation = "configward.dev/secret-versions"
)

// Annotations on pod templates (or bare Pods) that ask for configward's
// reload agent, a native sidecar that triggers the program's reload when
// the kubelet swaps in new content of a hot ConfigMap or Secret, and
// reports what the program applied.
const (
	// ReloadAgentAnnotation says how the program takes in a change:
	// "signal:SIGHUP@app" (a signal to the processes of container app),
	// "http://localhost:8080/-/reload" (a POST to a local URL), or
	// "watch" (the program watches its files; the agent only reports).
	ReloadAgentAnnotation = "configward.dev/reload-agent"
	// ReloadCheckAnnotation, optional, says how the agent reads back what
	// the program applied: a local URL whose answer says it, or a local
	// Prometheus endpoint and metric ("http://localhost:9090/metrics#app_config_last_reload_successful",
	// 1 applied, 0 rejected).
	ReloadCheckAnnotation = "configward.dev/reload-check"
)

// ServingCertAnnotation on a pod template (or bare Pod) asks the reload
// agent to check that the program serves the certificate it mounts:
// "<port>[@<container>][;sni=<name>][;secret=<name>]", several separated
// by commas. The agent dials the port in its own pod after every swap of
// the certificate and periodically, and reports whether the leaf presented
// is the one mounted (ServingCertConditionType). It injects the agent by
// itself, hot config or not.
const ServingCertAnnotation = "configward.dev/serving-cert"

// OnStaleCertAnnotation set to OnStaleCertRestart on a pod template lets
// configward evict (Eviction API) the pods that still present a stale
// certificate after a grace; without it configward only reports them.
const (
	OnStaleCertAnnotation = "configward.dev/on-stale-cert"
	OnStaleCertRestart    = "Restart"
)

// ServingCertConditionType is the Pod condition configward keeps from its
// reload agent's certificate checks: per port, whether the leaf the
// program presents is the one mounted.
const ServingCertConditionType = "configward.dev/ServingCertificate"

// ReloadConditionType is the Pod condition configward keeps from its reload
// agent's reports: which content of each hot config the program applied or
// rejected.
const ReloadConditionType = "configward.dev/ConfigReload"

// WaveLabel is the label the documentation's delivery examples select a
// canary wave with (spec.delivery.waves[].selector). configward reads it
// only through the selectors a ConfigPolicy names; any label does.
const WaveLabel = "configward.dev/wave"

// AnalysisCredentialsLabel set to "true" on a Secret in configward's
// namespace lets delivery checks send its token or user and password to
// the Prometheus a ConfigPolicy names. Without it the controller refuses
// the Secret: whoever may write a ConfigPolicy could otherwise point its
// address at a server of theirs and name any Secret there (a service
// account token, say).
const AnalysisCredentialsLabel = "configward.dev/analysis-credentials"

// AnalysisAddressesAnnotation on a credentials Secret a ConfigPolicy names
// lists where its credentials may be sent: CIDRs, IPs or host[:port],
// separated by commas. configward connects with them only to an address
// the list admits, checked on the address a name resolves to when it
// connects. Without it the Secret is refused: the label says the Secret
// may be used for analysis, this says where, so that whoever may write a
// ConfigPolicy cannot send the platform's Prometheus token to a server of
// theirs.
const AnalysisAddressesAnnotation = "configward.dev/analysis-addresses"

// Config snapshots: immutable copies configward keeps of each content of a
// ConfigMap or Secret that a revision reads.
const (
	// SnapshotLabel is SnapshotLabelValue on every snapshot, so configward
	// finds them and nobody else's selectors do by accident.
	SnapshotLabel      = "configward.dev/snapshot"
	SnapshotLabelValue = "true"
	// SnapshotOfAnnotation on a snapshot names the object it copies (names
	// outlive the 63-character limit of label values).
	SnapshotOfAnnotation = "configward.dev/snapshot-of"
	// SnapshotsBlockedAnnotation is on a Namespace while configward's
	// controller cannot write snapshots there (a ResourceQuota, RBAC, an
	// admission webhook refuses it); its value says why. The webhook and
	// the controller then name no snapshot that is not written, so new pods
	// start on the originals instead of waiting forever; the controller
	// takes the annotation off once a write would succeed again.
	SnapshotsBlockedAnnotation = "configward.dev/snapshots-blocked"
)

// Channels: the copies of a hot ConfigMap or Secret that the pods of one
// wave mount where delivery is on, written only by configward's
// controller, so a change of hot config reaches the pods wave by wave.
const (
	// ChannelLabel is ChannelLabelValue on every channel.
	ChannelLabel      = "configward.dev/channel"
	ChannelLabelValue = "true"
	// ChannelOfAnnotation on a channel names the hot original it copies.
	ChannelOfAnnotation = "configward.dev/channel-of"
	// ChannelWaveAnnotation names the wave of a channel, and of a pod that
	// mounts channels (set when the pod is created, kept for its life).
	ChannelWaveAnnotation = "configward.dev/channel-wave"
	// ChannelPlacedAnnotation seals a pod's wave to the admission request
	// in which configward's Pod path placed it on its wave's channels
	// (channel.PlacementSeal): a pod that names a channel without it was
	// not placed by configward, and no gate counts it.
	ChannelPlacedAnnotation = "configward.dev/channel-placed"
	// ChannelContentAnnotation on a channel names the snapshot whose
	// content it holds.
	ChannelContentAnnotation = "configward.dev/channel-content"
	// ChannelSetAnnotation on a channel says, as of its last write, what
	// each config delivered with it holds in its wave (channel.Note): the
	// one place a pod's reload agent learns, through configward, whether
	// the channels it mounts hold one change set or a mix.
	ChannelSetAnnotation = "configward.dev/channel-set"
	// HotChannelsLabel is "true" on a Namespace where delivery is on: the
	// Pod path's second webhook (pod-channels) is sent that namespace's
	// pods, so their hot config can be pointed at channels.
	HotChannelsLabel = "configward.dev/hot-channels"
)

// Labels configward maintains on Namespaces. They scope the fail-closed
// copies of its webhooks (see the Helm chart), so that while configward is
// down, writes are refused only where it enforces something; everywhere
// else its webhooks fail open. They never decide what configward enforces:
// the webhook judges every namespace by its own settings.
const (
	// ChangeControlLabel is ChangeControlGoverned on namespaces under
	// change control (rule out-of-pipeline-edit).
	ChangeControlLabel    = "configward.dev/change-control"
	ChangeControlGoverned = "governed"
	// ConfigSchemasLabel is ConfigSchemasPresent on namespaces that hold a
	// ConfigSchema.
	ConfigSchemasLabel   = "configward.dev/config-schemas"
	ConfigSchemasPresent = "present"
)

// ConfigSetVersionAnnotation, on a member of a ConfigSet, is the set's
// version whose content the member holds.
const ConfigSetVersionAnnotation = "configward.dev/config-set-version"

// ExemptAnnotationPrefix, followed by a rule id, is the annotation any
// judged object exempts itself from that rule with; its value is the
// reason. It counts only where the ConfigPolicies allow the exemption.
const ExemptAnnotationPrefix = "configward.dev/exempt."

// Condition types and reasons of ConfigPolicy and ConfigSchema status.
const (
	ConditionReady = "Ready"
	// ConditionRevisionsReady, on a ConfigPolicy that turns revisions on,
	// says whether configward's controller may write and delete snapshots.
	ConditionRevisionsReady = "RevisionsReady"
	// ReasonSnapshotsWritable: it may. ReasonSnapshotsForbidden: its RBAC
	// lacks create or delete on ConfigMaps (or Secrets).
	// ReasonSnapshotsRefused: a trial write (a server-side dry run) of a
	// snapshot, or of a delivery record, was refused (by an admission
	// webhook, configward's own among them, or a quota).
	// ReasonSnapshotsBlocked: writes of snapshots fail in namespaces the
	// policy selects (SnapshotsBlockedAnnotation).
	ReasonSnapshotsWritable  = "SnapshotsWritable"
	ReasonSnapshotsForbidden = "SnapshotsForbidden"
	ReasonSnapshotsRefused   = "SnapshotsRefused"
	ReasonSnapshotsBlocked   = "SnapshotsBlocked"
	// ReasonCompiled: the object compiled and is in force.
	ReasonCompiled = "Compiled"
	// ReasonCompileFailed: the object does not compile; the last good
	// generation stays in force.
	ReasonCompileFailed = "CompileFailed"
)
