package webhookserver

import (
	"crypto/tls"
	"net"
)

// wipingListener accepts TLS connections whose reads clear what the caller's
// buffer held beyond the bytes read.
//
// net/http reads each HTTP/1.1 request through a 4 KiB bufio.Reader that it
// takes from a process-wide pool and puts back, uncleared, when the
// connection ends. That buffer holds the request line, the headers and the
// start of the body: the first kilobytes of an AdmissionReview, Secret
// values and all. The next connection that takes it from the pool
// overwrites only as many bytes as its own first read brings, so the tail
// of an old review lived on in a new connection's buffer for as long as
// that connection stayed open, out of reach of the idle timeout that
// bounds the old one. The buffer is not reachable from outside net/http,
// but every read into it passes through the connection: clearing the part
// of p a read did not fill (a Reader may use all of p as scratch space)
// leaves nothing in it but the bytes of the current connection, and the
// read that ends a connection (EOF, the idle timeout, shutdown) returns no
// bytes, so it clears the whole buffer before net/http pools it.
//
// The TLS layer is done here rather than by http.Server because the reader
// must sit above it, where the plaintext is: http.Server treats the
// connection as plain HTTP and never negotiates HTTP/2 on it, which is why
// this is used only while HTTP/2 is off (the default).
type wipingListener struct{ net.Listener }

func newWipingListener(ln net.Listener, cfg *tls.Config) net.Listener {
	return wipingListener{tls.NewListener(ln, cfg)}
}

func (l wipingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return wipingConn{c.(*tls.Conn)}, nil
}

// wipingConn is a TLS connection whose reads clear the rest of the buffer.
// Embedding *tls.Conn keeps CloseWrite, which net/http uses to end a
// connection gracefully.
type wipingConn struct{ *tls.Conn }

func (c wipingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	clear(p[n:])
	return n, err
}
