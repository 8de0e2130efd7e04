package main

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"

	"github.com/configward/configward/internal/api/v1alpha1"
	"github.com/configward/configward/internal/check"
	"github.com/configward/configward/internal/configpolicy"
	"github.com/configward/configward/internal/rules"
	"github.com/configward/configward/internal/workload"
)

// exitError carries the process exit code out of a command. check uses 1
// for "denied" alone, so everything else it fails on is 2 (see exitCode).
type exitError struct {
	code int
	err  error
}

func (e exitError) Error() string { return e.err.Error() }
func (e exitError) Unwrap() error { return e.err }

// usageError is a command line cobra or a command could not use: exit code
// 2, which a CI script can tell from check's 1 (denied).
func usageError(cmd *cobra.Command, err error) error {
	return exitError{2, fmt.Errorf("%w (see %s --help)", err, cmd.CommandPath())}
}

func newCheckCommand() *cobra.Command {
	var (
		files     []string
		output    string
		complete  bool
		namespace string
		policies  []string
		kindsFile string
	)
	cmd := &cobra.Command{
		Use:   "check -f PATH [-f PATH ...]",
		Short: "Run configward's admission rules on manifests, offline (for CI pipelines)",
		Long: `Run the same rules and ConfigSchemas as configward's admission webhook on
manifests, before they reach a cluster.

PATH is a file, a directory (every .yaml, .yml and .json below it) or - for
standard input, so "helm template ... | configward check -f -" works. A List
(kind: List, ConfigMapList, ...) is checked item by item, as kubectl apply
applies it.
References between the given objects are resolved (a Deployment and its
ConfigMaps in one set); a reference to an object that is not among them is
reported as unknown, unless --complete says the set is whole.

Each line is FILE:LINE:COLUMN: ACTION [RULE] MESSAGE, pointing at the field
the finding is about. ACTION is what admission would do (Deny, Warn, Audit),
Unknown for a reference to an object outside the given manifests, or Note
for an exemption annotation that does not count (the webhook returns it as a
warning). -o json, sarif (for code scanning), junit (for CI test reports) and
github (GitHub Actions annotations) print the same findings for machines.

Exit codes: 0 nothing denied, 1 something denied, 2 a usage error or
unusable input (a bad flag, an unreadable file, YAML that does not parse).`,
		// An argument is most likely a manifest without its -f.
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usageError(cmd, fmt.Errorf("unexpected argument %q: pass manifests with -f", args[0]))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			if len(files) == 0 {
				return exitError{2, errors.New("no manifests: pass -f PATH (a file, a directory or - for stdin)")}
			}
			if !slices.Contains(check.Formats, output) {
				return exitError{2, fmt.Errorf("-o must be one of %s, not %q", strings.Join(check.Formats, ", "), output)}
			}
			kinds, err := workload.LoadDeclarations(kindsFile)
			if err != nil {
				return exitError{2, fmt.Errorf("--workload-kinds: %w", err)}
			}
			objs, err := check.LoadKinds(kinds, files, cmd.InOrStdin())
			if err != nil {
				return exitError{2, err}
			}
			store, err := configpolicy.New(cmd.Context(), logr.Discard())
			if err != nil {
				return exitError{2, err}
			}
			if len(policies) > 0 {
				if err := loadPolicies(cmd, store, policies); err != nil {
					return exitError{2, err}
				}
			}
			results, err := check.Run(cmd.Context(), store.Current(), objs, check.Options{Complete: complete, Namespace: namespace, Kinds: kinds})
			if err != nil {
				return exitError{2, err}
			}
			if err := check.Write(cmd.OutOrStdout(), output, check.Report{Objects: objs, Results: results, Version: version}); err != nil {
				return exitError{2, err}
			}
			denied := 0
			for _, r := range results {
				if r.Action == rules.Deny {
					denied++
				}
			}
			if denied > 0 {
				return exitError{1, alreadyShown{fmt.Errorf("%d denied", denied)}}
			}
			return nil
		},
	}
	cmd.Flags().StringArrayVarP(&files, "filename", "f", nil, "Manifests to check: a file, a directory, or - for stdin. Repeatable.")
	cmd.Flags().StringVarP(&output, "output", "o", "text", "Output format: text (FILE:LINE:COLUMN: per finding), json, sarif, junit or github (workflow commands).")
	cmd.Flags().BoolVar(&complete, "complete", false, "The manifests are every object of their namespaces: report references to objects not among them as missing, not unknown.")
	cmd.Flags().StringVarP(&namespace, "namespace", "n", "default", "Namespace assumed for objects that do not set one.")
	cmd.Flags().StringArrayVar(&policies, "policy", nil, "ConfigPolicy manifests (a file, a directory, or -) to take rule actions, exemptions and custom rules from, as the cluster would. Repeatable.")
	cmd.Flags().StringVar(&kindsFile, "workload-kinds", "", "A file declaring custom workload kinds (a YAML list of {group, version, kind, resource, podTemplatePath, ...}, the chart's workloadKinds), judged like the built-in ones. Use the file the cluster's configward runs with.")
	return cmd
}

// loadPolicies puts the ConfigPolicies of the given files in force; a
// policy that does not compile, or a manifest that is not a ConfigPolicy,
// makes the input unusable.
func loadPolicies(cmd *cobra.Command, store *configpolicy.Store, files []string) error {
	objs, err := check.Load(files, cmd.InOrStdin())
	if err != nil {
		return fmt.Errorf("--policy: %w", err)
	}
	for _, o := range objs {
		cp, ok := o.Obj.(*v1alpha1.ConfigPolicy)
		if !ok {
			return fmt.Errorf("--policy: %s:%d: %s is not a ConfigPolicy", o.File, o.Line, o.Obj.GetObjectKind().GroupVersionKind().Kind)
		}
		if err := store.Load(cmd.Context(), cp); err != nil {
			return fmt.Errorf("--policy: %s:%d: ConfigPolicy %s: %w", o.File, o.Line, cp.Name, err)
		}
	}
	return nil
}
