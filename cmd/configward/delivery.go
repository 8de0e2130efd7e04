package main

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/internal/delivery"
	"github.com/configward/configward/internal/refs"
	"github.com/configward/configward/internal/revision"
)

func newDeliveryCommand() *cobra.Command {
	var namespace, kubeconfig, kubeContext string
	cmd := &cobra.Command{
		Use:   "delivery promote|halt|resume (configmap|secret)/NAME",
		Short: "Move a config delivery on by hand: promote, halt or resume it",
		Long: `delivery asks the newest delivery of a ConfigMap or Secret to move on:

  promote  start the next wave of a delivery that waits for approval, is
           halted (a failed or inconclusive check included), or soaks (the
           current wave counts as passed); during the bake after the last
           wave, end it: the delivery succeeds
  halt     stop a delivery: no further workload is re-stamped
  resume   judge a halted delivery's current wave again, with a new deadline
           and its checks measured anew; after the bake failed, every wave
           takes the delivered content again and the bake starts over

The request is written into the ConfigDelivery's spec.request; configward's
webhook records who made it, and its controller acts on it once. RBAC
decides who may (the chart's <release>-delivery-operator ClusterRole).`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 2 {
				return usageError(cmd, fmt.Errorf("want an action (promote, halt, resume) and a config (configmap/NAME or secret/NAME)"))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			action, err := deliveryAction(args[0])
			if err != nil {
				return usageError(cmd, err)
			}
			src, err := deliveredConfig(args[1])
			if err != nil {
				return usageError(cmd, err)
			}
			c, ns, err := clusterClient(kubeconfig, kubeContext, namespace)
			if err != nil {
				return err
			}
			var list v1alpha1.ConfigDeliveryList
			if err := c.List(cmd.Context(), &list, client.InNamespace(ns)); err != nil {
				return exitError{2, fmt.Errorf("listing ConfigDeliveries in %s: %w", ns, err)}
			}
			recs := make([]*v1alpha1.ConfigDelivery, len(list.Items))
			for i := range list.Items {
				recs[i] = &list.Items[i]
			}
			rec := delivery.Latest(recs, src)
			if rec == nil {
				return exitError{1, fmt.Errorf("%s %s/%s has no delivery", src.Kind, ns, src.Name)}
			}
			id := make([]byte, 8)
			_, _ = rand.Read(id)
			before := rec.DeepCopy()
			rec.Spec.Request = &v1alpha1.DeliveryRequest{Action: action, ID: hex.EncodeToString(id)}
			// A merge patch of spec.request alone, without an optimistic
			// lock: the controller rewrites the status all the time, and the
			// request's fresh id already tells it from any other.
			if err := c.Patch(cmd.Context(), rec, client.MergeFrom(before)); err != nil {
				return exitError{2, fmt.Errorf("writing the request into ConfigDelivery %s/%s: %w", ns, rec.Name, err)}
			}
			fmt.Fprintf(cmd.OutOrStdout(), "configdelivery.configward.dev/%s: %s requested by %s (state was %s, wave %s)\n",
				rec.Name, strings.ToLower(string(action)), rec.Spec.Request.RequestedBy, before.Status.State, before.Status.CurrentWave)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVarP(&namespace, "namespace", "n", "", "Namespace of the config (default: the kubeconfig context's).")
	f.StringVar(&kubeconfig, "kubeconfig", "", "Path to the kubeconfig file (default: $KUBECONFIG or ~/.kube/config).")
	f.StringVar(&kubeContext, "context", "", "The kubeconfig context to use.")
	return cmd
}

func deliveryAction(s string) (v1alpha1.DeliveryAction, error) {
	for _, a := range []v1alpha1.DeliveryAction{v1alpha1.ActionPromote, v1alpha1.ActionHalt, v1alpha1.ActionResume} {
		if strings.EqualFold(s, string(a)) {
			return a, nil
		}
	}
	return "", fmt.Errorf("unknown action %q: want promote, halt or resume", s)
}

func deliveredConfig(s string) (revision.Source, error) {
	kind, name, ok := strings.Cut(s, "/")
	switch strings.ToLower(kind) {
	case "configmap", "configmaps", "cm":
		kind = string(refs.ConfigMap)
	case "secret", "secrets":
		kind = string(refs.Secret)
	default:
		ok = false
	}
	if !ok || name == "" {
		return revision.Source{}, fmt.Errorf("%q is not configmap/NAME or secret/NAME", s)
	}
	return revision.Source{Kind: refs.Kind(kind), Name: name}, nil
}
