package webhookscope

import (
	"maps"
	"slices"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
)

// Unjudged are the identities the workload, ConfigMap, ConfigSchema and
// ConfigPolicy webhooks never judge, one by one with the reason: the parts
// of Kubernetes that write what those webhooks judge, in every namespace,
// and that must never wait on configward (what they write was judged at
// its source: a pod at its workload's template, a ReplicaSet at its
// Deployment). Every other identity is judged, add-ons in kube-system
// included. The chart's webhooks and every test and demo install carry
// exactly these (UnjudgedConditions; a chart test keeps the two equal).
var Unjudged = map[string]string{
	"system:apiserver":               "kube-apiserver's loopback client (its own objects)",
	"system:kube-controller-manager": "kube-controller-manager, for every controller that runs without a service account of its own",
	"system:kube-scheduler":          "kube-scheduler, which binds pods",
	ksa("replicaset-controller"):     "creates the pods of ReplicaSets (judged at their template)",
	ksa("statefulset-controller"):    "creates the pods and ControllerRevisions of StatefulSets",
	ksa("daemon-set-controller"):     "creates the pods and ControllerRevisions of DaemonSets",
	ksa("job-controller"):            "creates the pods of Jobs",
	ksa("cronjob-controller"):        "creates the Jobs of CronJobs",
	ksa("deployment-controller"):     "creates and scales the ReplicaSets of Deployments",
	ksa("generic-garbage-collector"): "removes owner references and finalizers of every kind",
	ksa("namespace-controller"):      "deletes a namespace's objects",
	ksa("root-ca-cert-publisher"):    "writes the kube-root-ca.crt ConfigMap of every namespace",
}

// UnjudgedGroup is the group whose members are never judged: the
// kubelets, which create mirror pods of static pods.
const UnjudgedGroup = "system:nodes"

func ksa(name string) string { return "system:serviceaccount:kube-system:" + name }

// The names of the conditions that keep Unjudged away.
const (
	ExcludeUnjudgedCondition = "exclude-kubernetes-components"
	ExcludeNodesCondition    = "exclude-nodes"
)

// UnjudgedConditions are the matchConditions that keep Unjudged and
// UnjudgedGroup away from a webhook, usernames sorted.
func UnjudgedConditions() []admissionregistrationv1.MatchCondition {
	users := slices.Sorted(maps.Keys(Unjudged))
	quoted := make([]string, len(users))
	for i, u := range users {
		quoted[i] = quote(u)
	}
	return []admissionregistrationv1.MatchCondition{
		{Name: ExcludeUnjudgedCondition, Expression: "!(request.userInfo.username in [" + strings.Join(quoted, ", ") + "])"},
		{Name: ExcludeNodesCondition, Expression: "!(" + quote(UnjudgedGroup) + " in request.userInfo.groups)"},
	}
}
