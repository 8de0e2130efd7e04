package main

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// version and commit are stamped by the Makefile with -ldflags -X.
var (
	version = "dev"
	commit  = ""
)

func newVersionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the configward version",
		Args:  cobra.NoArgs,
		Run: func(cmd *cobra.Command, _ []string) {
			c := commit
			if c == "" {
				if bi, ok := debug.ReadBuildInfo(); ok {
					for _, s := range bi.Settings {
						if s.Key == "vcs.revision" {
							c = s.Value
						}
					}
				}
			}
			if c == "" {
				c = "unknown"
			}
			fmt.Fprintf(cmd.OutOrStdout(), "configward %s (commit %s, %s, %s/%s)\n",
				version, c, runtime.Version(), runtime.GOOS, runtime.GOARCH)
		},
	}
}
