package reloadreports

import (
	"net"
	"sync"
	"time"
)

// What one source, or one pod, may hold of the report endpoint. Any pod
// can reach the port (an agent runs in any pod that asks for one), and
// before its token is reviewed a connection is nobody's: these bound what
// a pod without a valid token can take from the pods that report. A report
// holds one of the server's slots only from its token's review on, and one
// pod has one report in flight (Handler), so the bounds per address are on
// connections: the many pods behind one address (a node's, where pods
// reach the endpoint through SNAT or a mesh's proxy) share them.
const (
	// maxConnsPerSource bounds the connections one address holds open,
	// whether or not it has sent a request yet.
	maxConnsPerSource = 64
	// maxConns bounds the connections of every source together.
	maxConns = 1024
	// bodyDeadline is how long an authenticated report may take to send
	// its body (at most maxReport bytes, sent at once by an agent).
	bodyDeadline = 2 * time.Second
	// headerDeadline is how long a connection may take to send its
	// request's headers.
	headerDeadline = 2 * time.Second
)

// counts counts holders per key, up to a bound.
type counts struct {
	mu sync.Mutex
	n  map[string]int
}

// take counts one more holder of key, unless there are limit already.
func (c *counts) take(key string, limit int) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[string]int{}
	}
	if c.n[key] >= limit {
		return false
	}
	c.n[key]++
	return true
}

// give gives one back.
func (c *counts) give(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n[key] <= 1 {
		delete(c.n, key)
		return
	}
	c.n[key]--
}

// source is the address a connection comes from, without its port.
func source(remote string) string {
	if host, _, err := net.SplitHostPort(remote); err == nil {
		return host
	}
	return remote
}

// boundedListener closes at once a connection past maxConnsPerSource from
// its address, or past maxConns in all: net/http holds every connection
// it accepts until its headers time out, and would otherwise hold as many
// as any pod opens.
type boundedListener struct {
	net.Listener
	conns counts
}

const allSources = ""

func (l *boundedListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		src := source(c.RemoteAddr().String())
		if !l.conns.take(allSources, maxConns) {
			refusedConns.WithLabelValues("all-sources").Inc()
			_ = c.Close()
			continue
		}
		if !l.conns.take(src, maxConnsPerSource) {
			l.conns.give(allSources)
			refusedConns.WithLabelValues("source").Inc()
			_ = c.Close()
			continue
		}
		return &countedConn{Conn: c, release: func() { l.conns.give(src); l.conns.give(allSources) }}, nil
	}
}

// countedConn gives its count back once, when it is closed.
type countedConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *countedConn) Close() error {
	c.once.Do(c.release)
	return c.Conn.Close()
}

// onceEach remembers keys it has seen, for a while and up to a bound: an
// Event is recorded once per pod and content it is about, however often a
// pod reports it.
type onceEach struct {
	mu   sync.Mutex
	seen map[string]time.Time
}

// seenFor bounds how long a key is remembered, and maxSeen how many.
const (
	seenFor = time.Hour
	maxSeen = 10000
)

// first says whether key is new, and remembers it.
func (o *onceEach) first(key string, now time.Time) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.seen == nil {
		o.seen = map[string]time.Time{}
	}
	if at, ok := o.seen[key]; ok && now.Sub(at) < seenFor {
		return false
	}
	if len(o.seen) >= maxSeen {
		for k, at := range o.seen {
			if now.Sub(at) >= seenFor {
				delete(o.seen, k)
			}
		}
		if len(o.seen) >= maxSeen {
			// Full of recent keys: forget them all rather than grow, so a
			// flood costs at most one more Event per key an hour.
			clear(o.seen)
		}
	}
	o.seen[key] = now
	return true
}

// liveEvery is how long a live read of a config stands in for the next
// ones while the cache still holds the same content: pods report a swap
// within seconds of each other, and the first one's read tells the rest.
const liveEvery = 2 * time.Second

// liveReads keeps the latest live read of each config (its key digests
// and a channel's note, never a value) with the cached content it was made
// against.
type liveReads struct {
	mu    sync.Mutex
	reads map[string]liveRead
}

type liveRead struct {
	cached string // the cache's content when it was read
	at     time.Time
	live   liveContent
	err    error
}

// liveContent is what a live read of a config tells: its key digests (nil
// when it is gone), when it was written, and a channel's note (the
// annotation's value).
type liveContent struct {
	kd   map[string]string
	when time.Time
	note string
}

// read returns what a live read of the config tells, from a read made
// against the same cached content less than liveEvery ago, or from get.
// Reads of one config are made one at a time, so a burst of reports makes
// one.
func (l *liveReads) read(cached, config string, now time.Time, get func() (liveContent, error)) (liveContent, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.reads == nil {
		l.reads = map[string]liveRead{}
	}
	if r, ok := l.reads[config]; ok && r.cached == cached && now.Sub(r.at) < liveEvery {
		return r.live, r.err
	}
	for k, r := range l.reads {
		if now.Sub(r.at) >= liveEvery {
			delete(l.reads, k)
		}
	}
	live, err := get()
	l.reads[config] = liveRead{cached: cached, at: now, live: live, err: err}
	return live, err
}
