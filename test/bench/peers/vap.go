package peers

import (
	"context"
	"fmt"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// VAP is ValidatingAdmissionPolicy: CEL evaluated inside kube-apiserver, no
// process of its own. It has no way to look up other objects (params are
// one object chosen by the binding, not the ConfigMaps a Deployment
// names), so missing-config-ref cannot be expressed; its policy is
// secret-in-env (validationActions Warn) and subpath-config for ConfigMap
// volumes (Deny), one policy and binding each, plus one policy and binding
// per extra rule, as the Kubernetes documentation writes them.
type VAP struct {
	created []client.Object
}

func (v *VAP) Name() string { return "vap" }
func (v *VAP) PID() int     { return 0 }

// vapContainers are every container of the pod template, init and
// ephemeral ones included, as the other engines check them.
const vapContainers = `object.spec.template.spec.containers +
  (has(object.spec.template.spec.initContainers) ? object.spec.template.spec.initContainers : []) +
  (has(object.spec.template.spec.ephemeralContainers) ? object.spec.template.spec.ephemeralContainers : [])`

func vapPolicy(name string, action admissionregistrationv1.ValidationAction, expression, message string) []client.Object {
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptrTo(admissionregistrationv1.Fail),
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{"apps"}, APIVersions: []string{"v1"}, Resources: []string{"deployments"}},
				},
			}}},
			Variables:   []admissionregistrationv1.Variable{{Name: "containers", Expression: vapContainers}},
			Validations: []admissionregistrationv1.Validation{{Expression: expression, Message: message}},
		},
	}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        name,
			ValidationActions: []admissionregistrationv1.ValidationAction{action},
		},
	}
	return []client.Object{policy, binding}
}

func (v *VAP) Install(ctx context.Context, w *World, extra int) error {
	objs := vapPolicy("secret-in-env", admissionregistrationv1.Warn,
		`variables.containers.all(c,
  (!has(c.env) || c.env.all(e, !has(e.valueFrom) || !has(e.valueFrom.secretKeyRef))) &&
  (!has(c.envFrom) || c.envFrom.all(e, !has(e.secretRef))))`,
		"secret-in-env: a container gets a Secret as env: env leaks to child processes and dumps and never updates. Mount the Secret as a file.")
	objs = append(objs, vapPolicy("subpath-config", admissionregistrationv1.Deny,
		`variables.containers.all(c, !has(c.volumeMounts) || c.volumeMounts.all(m,
  (!has(m.subPath) || m.subPath == '') ||
  !has(object.spec.template.spec.volumes) ||
  !object.spec.template.spec.volumes.exists(v, v.name == m.name && has(v.configMap))))`,
		"subpath-config: a container mounts a ConfigMap with subPath, which never receives updates. Mount the volume as a directory.")...)
	for i := 1; i <= extra; i++ {
		objs = append(objs, vapPolicy(fmt.Sprintf("forbidden-%d", i), admissionregistrationv1.Deny,
			fmt.Sprintf(`variables.containers.all(c, !has(c.env) || c.env.all(e, e.name != 'FORBIDDEN_%d'))`, i),
			fmt.Sprintf("forbidden-%d: a container sets FORBIDDEN_%d.", i, i))...)
	}
	for _, o := range objs {
		if err := w.Env.Client.Create(ctx, o); err != nil {
			return fmt.Errorf("creating %s: %w", o.GetName(), err)
		}
		v.created = append(v.created, o)
	}
	return WaitInForce(ctx, w, extra, 2*time.Minute)
}

func (v *VAP) Uninstall(ctx context.Context, w *World) error {
	for i := len(v.created) - 1; i >= 0; i-- {
		if err := w.Env.Client.Delete(ctx, v.created[i]); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	v.created = nil
	return nil
}

// NoPolicy is the baseline: nothing between the request and etcd but the
// API server's own admission.
type NoPolicy struct{}

func (NoPolicy) Name() string                               { return "none" }
func (NoPolicy) PID() int                                   { return 0 }
func (NoPolicy) Install(context.Context, *World, int) error { return nil }
func (NoPolicy) Uninstall(context.Context, *World) error    { return nil }
