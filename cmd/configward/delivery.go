package main

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/internal/configset"
	"github.com/configward/configward/internal/delivery"
	"github.com/configward/configward/internal/refs"
	"github.com/configward/configward/internal/revision"
)

func newDeliveryCommand() *cobra.Command {
	var namespace, kubeconfig, kubeContext string
	var timeout, settle time.Duration
	cmd := &cobra.Command{
		Use:   "delivery promote|halt|resume|wait (configmap|secret|configset)/NAME",
		Short: "Move a config delivery on by hand (promote, halt, resume), or wait until it is delivered",
		Long: `delivery asks the newest delivery of a ConfigMap or Secret (alone or in a
change set: every member moves with it), or of a ConfigSet's newest
version, to move on:

  promote  start the next wave of a delivery that waits for approval, is
           halted (a failed or inconclusive check included), or soaks (the
           current wave counts as passed); during the bake after the last
           wave, end it: the delivery succeeds
  halt     stop a delivery: no further workload is re-stamped
  resume   judge a halted delivery's current wave again, with a new deadline
           and its checks measured anew; after the bake failed, every wave
           takes the delivered content again and the bake starts over
  wait     wait until the config's newest delivery ends, for a pipeline's
           next step: exit 0 when it succeeded, 1 when it still moves (or
           waits for approval) at --timeout, 2 on bad usage or when the
           config or its deliveries cannot be read (no delivery by the
           timeout included), 3 when it halted (rolled back or not) or was
           cancelled. A superseded delivery is not an answer: wait follows
           the config's newest delivery, which supersedes it. A delivery
           starts a batch window after the write it delivers and keeps the
           config's resourceVersion: one of an earlier write is taken only
           once --settle has passed since the config's last write without
           a newer one (that write changed no content).

The request is written into the ConfigDelivery's spec.request; configward's
webhook records who made it, and its controller acts on it once. RBAC
decides who may (the chart's <release>-delivery-operator ClusterRole).`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 2 {
				return usageError(cmd, fmt.Errorf("want an action (promote, halt, resume, wait) and a config (configmap/NAME, secret/NAME or configset/NAME)"))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			waiting := strings.EqualFold(args[0], "wait")
			action, err := deliveryAction(args[0])
			if err != nil && !waiting {
				return usageError(cmd, err)
			}
			set, src, err := deliveredConfig(args[1])
			if err != nil {
				return usageError(cmd, err)
			}
			c, ns, err := clusterClient(kubeconfig, kubeContext, namespace)
			if err != nil {
				return err
			}
			if waiting && set != "" {
				return waitConfigSet(cmd, c, ns, set, timeout)
			}
			if waiting {
				return waitDelivered(cmd, c, ns, src, timeout, settle)
			}
			var list v1alpha1.ConfigDeliveryList
			if err := c.List(cmd.Context(), &list, client.InNamespace(ns)); err != nil {
				return exitError{2, fmt.Errorf("listing ConfigDeliveries in %s: %w", ns, err)}
			}
			recs := make([]*v1alpha1.ConfigDelivery, len(list.Items))
			for i := range list.Items {
				recs[i] = &list.Items[i]
			}
			what := fmt.Sprintf("%s %s/%s", src.Kind, ns, src.Name)
			var rec *v1alpha1.ConfigDelivery
			if set != "" {
				what, rec = fmt.Sprintf("ConfigSet %s/%s", ns, set), configset.Latest(recs, set)
			} else {
				rec = delivery.Latest(recs, src)
			}
			if rec == nil {
				return exitError{1, fmt.Errorf("%s has no delivery", what)}
			}
			if !delivery.Open(rec.Status.State) {
				return exitError{1, fmt.Errorf("the newest delivery of %s, %s, is finished (%s): there is nothing to %s", what, rec.Name, rec.Status.State, strings.ToLower(string(action)))}
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
	f.DurationVar(&timeout, "timeout", 10*time.Minute, "wait: how long to wait before giving up (exit 1).")
	f.DurationVar(&settle, "settle", 30*time.Second, "wait: how long after the config's last write a delivery of an earlier write waits for a newer one before it counts.")
	return cmd
}

func deliveryAction(s string) (v1alpha1.DeliveryAction, error) {
	for _, a := range []v1alpha1.DeliveryAction{v1alpha1.ActionPromote, v1alpha1.ActionHalt, v1alpha1.ActionResume} {
		if strings.EqualFold(s, string(a)) {
			return a, nil
		}
	}
	return "", fmt.Errorf("unknown action %q: want promote, halt, resume or wait", s)
}

// deliveredConfig reads what a delivery command is about: a config
// (configmap/NAME, secret/NAME), which resolves to the newest delivery that
// carries it, alone or in a change set; or a ConfigSet (configset/NAME),
// which resolves to the delivery of its newest version.
func deliveredConfig(s string) (set string, src revision.Source, err error) {
	kind, name, ok := strings.Cut(s, "/")
	switch strings.ToLower(kind) {
	case "configmap", "configmaps", "cm":
		kind = string(refs.ConfigMap)
	case "secret", "secrets":
		kind = string(refs.Secret)
	case "configset", "configsets", "cfset":
		if ok && name != "" {
			return name, revision.Source{}, nil
		}
	default:
		ok = false
	}
	if !ok || name == "" {
		return "", revision.Source{}, fmt.Errorf("%q is not configmap/NAME, secret/NAME or configset/NAME", s)
	}
	return "", revision.Source{Kind: refs.Kind(kind), Name: name}, nil
}
