package classify_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"lifeline/services/classify"
)

func TestClassify(t *testing.T) {
	t.Parallel()
	httpErr := func(status int) error {
		return &classify.HTTPError{Method: "POST", URL: "https://x/y", StatusCode: status}
	}
	tests := []struct {
		name     string
		err      error
		wantType classify.Type
		wantCode string
	}{
		// Seed 000 unit tests.
		{"seed: Connection timeout with ETIMEDOUT", fmt.Errorf("Connection timeout: %w", syscall.ETIMEDOUT), classify.Timeout, "ETIMEDOUT"},
		{"seed: Too many requests 429", httpErr(429), classify.RateLimit, "HTTP_429"},
		{"seed: Validation failed 400", httpErr(400), classify.Validation, "HTTP_400"},
		{"seed: Network error ECONNRESET", fmt.Errorf("Network error: %w", syscall.ECONNRESET), classify.Transient, "ECONNRESET"},
		{"seed: Not found 404", httpErr(404), classify.Permanent, "HTTP_404"},

		// Classified wins over everything, through wrapping.
		{"classified", classify.New(classify.Permanent, "BAD_SKU", "timeout while looking up sku"), classify.Permanent, "BAD_SKU"},
		{"classified wrapped", fmt.Errorf("step: %w", classify.New(classify.RateLimit, "QUOTA", "quota")), classify.RateLimit, "QUOTA"},
		{"classified over http", fmt.Errorf("%w: %w", classify.New(classify.Internal, "X", "x"), httpErr(503)), classify.Internal, "X"},
		{"classified with bad type", classify.New("bogus", "C", "m"), classify.Unknown, "C"},

		// A locked period, in the service's body or its message, in English or Polish.
		{"xero lock date", &classify.HTTPError{Method: "PUT", URL: "https://x/y", StatusCode: 400,
			Body: `{"Message": "The document date cannot be before the period lock date of 30 Sep 2026"}`}, classify.Validation, "period_closed"},
		{"odoo lock date", errors.New("You cannot add/modify entries prior to and inclusive of the lock date 2026-09-30."), classify.Validation, "period_closed"},
		{"polish closed period", &classify.HTTPError{Method: "POST", URL: "https://x/y", StatusCode: 409,
			Body: `{"blad": "Okres 2026-09 jest zamknięty: nie można księgować"}`}, classify.Validation, "period_closed"},
		{"a closed connection is not a closed period", errors.New("connection closed by peer"), classify.Transient, ""},
		{"polish okres zamknięty", &classify.HTTPError{Method: "POST", URL: "https://x/y", StatusCode: 422,
			Body: `{"blad": "Księgowanie odrzucone: okres zamknięty (2026-09)"}`}, classify.Validation, "period_closed"},
		{"a 503 saying lock date is an outage", &classify.HTTPError{Method: "POST", URL: "https://x/y", StatusCode: 503,
			Body: `lock date service unavailable`}, classify.Transient, "HTTP_503"},

		// HTTP statuses.
		{"http 422", httpErr(422), classify.Validation, "HTTP_422"},
		{"http 401", httpErr(401), classify.Authorization, "HTTP_401"},
		{"http 403", httpErr(403), classify.Authorization, "HTTP_403"},
		{"http 410", httpErr(410), classify.Permanent, "HTTP_410"},
		{"http 409", httpErr(409), classify.Permanent, "HTTP_409"},
		{"http 408", httpErr(408), classify.Timeout, "HTTP_408"},
		{"http 504", httpErr(504), classify.Timeout, "HTTP_504"},
		{"http 500", httpErr(500), classify.Transient, "HTTP_500"},
		{"http 502", httpErr(502), classify.Transient, "HTTP_502"},
		{"http 503", httpErr(503), classify.Transient, "HTTP_503"},
		{"http 501", httpErr(501), classify.ExternalService, "HTTP_501"},
		{"http 599", httpErr(599), classify.ExternalService, "HTTP_599"},
		{"http 304", httpErr(304), classify.Unknown, "HTTP_304"},
		{"http wrapped", fmt.Errorf("step fetch: %w", httpErr(429)), classify.RateLimit, "HTTP_429"},

		// Timeouts.
		{"context deadline", fmt.Errorf("run: %w", context.DeadlineExceeded), classify.Timeout, "ETIMEDOUT"},
		{"os deadline", &os.PathError{Op: "read", Path: "x", Err: os.ErrDeadlineExceeded}, classify.Timeout, "ETIMEDOUT"},
		{"net.Error timeout", &net.OpError{Op: "read", Net: "tcp", Err: timeoutErr{}}, classify.Timeout, "ETIMEDOUT"},

		// Connections.
		{"econnrefused", &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}, classify.Transient, "ECONNREFUSED"},
		{"epipe", &net.OpError{Op: "write", Net: "tcp", Err: os.NewSyscallError("write", syscall.EPIPE)}, classify.Transient, "ECONNRESET"},
		{"unexpected eof", fmt.Errorf("read body: %w", io.ErrUnexpectedEOF), classify.Transient, "ECONNRESET"},
		{"eof in net op", &net.OpError{Op: "read", Net: "tcp", Err: io.EOF}, classify.Transient, "ECONNRESET"},
		{"bare eof is not a request", fmt.Errorf("decode: %w", io.EOF), classify.Unknown, ""},

		// DNS.
		{"dns not found", &net.DNSError{Err: "no such host", Name: "nope.invalid", IsNotFound: true}, classify.Transient, "ENOTFOUND"},
		{"dns timeout", &net.DNSError{Err: "i/o timeout", Name: "slow.example", IsTimeout: true}, classify.Timeout, "ETIMEDOUT"},
		{"dns other", &net.DNSError{Err: "server misbehaving", Name: "x.example"}, classify.Transient, "EDNS"},

		// TLS.
		{"x509 unknown authority", fmt.Errorf("get: %w", x509.UnknownAuthorityError{}), classify.ExternalService, "TLS"},
		{"x509 hostname", x509.HostnameError{Certificate: &x509.Certificate{}, Host: "x"}, classify.ExternalService, "TLS"},
		{"x509 invalid", x509.CertificateInvalidError{Cert: &x509.Certificate{}, Reason: x509.Expired}, classify.ExternalService, "TLS"},
		{"tls record header", fmt.Errorf("handshake: %w", tls.RecordHeaderError{Msg: "bad"}), classify.ExternalService, "TLS"},
		{"tls alert", fmt.Errorf("remote error: %w", tls.AlertError(40)), classify.ExternalService, "TLS"},
		{"tls verification", &tls.CertificateVerificationError{Err: errors.New("nope")}, classify.ExternalService, "TLS"},

		// Cancellation.
		{"canceled", fmt.Errorf("step: %w", context.Canceled), classify.Internal, "CANCELED"},

		// Message keywords, in the seed's order.
		{"msg timeout", errors.New("Connection timeout"), classify.Timeout, ""},
		{"msg timed out", errors.New("request timed out"), classify.Timeout, ""},
		{"msg rate limit", errors.New("Rate limit reached"), classify.RateLimit, ""},
		{"msg too many requests", errors.New("Too many requests"), classify.RateLimit, ""},
		{"msg unauthorized", errors.New("Unauthorized"), classify.Authorization, ""},
		{"msg forbidden", errors.New("forbidden: no scope"), classify.Authorization, ""},
		{"msg validation", errors.New("Validation failed"), classify.Validation, ""},
		{"msg invalid", errors.New("invalid email"), classify.Validation, ""},
		{"msg not found", errors.New("Not found"), classify.Permanent, ""},
		{"msg network", errors.New("Network error"), classify.Transient, ""},
		{"msg connection", errors.New("connection dropped"), classify.Transient, ""},
		{"msg order: timeout before rate limit", errors.New("rate limit check timed out"), classify.Timeout, ""},
		{"msg order: invalid before not found", errors.New("invalid id: not found"), classify.Validation, ""},
		{"msg nothing", errors.New("boom"), classify.Unknown, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := classify.Classify(tt.err)
			if got.Type != tt.wantType || got.Code != tt.wantCode {
				t.Errorf("Classify(%v) = %s/%q, want %s/%q", tt.err, got.Type, got.Code, tt.wantType, tt.wantCode)
			}
			if got.Message != tt.err.Error() {
				t.Errorf("Message = %q, want %q", got.Message, tt.err.Error())
			}
		})
	}
}

