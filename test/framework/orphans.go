package framework

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// A test binary that is killed (a timeout, ^C twice, an OOM kill, a crash
// of the machine's CI runner) cannot stop what it started: kube-apiserver
// and etcd go on listening, holding memory and ports, and the next run
// shares the machine with them. Whatever the framework starts dies with it
// where the kernel allows (Pdeathsig), but envtest starts kube-apiserver
// and etcd itself, so what a dead test left is also found and ended: by
// the next Start on the machine, and by `make test` when it ends
// (test/orphans), which fails when it finds any.

// orphanNames are the programs the suites start that outlive a killed test
// binary: the control plane, kwok, the real node's kubelet and containerd,
// configward's own processes (the suites' build, under bin/test), and the
// Prometheus server of the analysis specs.
// containerd's shims are left out: they
// are reparented by design while their node runs, and the node's own
// teardown (StartNode) ends them.
var orphanNames = []string{"kube-apiserver", "etcd", "kube-controller-manager", "kube-scheduler", "kwok", "kubelet", "containerd", "configward", "prometheus"}

// Orphan is a process a dead test binary left running.
type Orphan struct {
	PID int
	// Args are its command line, the binary first.
	Args []string
	// started is its start time (proc(5) stat field 22), which tells it
	// from a later process given the same pid: the machine's pids wrap
	// at 32768, quickly while the suites run.
	started string
}

func (o Orphan) String() string {
	return fmt.Sprintf("pid %d: %s", o.PID, strings.Join(o.Args, " "))
}

// Orphans lists the processes a dead test binary left: one of orphanNames,
// run from a binary under bin/ (built by `make controlplane`, `make node`,
// the suites), whose parent is gone (the kernel gave it to pid 1). A
// running suite's processes are its test binary's children, so they are
// never listed, and neither is a cluster of the machine's own, whose
// binaries are elsewhere. On a machine where a subreaper adopts orphans
// instead of pid 1 (a systemd user session), they are not found.
func Orphans() ([]Orphan, error) {
	bin, err := filepath.EvalSymlinks(filepath.Join(RepoRoot(), "bin"))
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, nil // nothing was ever built here
		}
		return nil, err
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	var out []Orphan
	for _, ent := range entries {
		pid, err := strconv.Atoi(ent.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		stat := procStat(pid)
		if stat == nil || stat[1] != "1" || stat[0] == "Z" {
			continue
		}
		exe, err := os.Readlink(filepath.Join("/proc", ent.Name(), "exe"))
		if err != nil || !strings.HasPrefix(exe, bin+string(filepath.Separator)) || !slices.Contains(orphanNames, filepath.Base(exe)) {
			continue
		}
		if filepath.Base(exe) == "configward" && !strings.HasPrefix(exe, filepath.Join(bin, "test")+string(filepath.Separator)) {
			continue // bin/configward is `make build`'s, which people run by hand; the suites run bin/test's
		}
		raw, err := os.ReadFile(filepath.Join("/proc", ent.Name(), "cmdline"))
		if err != nil {
			continue
		}
		out = append(out, Orphan{PID: pid, Args: strings.Split(strings.TrimSuffix(string(raw), "\x00"), "\x00"), started: stat[19]})
	}
	return out, nil
}

// procStat is the fields of /proc/<pid>/stat after the command (state,
// ppid, ...: field 3 of proc(5) is [0]), or nil when the process is gone.
// The command may hold spaces and parentheses, so they are read after its
// last closing parenthesis.
func procStat(pid int) []string {
	stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return nil
	}
	fields := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
	if len(fields) < 20 {
		return nil
	}
	return fields
}

// parentAndState reads a process's parent and state (0 and "" when it is
// gone).
func parentAndState(pid int) (int, string) {
	fields := procStat(pid)
	if fields == nil {
		return 0, ""
	}
	ppid, _ := strconv.Atoi(fields[1])
	return ppid, fields[0]
}

// ParentOf is the parent of a running process; false when it is gone (a
// zombie, which waits only for its parent to reap it, counts as gone).
func ParentOf(pid int) (int, bool) {
	ppid, state := parentAndState(pid)
	return ppid, state != "" && state != "Z"
}

// tempDirPrefixes start the names of the folders a test's processes keep
// their files in, under the machine's temporary directory: envtest's
// (etcd's data, the API server's certificates) and Start's.
var tempDirPrefixes = []string{"k8s_test_framework_", "configward-e2e-"}

