// Command pause holds a pod's namespaces on the test node: it sleeps until
// SIGTERM or SIGINT, then exits 0, as Kubernetes' pause image does.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	c := make(chan os.Signal, 1)
	signal.Notify(c, syscall.SIGTERM, syscall.SIGINT)
	<-c
}
