package framework

import (
	"errors"
	"io"
	"net"
	"sync"
)

// Balancer stands in for a Service in front of webhook replicas, the way
// kube-proxy serves one: each new TCP connection goes to one of the current
// endpoints, in turn; taking an endpoint out stops new connections to it,
// while connections already made carry on until either side closes them.
// envtest has no Service network, so the API server calls the balancer's
// loopback address, and tests move replicas in and out of it as the
// endpoints controller would.
type Balancer struct {
	ln net.Listener

	mu        sync.Mutex
	endpoints []string
	next      int
	conns     map[net.Conn]bool
	closed    bool
}

// NewBalancer listens on a free loopback port.
func NewBalancer() (*Balancer, error) { return NewBalancerAt("127.0.0.1:0") }

// NewBalancerAt listens on addr, e.g. a Service's cluster IP and port put
// on an interface of this machine.
func NewBalancerAt(addr string) (*Balancer, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	b := &Balancer{ln: ln, conns: map[net.Conn]bool{}}
	go b.serve()
	return b, nil
}

// Addr is where the balancer listens.
func (b *Balancer) Addr() string { return b.ln.Addr().String() }

// SetEndpoints replaces the endpoints new connections go to.
func (b *Balancer) SetEndpoints(addrs ...string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.endpoints = append([]string(nil), addrs...)
}

// Close stops listening and closes every connection.
func (b *Balancer) Close() error {
	b.mu.Lock()
	b.closed = true
	for c := range b.conns {
		c.Close()
	}
	b.mu.Unlock()
	return b.ln.Close()
}

func (b *Balancer) serve() {
	for {
		client, err := b.ln.Accept()
		if err != nil {
			return
		}
		go b.forward(client)
	}
}

func (b *Balancer) pick() (string, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.endpoints) == 0 {
		return "", errors.New("no endpoints")
	}
	b.next = (b.next + 1) % len(b.endpoints)
	return b.endpoints[b.next], nil
}

func (b *Balancer) track(cs ...net.Conn) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return false
	}
	for _, c := range cs {
		b.conns[c] = true
	}
	return true
}

func (b *Balancer) untrack(cs ...net.Conn) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, c := range cs {
		delete(b.conns, c)
	}
}

// forward pipes one connection to an endpoint. When either side closes,
// both are closed, as a proxied TCP connection ends.
func (b *Balancer) forward(client net.Conn) {
	addr, err := b.pick()
	if err != nil {
		client.Close() // as a connection to a Service without endpoints is refused
		return
	}
	server, err := net.Dial("tcp", addr)
	if err != nil {
		client.Close()
		return
	}
	if !b.track(client, server) {
		client.Close()
		server.Close()
		return
	}
	defer b.untrack(client, server)
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		done <- struct{}{}
	}
	go pipe(server, client)
	go pipe(client, server)
	<-done
	client.Close()
	server.Close()
	<-done
}
