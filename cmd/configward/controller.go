package main

import (
	"github.com/spf13/cobra"
	"k8s.io/client-go/rest"

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
with it. One replica does the work (the chart runs one); a second only
stands by, holding nothing until it wins the lease, so run two where a
faster failover is worth a pod.

Endpoints:
  http://<health-probe-bind-address>/healthz, /readyz
  http://<metrics-bind-address>/metrics`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return run(&o.Common, o.Validate, func(cfg *rest.Config) (process, error) {
				return manager.NewController(cfg, o)
			}, "starting configward controller", "version", version, "leaderElection", o.LeaderElect)
		},
	}
	o.AddFlags(cmd.Flags())
	return cmd
}
