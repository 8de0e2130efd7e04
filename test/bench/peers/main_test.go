package peers

import (
	"fmt"
	"os"
	"testing"

	"github.com/go-logr/logr"
	"k8s.io/klog/v2"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
)

func TestMain(m *testing.M) {
	if os.Getenv(floorAddrEnv) != "" {
		// This binary started again as the floor stack's webhook.
		if err := serveFloor(); err != nil {
			fmt.Fprintln(os.Stderr, "floor webhook:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	// The load phases end by cancelling requests in flight; client-go logs
	// each one. The measurements are the output, not those lines.
	klog.SetLogger(logr.Discard())
	ctrllog.SetLogger(logr.Discard())
	os.Exit(m.Run())
}
