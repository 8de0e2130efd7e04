package soak

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/configward/configward/test/framework"
)

// The series sampled from each process: heap in use and goroutines from
// its /metrics (Go's runtime collector), open file descriptors from
// /proc/<pid>/fd; of the webhook also the admission connections the API
// server holds open to it (established TCP connections on its port, from
// /proc/<pid>/net/tcp) and the admission requests in flight
// (controller-runtime's controller_runtime_webhook_requests_in_flight).
//
// Each connection holds a descriptor and a goroutine, and the API server
// opens one per concurrent call and keeps it until the webhook closes it
// after 30 s idle, so their number follows the recent peak of concurrency
// (from 4 to 25, interval to interval, in short runs on a busy machine);
// each request in flight holds one goroutine more (net/http's background
// read) while it is handled. That says how busy the machine was, not what
// the process keeps, so goroutines are judged less the connections and
// requests of the same probe, and descriptors less the connections. A
// connection the webhook fails to close once the API server has gone is no
// longer established (CLOSE_WAIT), so a leak of them still counts.
const (
	heapSeries      = "heap in use"
	goroutineSeries = "goroutines*"
	fdSeries        = "open fds*"
	connSeries      = "connections"
	inFlightSeries  = "in flight"
)

var allSeries = []string{heapSeries, goroutineSeries, fdSeries, connSeries, inFlightSeries}

// How much a series may rise after warm-up before the soak calls it
// growth: the rise of the least-squares line through the per-minute
// floors, from the first sample after warm-up to the last.
//
// Each minute's value is the lowest of the probes taken in it (see
// sampler), so the requests in flight at a probe, which come and go with
// the traffic, mostly drop out and what is left is what the process keeps.
// A process that keeps nothing per request holds, after warm-up, a fixed
// set of goroutines (informers, servers, the event broadcaster) and
// descriptors (listeners, its client's connections, its log).
//
//   - goroutines: 25. A leak tied to the traffic grows with it: at 100
//     requests/s, one goroutine left behind per 6,000 requests is 25 in 25
//     minutes, and one per ConfigPolicy swap (every 30 s) is 50. The floor
//     of a steady process moves by a few.
//   - open fds: 10. The same reasoning: one descriptor leaked per 15,000
//     requests, or per third swap; a steady process's count moves by one
//     or two (a client connection replaced).
//   - heap: 20% of its mean. The heap's floor moves with when the garbage
//     collector last ran, by a MiB or so from one minute to the next at
//     this load, so the bound is looser than the others: for a webhook
//     heap of about 15 MiB it is 3 MiB, a leak of about 20 bytes per
//     request over the 150,000 requests after warm-up, about four times
//     what that noise moves a line fitted through 25 minutes; smaller
//     leaks are left to the slope the report prints. Part of the heap
//     is client-go's cache of the Events each process wrote (one per Warn
//     or Audit finding, one per rollout), each kept 6 to 12 minutes: it
//     fills until about minute 12, then saws between 6 and 12 minutes'
//     worth; fitted from minute 5 to 30 that is a rise of under a MiB.
//   - connections are reported, not judged.
const (
	goroutineRise = 25
	fdRise        = 10
	heapRise      = 0.20 // of the mean
)

// key names one series of one process.
type key struct{ process, series string }

// point is one interval's value, at the minutes since the traffic started.
type point struct{ minute, value float64 }

// row is one interval: the floor of each series.
type row struct {
	minute float64
	floors map[key]float64
}

// sampler probes the processes every probe and keeps, per interval
// (every), the lowest value of each series.
type sampler struct {
	names        []string
	procs        map[string]*framework.Process
	every, probe time.Duration
	rows         []row
	errors       []string
	http         *http.Client
}

func newSampler(every time.Duration, procs map[string]*framework.Process, names ...string) *sampler {
	// Thirty probes an interval (but not more than one a second): the more
	// probes, the likelier one falls in a quiet moment.
	probe := max(every/30, time.Second)
	return &sampler{names: names, procs: procs, every: every, probe: probe, http: &http.Client{Timeout: 10 * time.Second}}
}

