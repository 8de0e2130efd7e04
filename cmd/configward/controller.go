package main

import (
	"fmt"

	"github.com/spf13/cobra"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/configward/configward/internal/manager"
)

func newControllerCommand() *cobra.Command {
	var o manager.Controller
	cmd := &cobra.Command{
		Use:   "controller",
		Short: "Run the leader-elected controller (rollouts on config change, policy and schema status)",
		Long: `Run configward's controller.

It is a separate process from the webhook on purpose: a controller-runtime
manager that loses its leader lease exits, and admission must not go down
with it. Run two replicas; one holds the lease and the other waits.

Endpoints:
  http://<health-probe-bind-address>/healthz, /readyz
  http://<metrics-bind-address>/metrics`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.Validate(); err != nil {
				return err
			}
			o.SetupLogging()
			cfg, err := o.RESTConfig()
			if err != nil {
				return fmt.Errorf("connecting to the API server: %w", err)
			}
			p, err := manager.NewController(cfg, o)
			if err != nil {
				return err
			}
			ctrl.Log.Info("starting configward controller", "version", version, "leaderElection", o.LeaderElect)
			return p.Run(ctrl.SetupSignalHandler())
		},
	}
	o.AddFlags(cmd.Flags())
	return cmd
}
