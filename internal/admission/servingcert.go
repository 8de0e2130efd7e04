package admission

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/internal/inventory"
	"github.com/configward/configward/internal/refs"
	"github.com/configward/configward/internal/reload"
)

// The serving-certificate check (v1alpha1.ServingCertAnnotation): which
// Secret each port should present is decided here, once, at the pod's
// creation, and written into the agent's spec, where the report endpoint
// reads it back (reload.ServingCertsOf). The agent gets a volume of its
// own per port that projects the certificate alone: tls.crt, and ca.crt
// where the Secret has one; never tls.key.

// servingCerts resolves the ports pod's annotation names to the Secret
// each container mounts its certificate from; an error says what the
// annotation gets wrong for this pod spec.
func servingCerts(ctx context.Context, inv *inventory.Inventory, namespace string, annotations map[string]string, spec *corev1.PodSpec) ([]reload.ServingCert, error) {
	v, ok := annotations[v1alpha1.ServingCertAnnotation]
	if !ok {
		return nil, nil
	}
	certs, err := reload.ParseServingCerts(v)
	if err != nil {
		return nil, err
	}
	mounted := refs.FromPodSpec(spec)
	for i, c := range certs {
		container := c.Container
		if container == "" {
			if len(spec.Containers) != 1 {
				return nil, fmt.Errorf("port %d names no container, and the pod has %d: write %d@<container>", c.Port, len(spec.Containers), c.Port)
			}
			container = spec.Containers[0].Name
		} else if containerIndex(spec.Containers, container) < 0 {
			return nil, fmt.Errorf("port %d: the pod has no container %s", c.Port, container)
		}
		var candidates, secrets []string
		for _, r := range mounted {
			if r.Kind != refs.Secret || r.Volume == "" || r.Container != container || r.ContainerType != refs.Regular || slices.Contains(secrets, r.Name) {
				continue
			}
			secrets = append(secrets, r.Name)
			if r.Keys != nil && !slices.Contains(r.Keys, reload.TLSCert) {
				continue // its items project no certificate
			}
			o, err := inv.Get(ctx, refs.Secret, namespace, r.Name)
			if err != nil {
				return nil, err
			}
			// A Secret not there yet (cert-manager issues it after the
			// workload is applied) may well hold one.
			if !o.Exists || o.KeyDigests[reload.TLSCert] != "" {
				candidates = append(candidates, r.Name)
			}
		}
		switch {
		case c.Secret != "" && !slices.Contains(secrets, c.Secret):
			return nil, fmt.Errorf("port %d: container %s mounts no Secret %s as a volume", c.Port, container, c.Secret)
		case c.Secret != "":
		case len(candidates) == 1:
			c.Secret = candidates[0]
		case len(candidates) == 0:
			return nil, fmt.Errorf("port %d: container %s mounts no Secret with a %s as a volume", c.Port, container, reload.TLSCert)
		default:
			return nil, fmt.Errorf("port %d: container %s mounts several certificates (%s): say which the port presents with %d@%s;secret=<name>",
				c.Port, container, strings.Join(candidates, ", "), c.Port, container)
		}
		c.Container = container
		c.Dir = reload.CertDir(c.Port)
		certs[i] = c
	}
	return certs, nil
}
