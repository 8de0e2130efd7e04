package main

import (
	"github.com/spf13/cobra"
	"k8s.io/client-go/rest"

	"github.com/configward/configward/internal/manager"
)

func newWebhookCommand() *cobra.Command {
	var o manager.Webhook
	cmd := &cobra.Command{
		Use:   "webhook",
		Short: "Serve the mutating and validating admission webhooks",
		Long: `Serve configward's admission webhooks over HTTPS to the API server.

Every replica serves; there is no leader election. The serving certificate is
read from --cert-dir and re-read when the files change (cert-manager renewals
reach the pod through the kubelet's symlink swap), without a restart.

Endpoints:
  https://<bind-address>/...          admission webhooks
  http://<health-probe-bind-address>/healthz, /readyz
  http://<metrics-bind-address>/metrics`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return run(&o.Common, o.Validate, func(cfg *rest.Config) (process, error) {
				return manager.NewWebhook(cfg, o)
			}, "starting configward webhook", "version", version)
		},
	}
	o.AddFlags(cmd.Flags())
	return cmd
}
