package agent

import (
	"context"
	"time"

	"github.com/fsnotify/fsnotify"
	"github.com/go-logr/logr"

	"github.com/configward/configward/internal/reload"
)

// watch reports, on the returned channel, that some directory's ..data may
// have swapped: a file-system event names it, or the poll is due.
func watch(ctx context.Context, configs []reload.Config, poll time.Duration, log logr.Logger) <-chan struct{} {
	out := make(chan struct{}, 1)
	notify := func() {
		select {
		case out <- struct{}{}:
		default:
		}
	}
	w, err := fsnotify.NewWatcher()
	if err != nil {
		log.Error(err, "no file-system events; polling alone")
	} else {
		for _, c := range configs {
			if err := w.Add(c.Dir); err != nil {
				log.Error(err, "no file-system events for a directory; polling it", "dir", c.Dir)
			}
		}
	}
	go func() {
		ticker := time.NewTicker(poll)
		defer ticker.Stop()
		var events <-chan fsnotify.Event
		if w != nil {
			defer w.Close()
			events = w.Events
		}
		for {
			select {
			case <-ctx.Done():
				return
			case <-ticker.C:
				notify()
			case ev, ok := <-events:
				if !ok {
					events = nil
					continue
				}
				// The kubelet renames ..data_tmp to ..data: one swap.
				if ev.Name != "" && (ev.Has(fsnotify.Create) || ev.Has(fsnotify.Rename)) {
					notify()
				}
			}
		}
	}()
	return out
}