type timeoutErr struct{}

func (timeoutErr) Error() string   { return "i/o deadline reached" }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }

// TestClassifyRealNetwork classifies errors produced by real sockets, HTTP and
// TLS on loopback.
func TestClassifyRealNetwork(t *testing.T) {
	t.Parallel()

	t.Run("dial closed port", func(t *testing.T) {
		t.Parallel()
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close()
		_, err = net.Dial("tcp", addr)
		assertClass(t, err, classify.Transient, "ECONNREFUSED")
	})

	t.Run("dial past deadline", func(t *testing.T) {
		t.Parallel()
		ln := listen(t)
		ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
		defer cancel()
		var d net.Dialer
		_, err := d.DialContext(ctx, "tcp", ln.Addr().String())
		assertClass(t, err, classify.Timeout, "ETIMEDOUT")
	})

	t.Run("read deadline", func(t *testing.T) {
		t.Parallel()
		ln := listen(t)
		conn, err := (&net.Dialer{Timeout: time.Second}).Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		conn.SetReadDeadline(time.Now().Add(time.Millisecond))
		_, err = conn.Read(make([]byte, 1))
		assertClass(t, err, classify.Timeout, "ETIMEDOUT")
	})

	t.Run("dial canceled", func(t *testing.T) {
		t.Parallel()
		ln := listen(t)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		var d net.Dialer
		_, err := d.DialContext(ctx, "tcp", ln.Addr().String())
		assertClass(t, err, classify.Internal, "CANCELED")
	})

	t.Run("server drops connection", func(t *testing.T) {
		t.Parallel()
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			conn, _, err := http.NewResponseController(w).Hijack()
			if err == nil {
				conn.Close()
			}
		}))
		defer srv.Close()
		resp, err := srv.Client().Get(srv.URL)
		if err == nil {
			resp.Body.Close()
		}
		assertClass(t, err, classify.Transient, "ECONNRESET")
	})

	t.Run("untrusted tls", func(t *testing.T) {
		t.Parallel()
		srv := httptest.NewTLSServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
		srv.Config.ErrorLog = discardLog() // the rejected handshake is expected
		defer srv.Close()
		client := &http.Client{Transport: &http.Transport{}} // system roots only
		resp, err := client.Get(srv.URL)
		if err == nil {
			resp.Body.Close()
		}
		assertClass(t, err, classify.ExternalService, "TLS")
	})
}

