// Command app is the test node's application: it prints what a container
// sees, so a spec can tell which config bytes reached a running pod. Every
// argument names a file to watch; every environment variable starting with
// CONFIG_ is reported. At start, and whenever a watched file's content
// changes, it prints one line per file and variable:
//
//	file PATH CONTENT
//	env NAME VALUE
//
// (content and values quoted as Go strings; a missing file prints as
// "<missing>"). It exits on SIGTERM.
package main

import (
	"fmt"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"
	"time"
)

func main() {
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "CONFIG_") {
			env = append(env, kv)
		}
	}
	sort.Strings(env)
	for _, kv := range env {
		name, value, _ := strings.Cut(kv, "=")
		fmt.Printf("env %s %q\n", name, value)
	}
	seen := map[string]string{}
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		for _, path := range os.Args[1:] {
			content := "<missing>"
			if b, err := os.ReadFile(path); err == nil {
				content = string(b)
			}
			if old, ok := seen[path]; !ok || old != content {
				seen[path] = content
				fmt.Printf("file %s %q\n", path, content)
			}
		}
		select {
		case <-stop:
			return
		case <-tick.C:
		}
	}
}
