// Command configward is the single binary of configward: the admission
// webhook, the rollout controller, and the offline checker.
package main

import (
	"errors"
	"fmt"
	"os"
)

func main() {
	if err := newRootCommand().Execute(); err != nil {
		var exit exitError
		if errors.As(err, &exit) {
			if exit.code == 2 {
				fmt.Fprintln(os.Stderr, "configward:", exit.err)
			}
			os.Exit(exit.code)
		}
		fmt.Fprintln(os.Stderr, "configward:", err)
		os.Exit(1)
	}
}
