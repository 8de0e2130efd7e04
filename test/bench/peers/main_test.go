package peers

import (
	"os"
	"testing"

	"github.com/go-logr/logr"
	"k8s.io/klog/v2"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
)

func TestMain(m *testing.M) {
	// The load phases end by cancelling requests in flight; client-go logs
	// each one. The measurements are the output, not those lines.
	klog.SetLogger(logr.Discard())
	ctrllog.SetLogger(logr.Discard())
	os.Exit(m.Run())
}
