package main

import (
	"fmt"
	"strings"

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
		// What cobra uses for its own suggestions; SuggestionsFor reads it.
		SuggestionsMinimumDistance: 2,
		// Runnable with Args, so a mistyped command ("configward chek")
		// reaches Args and is a usage error (exit 2); cobra's own "unknown
		// command" error would exit 1, which check uses for "denied".
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return unknownCommand(cmd, args[0])
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	// A mistyped flag or a bad flag value, of any command, is a usage error
	// too (subcommands inherit this). At the root, a flag is unknown because
	// the command before it is ("configward chek -f x"): say that instead.
	root.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error {
		if args := cmd.Flags().Args(); !cmd.HasParent() && len(args) > 0 {
			return unknownCommand(cmd, args[0])
		}
		return usageError(cmd, err)
	})
	root.AddCommand(newWebhookCommand(), newControllerCommand(), newCheckCommand(), newStatusCommand(), newDeliveryCommand(), newAgentCommand(), newVersionCommand())
	return root
}

// unknownCommand is the usage error for a command configward does not have,
// with cobra's suggestions.
func unknownCommand(root *cobra.Command, name string) error {
	err := fmt.Errorf("unknown command %q for %q", name, root.CommandPath())
	if s := root.SuggestionsFor(name); len(s) > 0 {
		err = fmt.Errorf("%w: did you mean %s?", err, strings.Join(s, " or "))
	}
	return usageError(root, err)
}
