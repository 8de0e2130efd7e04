// Command configward is the single binary of configward: the admission
// webhook, the rollout controller, the offline checker and `status`, also
// a kubectl plugin when installed as kubectl-configward.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"
)

func main() {
	root := newRootCommand()
	// kubectl runs a plugin named kubectl-configward for "kubectl
	// configward ...": help and errors then name the command as typed.
	if filepath.Base(os.Args[0]) == "kubectl-configward" {
		root.Annotations = map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl configward"}
	}
	os.Exit(exitCode(root.Execute(), os.Stderr))
}

// exitCode is the process exit code for what a command returned, saying
// why on stderr: an exitError's own code (check: 1 denied, 2 usage error
// or unusable input), and 1 for any other failure (of the webhook or the
// controller). What a command already showed (check's findings, status'
// table) is not repeated here.
func exitCode(err error, stderr io.Writer) int {
	if err == nil {
		return 0
	}
	var exit exitError
	if errors.As(err, &exit) {
		var shown alreadyShown
		if !errors.As(exit.err, &shown) {
			fmt.Fprintln(stderr, "configward:", exit.err)
		}
		return exit.code
	}
	fmt.Fprintln(stderr, "configward:", err)
	return 1
}

// alreadyShown is the error of a command that already showed why it
// failed.
type alreadyShown struct{ error }
