package admission

import (
	"net/http"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/configward/configward/internal/changecontrol"
	"github.com/configward/configward/internal/configpolicy"
	"github.com/configward/configward/internal/configschema"
	"github.com/configward/configward/internal/deliveryrecords"
	"github.com/configward/configward/internal/hashkey"
	"github.com/configward/configward/internal/inventory"
	"github.com/configward/configward/internal/webhookserver"
	"github.com/configward/configward/internal/workload"
)

// Facts are what the handlers read: every one from memory but Live.
type Facts struct {
	Scheme    *runtime.Scheme
	Inventory *inventory.Inventory
	Kinds     *workload.Registry
	// Cache reads Namespaces; Live reads the API server (see
	// ValidateConfigChanges.Live).
	Cache, Live client.Reader
	Keys        *hashkey.Source
	Policies    *configpolicy.Store
	Schemas     *configschema.Store
	// Records are the delivery records, which pin consumers a config
	// delivery has not reached yet.
	Records *deliveryrecords.Reader
	// ChangeControl gives a namespace's change-control settings from the
	// webhook's flags.
	ChangeControl func(*corev1.Namespace) changecontrol.Settings
	// Agent injects the reload agent (nil: off).
	Agent *ReloadAgent
	Recorder
	// FullObjects decodes every field of the workloads and Pods, where
	// production decodes them slim (see webhookserver.Decoder.FullObjects).
	FullObjects bool
}

// Register serves every handler of configward's webhooks at its path, each
// behind the review codec and the adapter that checks and decodes its
// requests.
func Register(mux interface{ Register(string, http.Handler) }, f Facts) {
	d := webhookserver.Decoder{Scheme: f.Scheme, FullObjects: f.FullObjects}
	mux.Register(ConfigHashPath, webhookserver.Webhook("config-hash", webhookserver.Adapt(&ConfigHash{
		Inventory: f.Inventory, Keys: f.Keys, Namespaces: f.Cache, Policies: f.Policies, Effects: f.Effects, Kinds: f.Kinds, Records: f.Records}, d)))
	mux.Register(PodConfigPath, webhookserver.Webhook("pod-config", webhookserver.Adapt(&PodConfig{Inventory: f.Inventory, Namespaces: f.Cache, Agent: f.Agent,
		Channels: &Channels{Policies: f.Policies, Cache: f.Cache, Live: f.Live, Kinds: f.Kinds, Keys: f.Keys}}, d)))
	mux.Register(ValidateConfigMapsPath, webhookserver.Webhook("validate-configmaps", webhookserver.Adapt(&ValidateConfigMaps{
		Schemas: f.Schemas, Policies: f.Policies, Namespaces: f.Cache, Recorder: f.Recorder}, d)))
	mux.Register(ValidateConfigSchemasPath, webhookserver.Webhook("validate-configschemas", webhookserver.Adapt(&ValidateConfigSchemas{}, d)))
	mux.Register(ValidateConfigPoliciesPath, webhookserver.Webhook("validate-configpolicies", webhookserver.Adapt(&ValidateConfigPolicies{
		Policies: f.Policies, Namespaces: f.Cache, Live: f.Live}, d)))
	mux.Register(ValidateWorkloadsPath, webhookserver.Webhook("validate-workloads", webhookserver.Adapt(&ValidateWorkloads{
		Inventory: f.Inventory, Policies: f.Policies, Namespaces: f.Cache, Recorder: f.Recorder, Kinds: f.Kinds}, d)))
	mux.Register(ValidateConfigChangesPath, webhookserver.Webhook("validate-config-changes", webhookserver.Adapt(&ValidateConfigChanges{
		Inventory: f.Inventory, Cache: f.Cache, Live: f.Live, Recorder: f.Recorder, ChangeControl: f.ChangeControl,
		Policies: f.Policies, Schemas: f.Schemas}, d)))
	mux.Register(ValidateConfigSetsPath, webhookserver.Webhook("validate-configsets", webhookserver.Adapt(&ValidateConfigSets{
		Inventory: f.Inventory, Namespaces: f.Cache, Policies: f.Policies, Live: f.Live}, d)))
	mux.Register(ValidateConfigSetMembersPath, webhookserver.Webhook("validate-configset-members", webhookserver.Adapt(&ValidateConfigSetMembers{
		Inventory: f.Inventory, Live: f.Live}, d)))
	mux.Register(ConfigDeliveriesPath, webhookserver.Webhook("configdeliveries", webhookserver.Adapt(&ConfigDeliveries{
		ChangeControl: f.ChangeControl}, d)))
	mux.Register(AgentTokensPath, webhookserver.Webhook("agent-tokens", &AgentTokens{Pods: f.Cache, Live: f.Live}))
	mux.Register(BreakGlassSealsPath, webhookserver.Webhook("break-glass", webhookserver.Adapt(&BreakGlassSeals{Keys: f.Keys}, d)))
	mux.Register(RecordNamespaceChangesPath, webhookserver.Webhook("record-namespaces", webhookserver.Adapt(&RecordNamespaceChanges{
		Recorder: f.Recorder, ChangeControl: f.ChangeControl, Policies: f.Policies}, d)))
}
