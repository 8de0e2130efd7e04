package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/configward/configward/internal/agent"
	"github.com/configward/configward/internal/reload"
)

func newAgentCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "agent",
		Short: "Run the reload agent in a pod (configward injects it where a pod template asks for it)",
		Long: `Run configward's reload agent, a native sidecar of the pod it runs in.

It watches the hot ConfigMaps and Secrets the pod mounts as directories,
triggers the program's reload once per kubelet swap (a signal, a local HTTP
call, or nothing when the program watches its files), reads back what the
program applied, and reports it to configward as the pod. It never
restarts the program.

configward injects it at pod creation into pods whose template carries
configward.dev/reload-agent, and hands it what to watch in the ` + reload.SpecEnv + `
environment variable (see the documentation to add it by hand).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			spec, err := reload.ParseSpec(os.Getenv(reload.SpecEnv))
			if err != nil {
				return usageError(cmd, err)
			}
			log := zap.New(zap.JSONEncoder()).WithName("agent")
			ctrl.SetLogger(log)
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			log.Info("starting configward reload agent", "version", version, "configs", len(spec.Configs), "trigger", spec.Trigger)
			return agent.Run(ctx, spec, agent.Options{}, log)
		},
	}
}
