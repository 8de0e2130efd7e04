package main

import (
	"github.com/spf13/cobra"
)

func newRootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:   "configward",
		Short: "Enforce safe ConfigMap and Secret patterns at the Kubernetes API server",
		Long: `configward is a Kubernetes admission webhook and controller for ConfigMaps and Secrets.

It rolls workloads when the configuration they consume changes, rejects
mounts that never receive updates, validates ConfigMap contents against
declared schemas, keeps in-place edits to the deployment pipeline, and warns
about Secrets passed as environment variables.

Run "configward webhook" and "configward controller" as two Deployments
(the Helm chart does this).`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newWebhookCommand(), newControllerCommand(), newCheckCommand(), newVersionCommand())
	return root
}