// run samples until stop is closed and reports on done when it has.
func (s *sampler) run(stop <-chan struct{}) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		start := time.Now()
		tick := time.NewTicker(s.probe)
		defer tick.Stop()
		floors := map[key]float64{}
		from := start
		for {
			select {
			case <-stop:
				return // the interval under way is left out: it is not whole
			case now := <-tick.C:
				s.probeAll(floors)
				if now.Sub(from) < s.every-s.probe/2 {
					continue
				}
				s.rows = append(s.rows, row{now.Sub(start).Minutes(), floors})
				floors = map[key]float64{}
				from = now
			}
		}
	}()
	return done
}

// probeAll reads every series of every process once and lowers floors.
func (s *sampler) probeAll(floors map[key]float64) {
	for _, name := range s.names {
		values, err := s.read(s.procs[name])
		if err != nil {
			if len(s.errors) < 10 {
				s.errors = append(s.errors, fmt.Sprintf("%s: %v", name, err))
			}
			continue
		}
		for series, v := range values {
			k := key{name, series}
			if old, ok := floors[k]; !ok || v < old {
				floors[k] = v
			}
		}
	}
}

// read takes one value of each series from p.
func (s *sampler) read(p *framework.Process) (map[string]float64, error) {
	fds, conns, err := descriptors(p)
	if err != nil {
		return nil, err
	}
	resp, err := s.http.Get(p.MetricsURL)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	metrics, err := parseMetrics(resp.Body)
	if err != nil {
		return nil, err
	}
	heap, ok := metrics["go_memstats_heap_inuse_bytes"]
	goroutines, ok2 := metrics["go_goroutines"]
	if !ok || !ok2 {
		return nil, fmt.Errorf("%s lacks go_memstats_heap_inuse_bytes or go_goroutines", p.MetricsURL)
	}
	var inFlight float64
	for name, v := range metrics {
		if strings.HasPrefix(name, "controller_runtime_webhook_requests_in_flight{") {
			inFlight += v
		}
	}
	out := map[string]float64{heapSeries: heap, goroutineSeries: goroutines - conns - inFlight, fdSeries: fds - conns}
	if p.Addr != "" {
		out[connSeries], out[inFlightSeries] = conns, inFlight
	}
	return out, nil
}

// descriptors counts p's open file descriptors and, of them, the
// established connections to the port it serves admission on (none for
// the controller).
func descriptors(p *framework.Process) (fds, conns float64, err error) {
	dir := fmt.Sprintf("/proc/%d/fd", p.PID())
	entries, err := os.ReadDir(dir)
	if err != nil || p.Addr == "" {
		return float64(len(entries)), 0, err
	}
	live, err := establishedOn(p.PID(), p.Addr)
	if err != nil {
		return 0, 0, err
	}
	for _, e := range entries {
		link, err := os.Readlink(filepath.Join(dir, e.Name()))
		if err == nil && live[link] {
			conns++
		}
	}
	return float64(len(entries)), conns, nil
}

// establishedOn is the sockets ("socket:[inode]", as /proc/<pid>/fd links
// read) of the established TCP connections whose local end is addr's port,
// in pid's network namespace.
func establishedOn(pid int, addr string) (map[string]bool, error) {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	n, err := strconv.Atoi(port)
	if err != nil {
		return nil, err
	}
	suffix := fmt.Sprintf(":%04X", n)
	out := map[string]bool{}
	for _, table := range []string{"tcp", "tcp6"} {
		raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/net/%s", pid, table))
		if err != nil {
			return nil, err
		}
		// sl local_address rem_address st tx_queue:rx_queue tr:tm->when retrnsmt uid timeout inode ...
		for _, line := range strings.Split(string(raw), "\n")[1:] {
			f := strings.Fields(line)
			if len(f) >= 10 && strings.HasSuffix(f[1], suffix) && f[3] == tcpEstablished {
				out["socket:["+f[9]+"]"] = true
			}
		}
	}
	return out, nil
}

// tcpEstablished is TCP_ESTABLISHED as /proc/net/tcp writes a state.
const tcpEstablished = "01"

// parseMetrics reads Prometheus' text format into sample name (with its
// labels, as written) → value.
func parseMetrics(r io.Reader) (map[string]float64, error) {
	out := map[string]float64{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndex(line, " ")
		if i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			return nil, fmt.Errorf("metric line %q: %w", line, err)
		}
		out[line[:i]] = v
	}
	return out, sc.Err()
}