func discardLog() *log.Logger { return log.New(io.Discard, "", 0) }

func listen(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln
}

func assertClass(t *testing.T, err error, wantType classify.Type, wantCode string) {
	t.Helper()
	if err == nil {
		t.Fatal("expected an error")
	}
	got := classify.Classify(err)
	if got.Type != wantType || got.Code != wantCode {
		t.Errorf("Classify(%v) = %s/%q, want %s/%q", err, got.Type, got.Code, wantType, wantCode)
	}
}

func TestClassifyNil(t *testing.T) {
	t.Parallel()
	if got := classify.Classify(nil); got != (classify.Result{Type: classify.Unknown}) {
		t.Errorf("Classify(nil) = %+v", got)
	}
}

func TestMessageTruncation(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		msg  string
		want int // bytes
	}{
		{"short", "boom", 4},
		{"exact", strings.Repeat("a", classify.MaxMessageBytes), classify.MaxMessageBytes},
		{"long ascii", strings.Repeat("a", 5000), classify.MaxMessageBytes},
		// 3999 bytes of ASCII then a 3-byte rune: it does not fit, so it is dropped whole.
		{"rune on boundary", strings.Repeat("a", 3999) + "€€", 3999},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := classify.Classify(errors.New(tt.msg)).Message
			if len(got) != tt.want || !utf8.ValidString(got) || !strings.HasPrefix(tt.msg, got) {
				t.Errorf("len(Message) = %d (valid %v), want %d", len(got), utf8.ValidString(got), tt.want)
			}
		})
	}
	if got := classify.Classify(errors.New("bad \xff byte")).Message; got != "bad \uFFFD byte" {
		t.Errorf("invalid UTF-8 Message = %q", got)
	}
}

func TestHTTPError(t *testing.T) {
	t.Parallel()
	tests := []struct {
		err  *classify.HTTPError
		want string
	}{
		{&classify.HTTPError{Method: "POST", URL: "https://x/y", StatusCode: 503}, "POST https://x/y: 503 Service Unavailable"},
		{&classify.HTTPError{Method: "GET", URL: "https://x", StatusCode: 599}, "GET https://x: 599"},
	}
	for _, tt := range tests {
		if got := tt.err.Error(); got != tt.want {
			t.Errorf("Error() = %q, want %q", got, tt.want)
		}
	}
}

func TestRetryAfter(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		err    error
		want   time.Duration
		wantOK bool
	}{
		{"wrapped", fmt.Errorf("step: %w", &classify.HTTPError{StatusCode: 429, RetryAfter: 30 * time.Second}), 30 * time.Second, true},
		{"none set", &classify.HTTPError{StatusCode: 429}, 0, false},
		{"not http", errors.New("x"), 0, false},
		{"nil", nil, 0, false},
	}
	for _, tt := range tests {
		got, ok := classify.RetryAfter(tt.err)
		if got != tt.want || ok != tt.wantOK {
			t.Errorf("%s: RetryAfter = %v, %v; want %v, %v", tt.name, got, ok, tt.want, tt.wantOK)
		}
	}
}

func TestTypes(t *testing.T) {
	t.Parallel()
	want := []string{"transient", "permanent", "timeout", "validation", "authorization", "rate_limit", "external_service", "internal", "unknown"}
	got := classify.Types()
	if len(got) != len(want) {
		t.Fatalf("Types() has %d entries, want %d", len(got), len(want))
	}
	for i, s := range want {
		if string(got[i]) != s {
			t.Errorf("Types()[%d] = %q, want %q", i, got[i], s)
		}
		if pt, ok := classify.ParseType(s); !ok || pt != got[i] {
			t.Errorf("ParseType(%q) = %q, %v", s, pt, ok)
		}
	}
	for _, s := range []string{"", "Transient", "foo"} {
		if _, ok := classify.ParseType(s); ok {
			t.Errorf("ParseType(%q) ok, want not ok", s)
		}
	}
}
