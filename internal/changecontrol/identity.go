// Package changecontrol decides who may change or delete a governed
// ConfigMap or Secret (rules out-of-pipeline-edit and config-in-use-delete).
// It is pure: the admission handler hands it the request, the old and new
// content and the live consumers, and gets findings back. It never sees more
// of a value than whether it changed, and reports key names only.
package changecontrol

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	authenticationv1 "k8s.io/api/authentication/v1"
)

// ServiceAccountUser is the username the API server gives a service account.
func ServiceAccountUser(namespace, name string) string {
	return "system:serviceaccount:" + namespace + ":" + name
}

// ParseServiceAccount reads "namespace/name".
func ParseServiceAccount(s string) (username string, err error) {
	ns, name, ok := strings.Cut(s, "/")
	if !ok || ns == "" || name == "" || strings.Contains(name, "/") {
		return "", fmt.Errorf("service account %q: want namespace/name", s)
	}
	return ServiceAccountUser(ns, name), nil
}

// Identities is a set of users, groups and service accounts. Service
// accounts are kept as the usernames the API server authenticates them as.
type Identities struct {
	Users           []string
	Groups          []string
	ServiceAccounts []string // "system:serviceaccount:<ns>:<name>"
}

// Empty is true when no identity is listed.
func (ids Identities) Empty() bool {
	return len(ids.Users) == 0 && len(ids.Groups) == 0 && len(ids.ServiceAccounts) == 0
}

// Includes reports whether u is one of the identities, by username or by
// one of its groups. The API server sets both from authentication, so
// neither can be claimed by a client (impersonation needs its own RBAC).
func (ids Identities) Includes(u authenticationv1.UserInfo) bool {
	if slices.Contains(ids.Users, u.Username) || slices.Contains(ids.ServiceAccounts, u.Username) {
		return true
	}
	for _, g := range u.Groups {
		if slices.Contains(ids.Groups, g) {
			return true
		}
	}
	return false
}

// Merge combines identity lists.
func (ids Identities) Merge(other Identities) Identities {
	return Identities{
		Users:           append(slices.Clone(ids.Users), other.Users...),
		Groups:          append(slices.Clone(ids.Groups), other.Groups...),
		ServiceAccounts: append(slices.Clone(ids.ServiceAccounts), other.ServiceAccounts...),
	}
}

// kubernetesWriters are the identities of Kubernetes' own components that
// write or delete ConfigMaps and Secrets in every namespace. They are
// matched by the authenticated username, never by the object's name: anyone
// can create a ConfigMap called kube-root-ca.crt.
var kubernetesWriters = map[string]string{
	// kube-controller-manager with --use-service-account-credentials (the
	// kubeadm default): each controller has its own service account.
	ServiceAccountUser("kube-system", "namespace-controller"):                 "namespace deletion",
	ServiceAccountUser("kube-system", "generic-garbage-collector"):            "garbage collection",
	ServiceAccountUser("kube-system", "root-ca-cert-publisher"):               "the root CA publisher (kube-root-ca.crt)",
	ServiceAccountUser("kube-system", "legacy-service-account-token-cleaner"): "service-account token cleanup",
	// kube-controller-manager's own identity: every controller without
	// service-account credentials, and always the service-account token
	// controller, which needs it to mint the others' credentials.
	"system:kube-controller-manager": "kube-controller-manager",
	// kube-apiserver's loopback client (e.g. its own ConfigMaps).
	"system:apiserver": "kube-apiserver",
}

// KubernetesWriters lists the usernames of the Kubernetes components change
// control never blocks, sorted (the Helm chart skips exactly these before
// any network hop; a chart test keeps the two lists in step).
func KubernetesWriters() []string { return slices.Sorted(maps.Keys(kubernetesWriters)) }

// KubernetesWriter names the Kubernetes component u is, if it is one.
func KubernetesWriter(u authenticationv1.UserInfo) (string, bool) {
	why, ok := kubernetesWriters[u.Username]
	return why, ok
}

// ByController says a request was made by a controller rather than a
// person: a service account or one of Kubernetes' system identities
// (usernames that start with "system:", which only a cluster's own
// components and service accounts are given). A controller reference in a
// pod a person creates is a claim anyone can write; the Pod path gives it
// weight only in a pod a controller creates.
func ByController(username string) bool {
	return strings.HasPrefix(username, "system:")
}
