package manager

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"runtime/debug"
	"strconv"
	"strings"

	"github.com/go-logr/logr"
)

// DefaultMemoryLimitRatio is the share of the container's memory limit the
// Go runtime's soft limit is set to: the rest is headroom, before the OOM
// killer acts, for what the kernel charges to the container besides the
// runtime's own memory (socket buffers, page cache) and for the heap
// overshooting a limit that is only soft.
const DefaultMemoryLimitRatio = 0.9

// The files the container's memory limit is read from: cgroup v2 first,
// then cgroup v1 (tests hand applyMemoryLimit files of their own).
var (
	cgroupV2MemoryMax = "/sys/fs/cgroup/memory.max"
	cgroupV1MemoryMax = "/sys/fs/cgroup/memory/memory.limit_in_bytes"
)

// cgroupV1Unlimited: cgroup v1 has no "max"; an unlimited group reports a
// number near the largest page-aligned int64. Anything from here up is no
// limit.
const cgroupV1Unlimited = int64(1) << 60

// errNoLimit is a cgroup without a memory limit.
var errNoLimit = errors.New("no memory limit")

// cgroupMemoryLimit reads the container's memory limit in bytes from the
// first of the files that exists: errNoLimit when it says there is none,
// another error when no file can be read or what it holds is not a limit.
func cgroupMemoryLimit(paths ...string) (limit int64, source string, err error) {
	var errs []error
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		s := strings.TrimSpace(string(b))
		if s == "max" {
			return 0, p, errNoLimit
		}
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n <= 0 {
			return 0, p, fmt.Errorf("%s holds %q, not a memory limit", p, s)
		}
		if n >= cgroupV1Unlimited {
			return 0, p, errNoLimit
		}
		return n, p, nil
	}
	if len(errs) == 0 {
		return 0, "", fmt.Errorf("none of %s exists (not in a cgroup with a memory controller)", strings.Join(paths, ", "))
	}
	return 0, "", errors.Join(errs...)
}

// softMemoryLimit is ratio of the container's limit, in bytes.
func softMemoryLimit(containerLimit int64, ratio float64) int64 {
	return int64(math.Floor(float64(containerLimit) * ratio))
}

// memoryLimitSetter is what applyMemoryLimit changes: debug.SetMemoryLimit
// in the binary.
type memoryLimitSetter func(int64) int64

// applyMemoryLimit sets the Go runtime's soft memory limit to ratio of the
// container's memory limit, unless GOMEMLIMIT already sets it (getenv reads
// the environment) or ratio is 0. It logs what it did, and never fails the
// start: without a readable limit the runtime keeps its default (none).
// It returns the limit it set, 0 when it set none.
func applyMemoryLimit(log logr.Logger, ratio float64, getenv func(string) string, set memoryLimitSetter, paths ...string) int64 {
	if v := getenv("GOMEMLIMIT"); v != "" {
		log.Info("GOMEMLIMIT is set; the Go runtime's soft memory limit is left to it", "GOMEMLIMIT", v)
		return 0
	}
	if ratio == 0 {
		log.V(1).Info("no soft memory limit: --memory-limit-ratio is 0")
		return 0
	}
	limit, source, err := cgroupMemoryLimit(paths...)
	switch {
	case errors.Is(err, errNoLimit):
		log.Info("the container has no memory limit; no soft memory limit set", "source", source)
		return 0
	case err != nil:
		log.Info("could not read the container's memory limit; no soft memory limit set", "reason", err.Error())
		return 0
	}
	soft := softMemoryLimit(limit, ratio)
	set(soft)
	log.Info("set the Go runtime's soft memory limit from the container's", "goMemoryLimitBytes", soft,
		"containerLimitBytes", limit, "ratio", ratio, "source", source)
	return soft
}

// DefaultGCPercent is the garbage collector's target (GOGC) configward
// runs with. Go's default, 100, collects each time the heap doubles its
// live size; a webhook under load allocates a short-lived request's worth
// per review and keeps little, so at 100 the collector took a fifth of its
// CPU (BenchmarkWebhookDirect: 445 µs of CPU per review at 100, 351 µs at
// 200). The live heap is small (tens of MiB), so 200 costs that much again
// at most, and the soft memory limit (ApplyMemoryLimit) makes the collector
// work harder before the container's limit is near.
const DefaultGCPercent = 200

// applyGCPercent sets the collector's target to percent unless GOGC is set
// (getenv reads the environment) or percent is 0; it returns what it set.
func applyGCPercent(log logr.Logger, percent int, getenv func(string) string, set func(int) int) int {
	if v := getenv("GOGC"); v != "" {
		log.Info("GOGC is set; the garbage collector's target is left to it", "GOGC", v)
		return 0
	}
	if percent == 0 {
		return 0
	}
	set(percent)
	return percent
}

// ApplyMemoryLimit sets the process's Go soft memory limit (GOMEMLIMIT) to
// --memory-limit-ratio of the container's memory limit, so the garbage
// collector works harder as the heap nears the limit instead of letting
// the kernel OOM-kill the pod, and the collector's target to --gc-percent.
// GOMEMLIMIT and GOGC, when set, win.
func (c *Common) ApplyMemoryLimit(log logr.Logger) {
	applyMemoryLimit(log, c.MemoryLimitRatio, os.Getenv, debug.SetMemoryLimit, cgroupV2MemoryMax, cgroupV1MemoryMax)
	applyGCPercent(log, c.GCPercent, os.Getenv, debug.SetGCPercent)
}
