// Command configward is the single binary of configward: the admission
// webhook, the rollout controller, and the offline checker.
package main

import (
	"os"
)

func main() {
	if err := newRootCommand().Execute(); err != nil {
		os.Exit(1)
	}
}