// trend is a series after warm-up: the least-squares line through its
// points, and how far it may rise.
type trend struct {
	key
	n                                       int
	first, last, mean, perMinute, rise, max float64
	bound                                   float64
}

// perHour is the slope in percent of the mean per hour.
func (t trend) perHour() float64 {
	if t.mean == 0 {
		return 0
	}
	return t.perMinute * 60 / t.mean * 100
}

func (t trend) judged() bool { return !math.IsInf(t.bound, 1) }

func (t trend) flat() bool { return t.rise <= t.bound }

// trends fits every series over its points after warmup.
func (s *sampler) trends(warmup time.Duration) []trend {
	var out []trend
	for _, name := range s.names {
		for _, series := range allSeries {
			k := key{name, series}
			var pts []point
			for _, r := range s.rows {
				if v, ok := r.floors[k]; ok && r.minute > warmup.Minutes() {
					pts = append(pts, point{r.minute, v})
				}
			}
			if len(pts) < 2 {
				continue
			}
			t := fit(pts)
			t.key = k
			switch series {
			case heapSeries:
				t.bound = heapRise * t.mean
			case goroutineSeries:
				t.bound = goroutineRise
			case fdSeries:
				t.bound = fdRise
			default:
				t.bound = math.Inf(1) // not judged
			}
			out = append(out, t)
		}
	}
	return out
}

// fit is the least-squares line through pts.
func fit(pts []point) trend {
	n := float64(len(pts))
	var sx, sy float64
	t := trend{n: len(pts), first: pts[0].value, last: pts[len(pts)-1].value, max: pts[0].value}
	for _, p := range pts {
		sx += p.minute
		sy += p.value
		t.max = max(t.max, p.value)
	}
	mx, my := sx/n, sy/n
	var sxy, sxx float64
	for _, p := range pts {
		sxy += (p.minute - mx) * (p.value - my)
		sxx += (p.minute - mx) * (p.minute - mx)
	}
	t.mean = my
	if sxx > 0 {
		t.perMinute = sxy / sxx
	}
	t.rise = t.perMinute * (pts[len(pts)-1].minute - pts[0].minute)
	return t
}

// table prints the trends, heap in MiB.
func table(trends []trend) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%-10s %-12s %4s %10s %10s %10s %10s %11s %9s %10s %10s  %s\n",
		"process", "series", "n", "first", "last", "max", "mean", "slope/min", "%mean/h", "rise", "bound", "verdict")
	for _, t := range trends {
		scale, unit := 1.0, ""
		if t.series == heapSeries {
			scale, unit = 1<<20, "Mi"
		}
		verdict := "flat"
		if !t.flat() {
			verdict = "GROWS"
		}
		f := func(v float64) string { return strconv.FormatFloat(v/scale, 'f', 1, 64) + unit }
		bound := "-"
		if t.judged() {
			bound = f(t.bound)
		} else {
			verdict = "(reported)"
		}
		fmt.Fprintf(&b, "%-10s %-12s %4d %10s %10s %10s %10s %11s %8.1f%% %10s %10s  %s\n",
			t.process, t.series, t.n, f(t.first), f(t.last), f(t.max), f(t.mean), f(t.perMinute), t.perHour(), f(t.rise), bound, verdict)
	}
	fmt.Fprintf(&b, "* less the API server's connections (and, for goroutines, the requests in flight) at the probe; see sample_test.go\n")
	return b.String()
}

// samples prints every interval's values, warm-up included, one line per
// interval, for a reader who wants to plot them.
func (s *sampler) samples() string {
	var b strings.Builder
	b.WriteString("minute")
	var keys []key
	for _, name := range s.names {
		for _, series := range allSeries {
			keys = append(keys, key{name, series})
			fmt.Fprintf(&b, "\t%s %s", name, series)
		}
	}
	b.WriteString("\n")
	for _, r := range s.rows {
		fmt.Fprintf(&b, "%.2f", r.minute)
		for _, k := range keys {
			v := "-"
			if f, ok := r.floors[k]; ok {
				v = strconv.FormatFloat(f, 'f', 0, 64)
			}
			b.WriteString("\t" + v)
		}
		b.WriteString("\n")
	}
	return b.String()
}
