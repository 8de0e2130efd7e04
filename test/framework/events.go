package framework

import (
	"context"

	eventsv1 "k8s.io/api/events/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// EventNotes are the notes of the Events of reason in namespace ns
// regarding the object called name, as `kubectl events` lists them.
func (e *Env) EventNotes(ctx context.Context, ns, name, reason string) ([]string, error) {
	var list eventsv1.EventList
	if err := e.Client.List(ctx, &list, client.InNamespace(ns)); err != nil {
		return nil, err
	}
	var out []string
	for _, ev := range list.Items {
		if ev.Regarding.Name == name && ev.Reason == reason {
			out = append(out, ev.Note)
		}
	}
	return out, nil
}
