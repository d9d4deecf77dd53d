package outbound

import (
	"errors"
	"net"
	"net/http"
	"net/netip"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// ipText matches an IPv4 address or a bracketed or bare IPv6 loopback in an error's text.
var ipText = regexp.MustCompile(`\b\d{1,3}(\.\d{1,3}){3}\b|::1|\[[0-9a-f:]+\]`)

// closedPort is a loopback port nothing listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	_ = l.Close()
	return port
}

var loopbacks = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}

// Issue 19: an error names the host as configured, never the address it resolved to, and
// keeps its class.
func TestErrorsNameTheConfiguredHost(t *testing.T) {
	t.Parallel()
	port := closedPort(t)
	for _, c := range []struct {
		name, url string
		client    *http.Client
		want      string
		is        error
	}{
		{"refused", "http://localhost:" + port + "/x", NewClient(Options{Allow: loopbacks}), "dial localhost:" + port + ": connection refused", syscall.ECONNREFUSED},
		{"denied", "http://localhost:" + port + "/x", NewClient(Options{}), "dial localhost:" + port + ": outbound: destination address not allowed", ErrDenied},
		{"no such host", "http://lifeline-test.invalid:8080/x", NewClient(Options{Allow: loopbacks}), "dial lifeline-test.invalid:8080: lookup lifeline-test.invalid", nil},
	} {
		_, err := get(t, c.client, c.url)
		if err == nil {
			t.Fatalf("%s: no error", c.name)
		}
		msg := err.Error()
		if !strings.Contains(msg, c.want) || ipText.MatchString(msg) {
			t.Errorf("%s: %q, want it to contain %q and no IP address", c.name, msg, c.want)
		}
		if c.is != nil && !errors.Is(err, c.is) {
			t.Errorf("%s: %v is not %v", c.name, err, c.is)
		}
	}

	// A connection reset in the middle of a response: the read's error names the host too.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			buf := make([]byte, 4096)
			_, _ = conn.Read(buf)
			_, _ = conn.Write([]byte("HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\npartial"))
			_ = conn.(*net.TCPConn).SetLinger(0) // RST
			_ = conn.Close()
		}
	}()
	host := "localhost:" + strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	resp, err := get(t, NewClient(Options{Allow: loopbacks}), "http://"+host+"/")
	if err == nil {
		buf := make([]byte, 200)
		for err == nil {
			_, err = resp.Body.Read(buf)
		}
	}
	if msg := err.Error(); ipText.MatchString(msg) {
		t.Errorf("reset: %q names an address", msg)
	}

	// A timeout stays a timeout (net.Error), told by the host.
	slow, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = slow.Close() })
	go func() {
		for {
			conn, err := slow.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { _ = conn.Close() })
		}
	}()
	_, err = get(t, NewClient(Options{Allow: loopbacks, Timeout: 200 * time.Millisecond}), "http://localhost:"+strconv.Itoa(slow.Addr().(*net.TCPAddr).Port)+"/")
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() || ipText.MatchString(err.Error()) {
		t.Errorf("timeout: %v", err)
	}
}

func TestDescribe(t *testing.T) {
	t.Parallel()
	op := &net.OpError{Op: "dial", Net: "tcp", Addr: &net.TCPAddr{IP: net.ParseIP("10.1.2.3"), Port: 5432}, Err: &net.DNSError{Err: "server misbehaving", Name: "db.internal", Server: "10.0.0.53:53"}}
	for _, c := range []struct {
		addr string
		err  error
		want string
	}{
		{"db.internal:5432", op, "dial db.internal:5432: lookup db.internal: server misbehaving"},
		{"db.internal:5432", &net.OpError{Op: "read", Net: "tcp", Source: &net.TCPAddr{IP: net.ParseIP("10.9.9.9"), Port: 1}, Addr: &net.TCPAddr{IP: net.ParseIP("10.1.2.3"), Port: 5432}, Err: syscall.ECONNRESET},
			"read db.internal:5432: connection reset by peer"},
		{"smtp.example:587", errors.New("client_dial: 550 client host [10.1.2.3] blocked"), "client_dial: 550 client host [address] blocked"},
		{"10.1.2.3:443", errors.New(`Get "https://10.1.2.3/": x509: certificate is valid for 10.1.2.3, 192.168.0.7, not x`), `Get "https://10.1.2.3/": x509: certificate is valid for 10.1.2.3, [address], not x`},
		{"x:1", errors.New("plain"), "plain"},
	} {
		if got := Describe(c.addr, c.err); got.Error() != c.want {
			t.Errorf("Describe(%q, %v) = %q, want %q", c.addr, c.err, got, c.want)
		}
	}
	if Describe("x:1", nil) != nil {
		t.Error("Describe(nil) is not nil")
	}
	if err := Describe("db.internal:5432", op); !errors.Is(err, op) {
		t.Error("Describe hides the original from errors.Is")
	}
}
