package main

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/internal/refs"
	"github.com/configward/configward/internal/revision"
)

func TestWaitAnswer(t *testing.T) {
	created := time.Date(2026, 12, 6, 12, 0, 10, 0, time.UTC)
	rec := func(state v1alpha1.DeliveryState) *v1alpha1.ConfigDelivery {
		return &v1alpha1.ConfigDelivery{ObjectMeta: metav1.ObjectMeta{Name: "configmap-web-2", CreationTimestamp: metav1.NewTime(created)},
			Spec:   v1alpha1.ConfigDeliverySpec{Config: v1alpha1.ConfigRef{Kind: "ConfigMap", Name: "web", ResourceVersion: "7"}},
			Status: v1alpha1.ConfigDeliveryStatus{State: state, CurrentWave: "canary", Reason: "R", Message: "m"}}
	}
	before, after := created.Add(-5*time.Second), created.Add(5*time.Second)
	config := func(rv string, written time.Time) metav1.Object {
		t := metav1.NewTime(written)
		return &metav1.ObjectMeta{ResourceVersion: rv, ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl", Time: &t}}}
	}
	delivered, rewritten := config("7", before), config("9", after)
	for _, tc := range []struct {
		name      string
		rec       *v1alpha1.ConfigDelivery
		config    metav1.Object
		now       time.Time
		done      bool
		code      int
		mentioned string
	}{
		{"no delivery yet", nil, delivered, created, false, 0, "no delivery"},
		{"succeeded, of the config's last write", rec(v1alpha1.DeliverySucceeded), delivered, after, true, 0, "succeeded"},
		{"succeeded, the config unreadable", rec(v1alpha1.DeliverySucceeded), nil, after, true, 0, "succeeded"},
		{"halted", rec(v1alpha1.DeliveryHalted), delivered, after, true, 3, "halted at wave canary"},
		{"cancelled", rec(v1alpha1.DeliveryCancelled), delivered, after, true, 3, "cancelled"},
		{"superseded: follow the newer", rec(v1alpha1.DeliverySuperseded), delivered, after, false, 0, "superseded"},
		{"waiting for approval", rec(v1alpha1.DeliveryWaitingForApproval), delivered, after, false, 0, "promote"},
		{"progressing", rec(v1alpha1.DeliveryProgressing), delivered, after, false, 0, "Progressing at wave canary"},
		{"of an earlier write: waits for the delivery of the last", rec(v1alpha1.DeliverySucceeded), rewritten, after.Add(time.Second), false, 0, "earlier write of the config"},
		{"and counts once settle passed without a newer one", rec(v1alpha1.DeliverySucceeded), rewritten, after.Add(31 * time.Second), true, 0, "succeeded"},
	} {
		a := waitAnswer(tc.rec, revision.Source{Kind: refs.ConfigMap, Name: "web"}, tc.config, tc.now, 30*time.Second)
		if a.done != tc.done || a.code != tc.code || !strings.Contains(a.message, tc.mentioned) {
			t.Errorf("%s: %+v; want done %v, exit %d, a message with %q", tc.name, a, tc.done, tc.code, tc.mentioned)
		}
	}
}
