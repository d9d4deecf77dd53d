package outbound

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"os"
	"regexp"
	"strings"
	"syscall"
)

// HostError is a network failure told by the address as it was configured (the URL's or
// DSN's host and port), never by the address a name resolved to: errors of connections to
// tenants' services reach places tenants read (step errors, the delivery log, test
// results), and the resolved address would tell them about Lifeline's network. The class
// of the failure stays (connection refused, timeout, no such host, TLS…), and errors.Is and
// errors.As see the original error (ErrDenied, *net.DNSError, syscall.ECONNREFUSED,
// net.Error's Timeout). Unwrap does not give it: what walks a chain of errors to show it
// (the engine's trace of a failed attempt) sees only texts without addresses.
type HostError struct {
	// Op is what failed: "dial", "read" or "write".
	Op string
	// Addr is the host and port as configured.
	Addr string
	// Err is the original error (it may name resolved addresses: never show it).
	Err error
}

func (e *HostError) Error() string { return e.Op + " " + e.Addr + ": " + describe(e.Addr, e.Err) }

// Is reports whether the original error is target (errors.Is).
func (e *HostError) Is(target error) bool { return errors.Is(e.Err, target) }

// As finds target in the original error's chain (errors.As).
func (e *HostError) As(target any) bool { return errors.As(e.Err, target) }

// Timeout reports whether the failure is a timeout (net.Error).
func (e *HostError) Timeout() bool {
	var ne net.Error
	return errors.As(e.Err, &ne) && ne.Timeout()
}

// Temporary is net.Error's (deprecated, still asked by some callers).
func (e *HostError) Temporary() bool {
	var ne interface{ Temporary() bool }
	return errors.As(e.Err, &ne) && ne.Temporary()
}

var _ net.Error = (*HostError)(nil)

// errnos are the socket errors whose own text names no address, in the order checked.
var errnos = []syscall.Errno{syscall.ECONNREFUSED, syscall.ECONNRESET, syscall.ECONNABORTED, syscall.EHOSTUNREACH,
	syscall.ENETUNREACH, syscall.EHOSTDOWN, syscall.ENETDOWN, syscall.EPIPE, syscall.ETIMEDOUT, syscall.EADDRNOTAVAIL}

// addresses matches IPv4 addresses and bracketed IPv6 addresses, with a port.
var addresses = regexp.MustCompile(`\[[0-9A-Fa-f:.%a-z]+\](:\d+)?|\b\d{1,3}(\.\d{1,3}){3}(:\d+)?\b`)

// describe says what err is without any address but addr's (the configured host and
// port): the failure's class in the words of the standard library.
func describe(addr string, err error) string {
	var dns *net.DNSError
	var cve *tls.CertificateVerificationError
	var rhe tls.RecordHeaderError
	var ua x509.UnknownAuthorityError
	var he x509.HostnameError
	var ci x509.CertificateInvalidError
	var ne net.Error
	switch {
	case errors.Is(err, ErrDenied):
		return ErrDenied.Error() + " (loopback, private, link-local or metadata; see LIFELINE_OUTBOUND_ALLOW)"
	case errors.As(err, &dns):
		// Name is the name looked up (the one configured); Server, the resolver's address,
		// is left out.
		switch {
		case dns.IsNotFound:
			return "lookup " + dns.Name + ": no such host"
		case dns.IsTimeout:
			return "lookup " + dns.Name + ": i/o timeout"
		}
		return "lookup " + dns.Name + ": " + scrub(dns.Err, addr)
	case errors.Is(err, context.Canceled):
		return "canceled"
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, os.ErrDeadlineExceeded):
		return "i/o timeout"
	case errors.As(err, &cve), errors.As(err, &ua), errors.As(err, &he), errors.As(err, &ci):
		return "tls: the server's certificate is not trusted for this host"
	case errors.As(err, &rhe):
		return "tls: the server does not speak TLS"
	case errors.Is(err, net.ErrClosed):
		return "use of closed network connection"
	case errors.Is(err, io.ErrUnexpectedEOF):
		return "connection closed unexpectedly"
	}
	for _, e := range errnos {
		if errors.Is(err, e) {
			return e.Error()
		}
	}
	if errors.As(err, &ne) && ne.Timeout() {
		return "i/o timeout"
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Err != nil {
		err = op.Err // its own text is "op net source->addr: …"
	}
	return scrub(err.Error(), addr)
}

// scrub replaces the IP addresses in s by "[address]", except addr's host (an address
// the user configured is theirs to see).
func scrub(s, addr string) string {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	return addresses.ReplaceAllStringFunc(s, func(m string) string {
		h, _, err := net.SplitHostPort(m)
		if err != nil {
			h = strings.Trim(m, "[]")
		}
		if host != "" && h == strings.Trim(host, "[]") {
			return m
		}
		return "[address]"
	})
}

// hostDial wraps a dial function so that its errors, and the errors of the connections it
// makes, are HostErrors naming the address dialled (the host and port as configured).
func hostDial(dial func(ctx context.Context, network, addr string) (net.Conn, error)) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, &HostError{Op: "dial", Addr: addr, Err: err}
		}
		return &hostConn{Conn: c, addr: addr}, nil
	}
}

// hostConn is a connection whose read and write errors name its configured address.
// io.EOF is returned as it is (callers compare it).
type hostConn struct {
	net.Conn
	addr string
}

func (c *hostConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	return n, c.wrap("read", err)
}

func (c *hostConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	return n, c.wrap("write", err)
}

func (c *hostConn) wrap(op string, err error) error {
	if err == nil || err == io.EOF {
		return err
	}
	return &HostError{Op: op, Addr: c.addr, Err: err}
}

// CloseWrite half-closes the connection when the underlying one can.
func (c *hostConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// Describe returns err told by addr (the host and port as configured) for places a tenant
// reads: a network failure in err's chain (a *net.OpError or *net.DNSError) becomes a
// HostError, and any other error whose text names an IP address other than addr's has
// those addresses replaced by "[address]". nil, HostErrors and other errors are returned
// as they are. errors.Is and errors.As still see the original; Unwrap does not.
func Describe(addr string, err error) error {
	var he *HostError
	var op *net.OpError
	var dns *net.DNSError
	switch {
	case err == nil, errors.As(err, &he):
		return err
	case errors.As(err, &op):
		kind := op.Op
		if kind != "read" && kind != "write" {
			kind = "dial"
		}
		return &HostError{Op: kind, Addr: addr, Err: err}
	case errors.As(err, &dns):
		return &HostError{Op: "dial", Addr: addr, Err: err}
	}
	if msg := err.Error(); scrub(msg, addr) != msg {
		return &scrubbed{addr: addr, err: err}
	}
	return err
}

// scrubbed is an error whose text names addresses other than addr's.
type scrubbed struct {
	addr string
	err  error
}

func (e *scrubbed) Error() string        { return scrub(e.err.Error(), e.addr) }
func (e *scrubbed) Is(target error) bool { return errors.Is(e.err, target) }
func (e *scrubbed) As(target any) bool   { return errors.As(e.err, target) }