// tempDirs are the test folders o's flags name (--data-dir=..., or any flag
// whose value lies in one), each once.
func (o Orphan) tempDirs() []string {
	tmp := filepath.Clean(os.TempDir()) + string(filepath.Separator)
	var out []string
	for _, a := range o.Args[1:] {
		_, value, ok := strings.Cut(a, "=")
		if !ok {
			value = a
		}
		rest, under := strings.CutPrefix(filepath.Clean(value), tmp)
		if !under {
			continue
		}
		top, _, _ := strings.Cut(rest, string(filepath.Separator))
		for _, p := range tempDirPrefixes {
			if strings.HasPrefix(top, p) && !slices.Contains(out, tmp+top) {
				out = append(out, tmp+top)
			}
		}
	}
	return out
}

// ownerFile, in each folder Start makes, names the test process it belongs
// to: its pid and start time (so a reused pid is not taken for it).
const ownerFile = "owner"

// processIdentity is a process's pid and start time ("" when it is gone).
func processIdentity(pid int) string {
	fields := procStat(pid)
	if fields == nil || fields[0] == "Z" {
		return ""
	}
	return strconv.Itoa(pid) + " " + fields[19] // starttime, field 22 of stat
}

// writeOwner marks dir as this test process's.
func writeOwner(dir string) error {
	return os.WriteFile(filepath.Join(dir, ownerFile), []byte(processIdentity(os.Getpid())), 0o600)
}

// staleTempDirs are the test folders under the machine's temporary
// directory that no running test owns: Start's, whose owner process is
// gone (or, made before owners were written, an hour old), and envtest's,
// which no running process names and which have not changed for ten
// minutes (envtest starts etcd within seconds of making its folder).
func staleTempDirs() ([]string, error) {
	var out []string
	for _, prefix := range tempDirPrefixes {
		dirs, err := filepath.Glob(filepath.Join(os.TempDir(), prefix+"*"))
		if err != nil {
			return nil, err
		}
		for _, d := range dirs {
			info, err := os.Stat(d)
			if err != nil || !info.IsDir() {
				continue
			}
			owner, err := os.ReadFile(filepath.Join(d, ownerFile))
			switch {
			case err == nil:
				pid, _, _ := strings.Cut(string(owner), " ")
				n, _ := strconv.Atoi(pid)
				if processIdentity(n) != string(owner) {
					out = append(out, d)
				}
			case time.Since(info.ModTime()) > staleAfter(prefix) && !named(d):
				out = append(out, d)
			}
		}
	}
	return out, nil
}

// staleAfter is how long a folder without an owner file is left alone.
func staleAfter(prefix string) time.Duration {
	if prefix == "configward-e2e-" {
		return time.Hour
	}
	return 10 * time.Minute
}

// named says whether a running process's command line names dir.
func named(dir string) bool {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return true // when in doubt, keep it
	}
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		if raw, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline")); err == nil && bytes.Contains(raw, []byte(dir)) {
			return true
		}
	}
	return false
}

// Over says whether the process is over: no process has its pid any more,
// or a zombie does (it waits only for pid 1 to reap it), or a process
// started at another time (its pid was reused). A process that is still
// exiting is not over, although Orphans no longer lists it: the kernel
// drops its executable's link before its threads have ended.
func (o Orphan) Over() bool {
	stat := procStat(o.PID)
	return stat == nil || stat[0] == "Z" || stat[19] != o.started
}

// SweepOrphans ends every process Orphans lists (SIGKILL: nothing waits for
// them to finish anything), removes the test folders their flags name and
// those no running test owns (staleTempDirs), and returns what it ended,
// once each is over.
func SweepOrphans() ([]Orphan, error) {
	orphans, err := Orphans()
	if err != nil {
		return nil, err
	}
	if len(orphans) == 0 {
		return nil, removeStaleTempDirs()
	}
	dirs := map[string]bool{}
	for _, o := range orphans {
		_ = syscall.Kill(o.PID, syscall.SIGKILL)
		for _, d := range o.tempDirs() {
			dirs[d] = true
		}
	}
	// Each is waited for by its own pid: one that is exiting has no
	// executable link, so Orphans would skip it while it still runs (its
	// files still open, its ports still bound).
	deadline := time.Now().Add(10 * time.Second)
	for {
		left := slices.DeleteFunc(slices.Clone(orphans), Orphan.Over)
		if len(left) == 0 {
			// Their files go with them: etcd's data, certificates, logs.
			for d := range dirs {
				if err := os.RemoveAll(d); err != nil {
					return orphans, err
				}
			}
			return orphans, removeStaleTempDirs()
		}
		if time.Now().After(deadline) {
			return orphans, fmt.Errorf("orphaned test processes survived SIGKILL: %v", left)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// removeStaleTempDirs removes what staleTempDirs lists: a test killed
// after its processes ended, or before it wrote anything they name, leaves
// its folders too.
func removeStaleTempDirs() error {
	dirs, err := staleTempDirs()
	if err != nil {
		return err
	}
	for _, d := range dirs {
		if err := os.RemoveAll(d); err != nil {
			return err
		}
	}
	return nil
}
