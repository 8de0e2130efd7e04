package framework

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/configward/configward/internal/admission"
	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/internal/changecontrol"
	"github.com/configward/configward/internal/hashkey"
	"github.com/configward/configward/internal/manager"
	"github.com/configward/configward/internal/webhookscope"
)

// InstallWebhookConfigurations creates the webhook configurations that
// `make manifests` generates into config/webhook, pointed at the in-process
// webhook server (see PointAtLocalWebhook). Each tweak may adjust the
// objects first. It returns what it created.
func (e *Env) InstallWebhookConfigurations(ctx context.Context, tweaks ...func(client.Object)) ([]client.Object, error) {
	objs, err := DecodeManifests(filepath.Join(RepoRoot(), "config", "webhook", "manifests.yaml"))
	if err != nil {
		return nil, err
	}
	e.PointAtLocalWebhook(objs...)
	for _, o := range objs {
		pinOnlyRevisionPods(o)
		for _, t := range tweaks {
			t(o)
		}
		if err := e.Client.Create(ctx, o); err != nil {
			return nil, fmt.Errorf("creating %T %s: %w", o, o.GetName(), err)
		}
	}
	return objs, nil
}

// WebhookScope names the configurations among objs (as
// InstallWebhookConfigurations returns them) whose workload webhooks
// configward's controller scopes (internal/webhookscope), as the chart
// passes its release name for both.
func WebhookScope(objs []client.Object) webhookscope.Configurations {
	var names webhookscope.Configurations
	for _, o := range objs {
		switch o.(type) {
		case *admissionregistrationv1.MutatingWebhookConfiguration:
			names.Mutating = o.GetName()
		case *admissionregistrationv1.ValidatingWebhookConfiguration:
			names.Validating = o.GetName()
		}
	}
	return names
}

// MatchConditionsOf are the matchConditions every installation (the chart
// too, which a chart test holds equal) puts on each of configward's
// webhooks, by webhook name: the Kubernetes components no workload, schema
// or policy webhook judges (webhookscope.Unjudged) and the writers change
// control never blocks; only pods whose template names config snapshots
// or asks for the reload agent on the Pod path's first webhook and the
// others on its second; only token requests of the reload agent's
// audience; only writes carrying a break-glass reason; every writer of
// records but configward's controller (controller, its username).
func MatchConditionsOf(controller string) map[string][]admissionregistrationv1.MatchCondition {
	cond := func(name, expression string) []admissionregistrationv1.MatchCondition {
		return []admissionregistrationv1.MatchCondition{{Name: name, Expression: expression}}
	}
	var quoted []string
	for _, u := range changecontrol.KubernetesWriters() {
		quoted = append(quoted, "'"+u+"'")
	}
	changeControl := cond("exclude-kubernetes-config-writers", "!(request.userInfo.username in ["+strings.Join(quoted, ", ")+"])")
	unjudged := webhookscope.UnjudgedConditions()
	return map[string][]admissionregistrationv1.MatchCondition{
		"config-hash.configward.dev":             unjudged,
		"validate.configward.dev":                unjudged,
		"configmaps.validate.configward.dev":     unjudged,
		"configschemas.validate.configward.dev":  unjudged,
		"configpolicies.validate.configward.dev": unjudged,
		"configsets.validate.configward.dev":     unjudged,
		"configset-members.validate.configward.dev": append(slices.Clone(unjudged),
			admissionregistrationv1.MatchCondition{Name: "configset-members", Expression: admission.ConfigSetMembersMatchCondition}),
		"changes.validate.configward.dev":        changeControl,
		"schema-changes.validate.configward.dev": changeControl,
		"namespaces.record.configward.dev":       changeControl,
		"pod-config.configward.dev":              cond("pod-config-annotations", admission.PodConfigMatchCondition),
		"pod-channels.configward.dev":            cond("pod-channels-not-annotated", admission.PodChannelsMatchCondition),
		"agent-tokens.validate.configward.dev":   cond("reload-agent-audience", admission.AgentTokensMatchCondition),
		"break-glass.configward.dev":             cond("break-glass-reason", admission.BreakGlassSealsMatchCondition),
		"configdeliveries.configward.dev":        cond("exclude-configward-controller", "request.userInfo.username != '"+controller+"'"),
	}
}

// pinOnlyRevisionPods puts on each webhook the matchConditions every
// installation puts there (MatchConditionsOf), and limits the Pod path's
// second webhook to the namespaces where delivery is on, as the chart
// does.
func pinOnlyRevisionPods(o client.Object) {
	conditions := MatchConditionsOf(ControllerUser)
	switch c := o.(type) {
	case *admissionregistrationv1.ValidatingWebhookConfiguration:
		for i := range c.Webhooks {
			c.Webhooks[i].MatchConditions = append(c.Webhooks[i].MatchConditions, conditions[c.Webhooks[i].Name]...)
		}
	case *admissionregistrationv1.MutatingWebhookConfiguration:
		for i := range c.Webhooks {
			w := &c.Webhooks[i]
			w.MatchConditions = append(w.MatchConditions, conditions[w.Name]...)
			if w.Name == "pod-channels.configward.dev" {
				w.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{v1alpha1.HotChannelsLabel: "true"}}
			}
		}
	}
}

