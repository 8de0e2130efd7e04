package manager

import (
	"context"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"syscall"

	ctrl "sigs.k8s.io/controller-runtime"
)

// DumpHeapOnSignal writes a dump of the live heap to path each time the
// process gets SIGUSR1, until ctx ends. Collections run first, so the
// dump holds only live objects: what the process keeps, not what it has
// let go of and not yet overwritten.
func DumpHeapOnSignal(ctx context.Context, path string) {
	if path == "" {
		return
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGUSR1)
	go func() {
		defer signal.Stop(sig)
		for {
			select {
			case <-ctx.Done():
				return
			case <-sig:
			}
			// Twice: the first collection moves sync.Pool contents to the
			// pools' victim caches, the second frees them.
			runtime.GC()
			runtime.GC()
			f, err := os.OpenFile(path+".tmp", os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
			if err != nil {
				ctrl.Log.Error(err, "writing a heap dump")
				continue
			}
			debug.WriteHeapDump(f.Fd())
			f.Close()
			if err := os.Rename(path+".tmp", path); err != nil {
				ctrl.Log.Error(err, "writing a heap dump")
				continue
			}
			ctrl.Log.Info("wrote a heap dump", "path", path)
		}
	}()
}
