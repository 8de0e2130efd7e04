package main

import (
	"fmt"

	"github.com/spf13/cobra"
	ctrl "sigs.k8s.io/controller-runtime"

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
			if err := o.Validate(); err != nil {
				return err
			}
			o.SetupLogging()
			cfg, err := o.RESTConfig()
			if err != nil {
				return fmt.Errorf("connecting to the API server: %w", err)
			}
			p, err := manager.NewWebhook(cfg, o)
			if err != nil {
				return err
			}
			ctrl.Log.Info("starting configward webhook", "version", version)
			return p.Run(ctrl.SetupSignalHandler())
		},
	}
	o.AddFlags(cmd.Flags())
	return cmd
}
