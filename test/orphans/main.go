// Command orphans ends the processes a killed test binary left running
// (kube-apiserver, etcd, kwok, a kubelet, ...: framework.Orphans) and fails
// when there were any. `make test` runs it once every suite has ended, so
// a suite that was killed is a failure even where its own result was lost,
// and the machine is left as the run found it.
package main

import (
	"fmt"
	"os"

	"github.com/configward/configward/test/framework"
)

func main() {
	swept, err := framework.SweepOrphans()
	for _, o := range swept {
		fmt.Fprintf(os.Stderr, "orphans: a test left %s running; ended it\n", o)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "orphans:", err)
		os.Exit(1)
	}
	if len(swept) > 0 {
		fmt.Fprintf(os.Stderr, "orphans: %d processes outlived the test binaries that started them: a suite was killed (see above)\n", len(swept))
		os.Exit(1)
	}
}
