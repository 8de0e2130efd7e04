package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/internal/delivery"
	"github.com/configward/configward/internal/revision"
)

// waitDelivered is `configward delivery wait`: it polls the newest
// delivery of src until waitAnswer has an answer or timeout runs out,
// saying on stderr what it waits for.
func waitDelivered(cmd *cobra.Command, c client.Client, ns string, src revision.Source, timeout, settle time.Duration) error {
	ctx := cmd.Context()
	deadline := time.Now().Add(timeout)
	said, forbidden := "", false
	for {
		// Only the metadata: when the config was last written. A Secret's
		// values are never read.
		config := &metav1.PartialObjectMetadata{}
		config.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind(string(src.Kind)))
		var written *metav1.PartialObjectMetadata
		switch err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: src.Name}, config); {
		case apierrors.IsNotFound(err):
			return exitError{2, fmt.Errorf("%s %s/%s does not exist: there is nothing to wait for", src.Kind, ns, src.Name)}
		case apierrors.IsForbidden(err):
			if !forbidden {
				fmt.Fprintf(cmd.ErrOrStderr(), "note: %s %s/%s cannot be read (%v): the newest delivery counts even if it is of an older write\n", src.Kind, ns, src.Name, err)
				forbidden = true
			}
		case err != nil:
			return exitError{2, fmt.Errorf("reading %s %s/%s: %w", src.Kind, ns, src.Name, err)}
		default:
			written = config
		}
		var list v1alpha1.ConfigDeliveryList
		if err := c.List(ctx, &list, client.InNamespace(ns)); err != nil {
			return exitError{2, fmt.Errorf("listing ConfigDeliveries in %s: %w", ns, err)}
		}
		recs := make([]*v1alpha1.ConfigDelivery, len(list.Items))
		for i := range list.Items {
			recs[i] = &list.Items[i]
		}
		rec := delivery.Latest(recs, src)
		var seen metav1.Object
		if written != nil {
			seen = written
		}
		a := waitAnswer(rec, src, seen, time.Now(), settle)
		if a.done {
			if a.code == 0 {
				fmt.Fprintln(cmd.OutOrStdout(), a.message)
				return nil
			}
			return exitError{a.code, fmt.Errorf("%s", a.message)}
		}
		if !time.Now().Before(deadline) {
			if rec == nil {
				return exitError{2, fmt.Errorf("%s %s/%s has had no delivery in %s: is delivery on for the namespace (a ConfigPolicy's delivery), and does a workload consume the config?", src.Kind, ns, src.Name, timeout)}
			}
			return exitError{1, fmt.Errorf("still delivering after %s: %s", timeout, a.message)}
		}
		if a.message != said {
			fmt.Fprintln(cmd.ErrOrStderr(), "waiting:", a.message)
			said = a.message
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(min(waitPoll, time.Until(deadline))):
		}
	}
}

// answer is what one look of `configward delivery wait` says: done with
// an exit code, or what it waits for.
type answer struct {
	done    bool
	code    int
	message string
}

// waitAnswer judges rec, the newest delivery of src, whose config is
// config (nil: it could not be read), at now. A delivery is created a batch window after the write
// it delivers, and records the config's resourceVersion then: one of
// another resourceVersion may be of an older content, and counts only once
// settle has passed since the config's last write without a newer one (the
// write changed no content: a label, say). A superseded delivery is not an
// answer: its successor is the config's newest, and the next look finds it.
func waitAnswer(rec *v1alpha1.ConfigDelivery, src revision.Source, config metav1.Object, now time.Time, settle time.Duration) answer {
	if rec == nil {
		return answer{message: "no delivery of the config yet"}
	}
	name := "ConfigDelivery " + rec.Name
	if config != nil && delivery.DeliveredAt(rec, src) != config.GetResourceVersion() {
		if written := lastWrite(config); now.Sub(written) < settle {
			return answer{message: fmt.Sprintf("%s is of an earlier write of the config than its last (%s): waiting up to %s for the delivery of that write", name, written.UTC().Format(time.RFC3339), settle)}
		}
	}
	st := rec.Status
	switch st.State {
	case v1alpha1.DeliverySucceeded:
		return answer{done: true, message: name + " succeeded: every wave holds the delivered content"}
	case v1alpha1.DeliveryHalted:
		back := ""
		if st.RolledBack {
			back = ", rolled back"
		}
		return answer{done: true, code: 3, message: fmt.Sprintf("%s halted at wave %s%s (%s): %s", name, st.CurrentWave, back, st.Reason, st.Message)}
	case v1alpha1.DeliveryCancelled:
		return answer{done: true, code: 3, message: fmt.Sprintf("%s was cancelled (%s): %s", name, st.Reason, st.Message)}
	case v1alpha1.DeliverySuperseded:
		return answer{message: name + " was superseded: waiting for the newer delivery"}
	case v1alpha1.DeliveryWaitingForApproval:
		return answer{message: fmt.Sprintf("%s waits for approval of wave %s (configward delivery promote)", name, st.CurrentWave)}
	case "":
		return answer{message: name + " is being placed"}
	}
	return answer{message: fmt.Sprintf("%s is %s at wave %s: %s", name, st.State, st.CurrentWave, st.Message)}
}

// lastWrite is when any field manager last wrote o (zero when the API
// server keeps no managed fields).
func lastWrite(o metav1.Object) time.Time {
	var t time.Time
	for _, m := range o.GetManagedFields() {
		if m.Time != nil && m.Time.After(t) {
			t = m.Time.Time
		}
	}
	return t
}

// waitConfigSet is `configward delivery wait configset/NAME`: it polls the
// set until its conditions, for its current generation, say Ready (exit 0)
// or Stalled (3: timed out, a member claimed by another set, or its
// delivery halted or cancelled), or timeout runs out (1).
func waitConfigSet(cmd *cobra.Command, c client.Client, ns, name string, timeout time.Duration) error {
	ctx := cmd.Context()
	deadline := time.Now().Add(timeout)
	said := ""
	for {
		var set v1alpha1.ConfigSet
		switch err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &set); {
		case apierrors.IsNotFound(err):
			return exitError{2, fmt.Errorf("ConfigSet %s/%s does not exist: there is nothing to wait for", ns, name)}
		case err != nil:
			return exitError{2, fmt.Errorf("reading ConfigSet %s/%s: %w", ns, name, err)}
		}
		message := "configward's controller has not looked at version " + set.Spec.Version + " yet"
		if set.Status.ObservedGeneration == set.Generation {
			ready := meta.FindStatusCondition(set.Status.Conditions, v1alpha1.ConditionReady)
			stalled := meta.FindStatusCondition(set.Status.Conditions, v1alpha1.ConditionStalled)
			switch {
			case ready != nil && ready.Status == metav1.ConditionTrue:
				fmt.Fprintf(cmd.OutOrStdout(), "ConfigSet %s version %s is delivered: %s\n", name, set.Spec.Version, ready.Message)
				return nil
			case stalled != nil && stalled.Status == metav1.ConditionTrue:
				return exitError{3, fmt.Errorf("ConfigSet %s version %s stopped (%s): %s", name, set.Spec.Version, stalled.Reason, stalled.Message)}
			case ready != nil:
				message = ready.Reason + ": " + ready.Message
			}
		}
		if !time.Now().Before(deadline) {
			return exitError{1, fmt.Errorf("still delivering after %s: %s", timeout, message)}
		}
		if message != said {
			fmt.Fprintln(cmd.ErrOrStderr(), "waiting:", message)
			said = message
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(min(waitPoll, time.Until(deadline))):
		}
	}
}
