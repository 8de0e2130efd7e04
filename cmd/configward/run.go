package main

import (
	"context"
	"fmt"

	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/configward/configward/internal/manager"
)

type process interface{ Run(context.Context) error }

// run is the start-up both processes share: check the flags, set up logs,
// connect to the API server, build the process and serve until SIGTERM.
func run(c *manager.Common, validate func() error, build func(*rest.Config) (process, error), msg string, kv ...any) error {
	if err := validate(); err != nil {
		return err
	}
	c.SetupLogging()
	cfg, err := c.RESTConfig()
	if err != nil {
		return fmt.Errorf("connecting to the API server: %w", err)
	}
	p, err := build(cfg)
	if err != nil {
		return err
	}
	ctrl.Log.Info(msg, kv...)
	ctx := ctrl.SetupSignalHandler()
	manager.DumpHeapOnSignal(ctx, c.HeapDumpFile)
	return p.Run(ctx)
}