// DecodeManifests reads a multi-document YAML file into typed objects.
func DecodeManifests(path string) ([]client.Object, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	decoder := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(raw), 4096)
	codecs := serializerFor()
	var out []client.Object
	for {
		var doc map[string]any
		if err := decoder.Decode(&doc); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if len(doc) == 0 {
			continue
		}
		js, err := json.Marshal(doc)
		if err != nil {
			return nil, err
		}
		obj, _, err := codecs.Decode(js, nil, nil)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		co, ok := obj.(client.Object)
		if !ok {
			return nil, fmt.Errorf("%s: %T is not an object", path, obj)
		}
		out = append(out, co)
	}
}

// ControllerUser is the identity the in-process controller uses, so that the
// audit log tells its writes from everyone else's: the username the API
// server gives the chart's controller service account (in namespace
// configward-system), which configward's own flags name as itself.
const ControllerUser = "system:serviceaccount:" + controllerNamespace + ":" + controllerName

// ControllerServiceAccount is the same identity as --configward-service-accounts
// takes it (namespace/name).
const ControllerServiceAccount = controllerNamespace + "/" + controllerName

const controllerNamespace, controllerName = "configward-system", "configward-controller"

// HashKey reads the installation's config-hash key, for tests that compute
// the hash configward should have stamped.
func (e *Env) HashKey(ctx context.Context) ([]byte, error) {
	var s corev1.Secret
	if err := e.Client.Get(ctx, client.ObjectKey{Namespace: Namespace, Name: HashKeySecret}, &s); err != nil {
		return nil, err
	}
	return s.Data[hashkey.DataKey], nil
}

// StartController runs `configward controller` in-process against the test
// API server as ControllerUser, without leader election unless o asks for
// it, and returns once the process is ready. It stops with the Env, or
// earlier through the returned function (which a test uses to stand for a
// crash or a restart); stopping twice does nothing.
func (e *Env) StartController(o manager.Controller) (stop func() error, err error) {
	probe, err := freeAddr()
	if err != nil {
		return nil, err
	}
	o.MetricsAddr, o.ProbeAddr, o.Restartable = "0", probe, true
	if o.HashKeyNamespace == "" {
		o.HashKeyNamespace, o.HashKeySecret, o.HashKeyPoll = Namespace, HashKeySecret, time.Second
	}
	user, err := e.testEnv.AddUser(envtest.User{Name: ControllerUser, Groups: []string{"system:masters"}}, e.Config)
	if err != nil {
		return nil, err
	}
	cfg := user.Config()
	cfg.QPS, cfg.Burst = e.Config.QPS, e.Config.Burst
	p, err := manager.NewController(cfg, o)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	done, exited := make(chan error, 1), make(chan struct{})
	go func() {
		done <- p.Run(ctx)
		close(exited)
	}()
	var once sync.Once
	var result error
	stop = func() error {
		once.Do(func() {
			cancel()
			result = <-done
		})
		return result
	}
	e.stops = append(e.stops, stop)
	// Ready: its informers have synced, so a change made from now on is
	// seen as a change (and logged as a rollout's cause), not listed as
	// the state the controller found.
	if err := waitProbe("http://"+probe+"/readyz", exited, time.Minute); err != nil {
		return nil, errors.Join(err, stop())
	}
	return stop, nil
}

// waitProbe polls a readiness endpoint until it answers 200, the process
// exits (exited closes; nil: not watched) or a minute passes.
func waitProbe(url string, exited <-chan struct{}, within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		if resp, err := http.Get(url); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s did not answer 200 within %s", url, within)
		}
		select {
		case <-exited:
			return fmt.Errorf("the process ended before %s answered 200", url)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// SkipNamespacesLabelled is a tweak for InstallWebhookConfigurations: every
// webhook skips the namespaces that carry label, where a spec shows what
// happens without configward.
func SkipNamespacesLabelled(label string) func(client.Object) {
	sel := &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: label, Operator: metav1.LabelSelectorOpDoesNotExist}}}
	return func(o client.Object) {
		switch c := o.(type) {
		case *admissionregistrationv1.MutatingWebhookConfiguration:
			for i := range c.Webhooks {
				c.Webhooks[i].NamespaceSelector = sel
			}
		case *admissionregistrationv1.ValidatingWebhookConfiguration:
			for i := range c.Webhooks {
				c.Webhooks[i].NamespaceSelector = sel
			}
		}
	}
}
