package main

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/configward/configward/internal/scheme"
	"github.com/configward/configward/internal/status"
	"github.com/configward/configward/internal/workload"
)

// statusFormats are the values of status -o.
var statusFormats = []string{"table", "wide", "json", "yaml"}

func newStatusCommand() *cobra.Command {
	var (
		namespace, kubeconfig, kubeContext, output, kindsFile string
		allNamespaces, wait                                   bool
		timeout                                               time.Duration
	)
	cmd := &cobra.Command{
		Use:   "status [KIND/NAME]",
		Short: "Show which pods run which config, per workload (exit 1 when any runs stale config)",
		Long: `Show, for every workload that carries a config hash, how many of its pods
run the config its ConfigMaps and Secrets give now and how many an older
one, whether a rollout is pending, progressing, done or will not happen
(paused, OnDelete, a Job, opted out), and which config changed last.

It reads the cluster with your kubeconfig: the Reports configward's
controller writes (openreports.io/v1alpha1) and the workloads, ReplicaSets,
Jobs and Pods; never a Secret. Without Reports it compares pods with their
pod template's hash and says so on stderr.

For hot config (configward.dev/reload: hot), which pods reload in place,
it shows where each workload's pods stand with the current content, as
the reload agent in each pod reports it: applied, unconfirmed (the
program was told and nothing checks), rejected by the program, still on
older content, not reported yet, or without an agent (unknown).

Exit codes: 0 every pod runs current config; 1 some pod runs stale config
(or, with --wait, still did when the timeout ran out); 2 bad usage or the
cluster could not be read; 3 a program rejected the current content of a
hot config. Use it as a check after a deploy:

  configward status -n shop deployment/web || echo "web still runs old config"

or, with --wait, as the step of a pipeline that goes on only once every
pod runs the new config (a rotation's "all pods report using B"):

  configward status -n shop deployment/web --wait --timeout 10m

Also a kubectl plugin: put the binary on PATH as kubectl-configward and run
"kubectl configward status".`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !slices.Contains(statusFormats, output) {
				return usageError(cmd, fmt.Errorf("-o must be one of %s, not %q", strings.Join(statusFormats, ", "), output))
			}
			reg, err := workload.LoadDeclarations(kindsFile)
			if err != nil {
				return exitError{2, fmt.Errorf("--workload-kinds: %w", err)}
			}
			opts := status.Options{Registry: reg}
			if len(args) == 1 {
				k, name, err := parseWorkloadArg(reg, args[0])
				if err != nil {
					return usageError(cmd, err)
				}
				if allNamespaces {
					return usageError(cmd, fmt.Errorf("a workload name needs one namespace, not --all-namespaces"))
				}
				opts.Kind, opts.Name = k, name
			}
			c, ns, err := clusterClient(kubeconfig, kubeContext, namespace)
			if err != nil {
				return err
			}
			if !allNamespaces {
				opts.Namespace = ns
			}
			res, err := status.Gather(cmd.Context(), c, opts)
			if err != nil {
				return exitError{2, err}
			}
			if wait {
				if res, err = waitSettled(cmd, c, opts, res, timeout); err != nil {
					return exitError{2, err}
				}
			}
			out := cmd.OutOrStdout()
			switch output {
			case "json":
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				err = enc.Encode(res)
			case "yaml":
				var b []byte
				if b, err = yaml.Marshal(res); err == nil {
					_, err = out.Write(b)
				}
			default:
				err = status.PrintTable(out, res, allNamespaces, output == "wide", time.Now())
			}
			if err != nil {
				return exitError{2, err}
			}
			for _, n := range res.Notes {
				fmt.Fprintln(cmd.ErrOrStderr(), "note:", n)
			}
			switch {
			case res.Rejected():
				return exitError{3, fmt.Errorf("a program rejected the current content of hot config (see the notes above)")}
			case res.Stale() || (wait && !res.Settled()):
				// The table said which; stderr gets no repeat (exitCode
				// prints nothing for code 1).
				return exitError{1, alreadyShown{fmt.Errorf("workloads run stale config")}}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVarP(&namespace, "namespace", "n", "", "Namespace to look in (default: the kubeconfig context's).")
	f.BoolVarP(&allNamespaces, "all-namespaces", "A", false, "Look in every namespace.")
	f.StringVarP(&output, "output", "o", "table", "Output format: table, wide (with hashes), json or yaml.")
	f.StringVar(&kubeconfig, "kubeconfig", "", "Path to the kubeconfig file (default: $KUBECONFIG or ~/.kube/config).")
	f.StringVar(&kubeContext, "context", "", "The kubeconfig context to use.")
	f.BoolVar(&wait, "wait", false, "Wait until every pod runs the current config and every pod with a reload agent reports the current hot content (or a program rejects it), then print.")
	f.DurationVar(&timeout, "timeout", 5*time.Minute, "With --wait, how long to wait before giving up (exit 1).")
	f.StringVar(&kindsFile, "workload-kinds", "", "A file declaring custom workload kinds (the chart's workloadKinds, as for check), shown like the built-in ones.")
	return cmd
}

// waitPoll is how often status --wait looks again.
const waitPoll = 2 * time.Second

// waitSettled gathers again until res is settled, a program rejects hot
// content, or timeout runs out, saying on stderr what it waits for.
func waitSettled(cmd *cobra.Command, c client.Reader, opts status.Options, res status.Result, timeout time.Duration) (status.Result, error) {
	deadline := time.Now().Add(timeout)
	said := ""
	for !res.Settled() && !res.Rejected() && time.Now().Before(deadline) {
		if w := status.Waiting(res); w != said {
			fmt.Fprintln(cmd.ErrOrStderr(), "waiting:", w)
			said = w
		}
		select {
		case <-cmd.Context().Done():
			return res, cmd.Context().Err()
		case <-time.After(min(waitPoll, time.Until(deadline))):
		}
		var err error
		if res, err = status.Gather(cmd.Context(), c, opts); err != nil {
			return res, err
		}
	}
	return res, nil
}

// parseWorkloadArg reads KIND/NAME the way kubectl does: the kind by its
// name, plural, short name, any case, optionally with its group
// ("deploy/web", "deployments.apps/web", "CronJob/nightly").
func parseWorkloadArg(reg *workload.Registry, arg string) (workload.Kind, string, error) {
	kindName, name, ok := strings.Cut(arg, "/")
	if !ok || kindName == "" || name == "" {
		return workload.Kind{}, "", fmt.Errorf("expected KIND/NAME (for example deployment/web), not %q", arg)
	}
	k, ok := reg.Resolve(kindName, reg.RolledKinds())
	if !ok {
		return workload.Kind{}, "", fmt.Errorf("%q is not a workload kind configward stamps", kindName)
	}
	return k, name, nil
}

// clusterClient is a client of the cluster the kubeconfig (and context)
// names, with the namespace to work in: namespace, or the context's.
func clusterClient(kubeconfig, kubeContext, namespace string) (client.Client, string, error) {
	loading := clientcmd.NewDefaultClientConfigLoadingRules()
	loading.ExplicitPath = kubeconfig
	overrides := &clientcmd.ConfigOverrides{CurrentContext: kubeContext}
	overrides.Context.Namespace = namespace
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(loading, overrides)
	cfg, err := cc.ClientConfig()
	if err != nil {
		return nil, "", exitError{2, fmt.Errorf("reading kubeconfig: %w", err)}
	}
	ns, _, err := cc.Namespace()
	if err != nil {
		return nil, "", exitError{2, fmt.Errorf("reading kubeconfig: %w", err)}
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme.Scheme()})
	if err != nil {
		return nil, "", exitError{2, fmt.Errorf("connecting to the cluster: %w", err)}
	}
	return c, ns, nil
}
