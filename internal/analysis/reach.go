package analysis

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Addresses is a list of where a check may connect, with whose list it is
// (for the refusal's message). An entry is a CIDR ("10.96.0.0/12"), an IP,
// or a host name with an optional port ("prometheus.monitoring.svc:9090").
// CIDRs and IPs are matched against the address a host name resolves to
// when configward connects, so a name that resolves elsewhere later, or an
// address written as a name nobody checked, cannot reach past the list; a
// host name entry trusts whatever that exact name resolves to.
type Addresses struct {
	Source string
	nets   []netip.Prefix
	hosts  []hostPort
}

type hostPort struct{ host, port string } // port "" for any

// ParseAddresses reads a list of entries separated by commas or white
// space. An empty list is an error: a list that admits nothing is written
// by mistake.
func ParseAddresses(source, list string) (Addresses, error) {
	a := Addresses{Source: source}
	for _, e := range strings.FieldsFunc(list, func(r rune) bool { return r == ',' || r == ' ' || r == '\n' || r == '\t' }) {
		if p, err := netip.ParsePrefix(e); err == nil {
			a.nets = append(a.nets, p.Masked())
			continue
		}
		if ip, err := netip.ParseAddr(e); err == nil {
			a.nets = append(a.nets, netip.PrefixFrom(ip, ip.BitLen()))
			continue
		}
		host, port := e, ""
		if h, p, err := net.SplitHostPort(e); err == nil {
			host, port = h, p
		}
		if _, err := strconv.ParseUint(port, 10, 16); (port != "" && err != nil) || host == "" || strings.ContainsAny(host, "/:@?#*") {
			return Addresses{}, fmt.Errorf("%s: %q is neither a CIDR, an IP nor a host[:port]", source, e)
		}
		a.hosts = append(a.hosts, hostPort{strings.ToLower(strings.TrimSuffix(host, ".")), port})
	}
	if len(a.nets) == 0 && len(a.hosts) == 0 {
		return Addresses{}, fmt.Errorf("%s names no address", source)
	}
	return a, nil
}

// admits says whether a connection to host:port, resolved to ip, is on
// the list.
func (a Addresses) admits(host, port string, ip netip.Addr) bool {
	ip = ip.Unmap()
	for _, n := range a.nets {
		if n.Contains(ip) {
			return true
		}
	}
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	return slices.ContainsFunc(a.hosts, func(h hostPort) bool { return h.host == host && (h.port == "" || h.port == port) })
}

// Reach is every list a check's connections must be on: the chart's
// (analysis.allowedAddresses) and, where the check carries credentials
// from a Secret, the Secret's own (configward.dev/analysis-addresses).
// None: anywhere.
type Reach []Addresses

// transport gives a client's transport the reach: it resolves each host
// itself and connects only to an address every list admits, and it uses
// no proxy (a proxy would make the connection the list is about).
func (r Reach) transport(t *http.Transport) {
	if len(r) == 0 {
		return
	}
	t.Proxy = nil
	dialer := &net.Dialer{Timeout: dialTimeout, KeepAlive: dialTimeout}
	t.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		host, port, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, err
		}
		var ips []netip.Addr
		if ip, err := netip.ParseAddr(host); err == nil {
			ips = []netip.Addr{ip}
		} else if ips, err = net.DefaultResolver.LookupNetIP(ctx, "ip", host); err != nil {
			return nil, err
		}
		var refused error
		for _, ip := range ips {
			if err := r.check(host, port, ip); err != nil {
				refused = err
				continue
			}
			return dialer.DialContext(ctx, network, net.JoinHostPort(ip.String(), port))
		}
		if refused == nil {
			refused = fmt.Errorf("%s resolves to no address", host)
		}
		return nil, refused
	}
}

// check refuses ip unless every list admits it, naming the first that
// does not.
func (r Reach) check(host, port string, ip netip.Addr) error {
	for _, a := range r {
		if !a.admits(host, port, ip) {
			return &RefusedError{Host: host, IP: ip, Source: a.Source}
		}
	}
	return nil
}

// dialTimeout is how long a connection may take, as Go's default
// transport allows.
const dialTimeout = 30 * time.Second

// RefusedError is a connection no list let through.
type RefusedError struct {
	Host   string
	IP     netip.Addr
	Source string
}

func (e *RefusedError) Error() string {
	if e.Host == e.IP.String() {
		return fmt.Sprintf("configward may not connect to %s: %s does not admit it", e.IP, e.Source)
	}
	return fmt.Sprintf("configward may not connect to %s (%s): %s does not admit it", e.Host, e.IP, e.Source)
}

// IsRefused says whether err is a connection a list refused.
func IsRefused(err error) bool {
	var r *RefusedError
	return errors.As(err, &r)
}
