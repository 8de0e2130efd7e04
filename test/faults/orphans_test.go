package faults

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/configward/configward/test/framework"
)

// orphanHelperEnv makes TestOrphanHelper run: the spec below runs this test
// binary again with it, as a suite that will be killed.
const orphanHelperEnv = "CONFIGWARD_ORPHAN_HELPER"

// TestOrphanHelper starts a control plane, says so and waits to be killed.
// It does nothing in an ordinary run.
func TestOrphanHelper(t *testing.T) {
	if os.Getenv(orphanHelperEnv) == "" {
		t.Skip("run by the spec of orphaned processes only")
	}
	if _, err := framework.Start(framework.Options{WithoutWebhook: true}); err != nil {
		t.Fatal(err)
	}
	os.Stdout.WriteString("ready\n")
	select {}
}

var _ = Describe("a test binary that is killed", func() {
	It("leaves kube-apiserver and etcd running, and the next start on the machine ends them", func() {
		helper := exec.Command(os.Args[0], "-test.run=^TestOrphanHelper$", "-test.v")
		helper.Env = append(os.Environ(), orphanHelperEnv+"=1")
		out, err := helper.StdoutPipe()
		Expect(err).NotTo(HaveOccurred())
		helper.Stderr = GinkgoWriter
		Expect(helper.Start()).To(Succeed())
		DeferCleanup(func() { _ = helper.Process.Kill(); _ = helper.Wait() })
		ready := make(chan struct{})
		go func() {
			defer GinkgoRecover()
			for s := bufio.NewScanner(out); s.Scan(); {
				if s.Text() == "ready" {
					close(ready)
				}
			}
		}()
		Eventually(ready, 2*time.Minute).Should(BeClosed(), "the helper's control plane started")
		left := childrenOf(helper.Process.Pid, "kube-apiserver", "etcd")
		Expect(left).To(HaveLen(2), "the helper runs kube-apiserver and etcd")
		var dirs []string
		for _, pid := range left {
			dirs = append(dirs, testDirsOf(pid)...)
		}
		Expect(dirs).To(ContainElements(ContainSubstring("/k8s_test_framework_"), ContainSubstring("/configward-e2e-")),
			"etcd's data and the helper's files")

		By("killing the test binary as a timeout or an OOM kill would: nothing of it runs its cleanup")
		Expect(helper.Process.Signal(syscall.SIGKILL)).To(Succeed())
		_ = helper.Wait()
		orphans, err := framework.Orphans()
		Expect(err).NotTo(HaveOccurred())
		listed := map[int]bool{}
		for _, o := range orphans {
			listed[o.PID] = true
		}
		for _, pid := range left {
			// Another suite's start on the machine may have ended it
			// already; otherwise it runs on, an orphan, and is listed.
			Expect(listed[pid] || !alive(pid)).To(BeTrue(), "process %d outlived its test binary unlisted", pid)
		}

		By("the next start sweeps them")
		_, err = framework.SweepOrphans()
		Expect(err).NotTo(HaveOccurred())
		// SweepOrphans returns once what it killed is over. Another
		// suite's start may have killed them first: then this sweep found
		// nothing to end (an exiting process has no executable link, so it
		// is not listed) and they may still be exiting, which takes a
		// multi-threaded kube-apiserver a moment.
		for _, pid := range left {
			Eventually(func() bool { return alive(pid) }, 10*time.Second, 50*time.Millisecond).Should(BeFalse(), "process %d still runs", pid)
		}
		for _, d := range dirs {
			Expect(d).NotTo(BeADirectory(), "the killed test's folder is left")
		}
	})
})

// childrenOf lists the pids of the running children of parent whose
// program is one of names.
func childrenOf(parent int, names ...string) []int {
	entries, err := os.ReadDir("/proc")
	Expect(err).NotTo(HaveOccurred())
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		exe, _ := os.Readlink(filepath.Join("/proc", e.Name(), "exe"))
		if ppid, running := framework.ParentOf(pid); running && ppid == parent && slices.Contains(names, filepath.Base(exe)) {
			out = append(out, pid)
		}
	}
	return out
}

// testDirsOf are the test folders (under the machine's temporary
// directory) process pid's command line names.
func testDirsOf(pid int) []string {
	raw, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
	Expect(err).NotTo(HaveOccurred())
	tmp := filepath.Clean(os.TempDir()) + "/"
	var out []string
	for _, arg := range strings.Split(string(raw), "\x00") {
		_, value, _ := strings.Cut(arg, "=")
		if rest, ok := strings.CutPrefix(value, tmp); ok {
			top, _, _ := strings.Cut(rest, "/")
			if (strings.HasPrefix(top, "k8s_test_framework_") || strings.HasPrefix(top, "configward-e2e-")) && !slices.Contains(out, tmp+top) {
				out = append(out, tmp+top)
			}
		}
	}
	return out
}

// alive says whether pid runs (a zombie waiting for pid 1 does not).
func alive(pid int) bool {
	_, running := framework.ParentOf(pid)
	return running
}
