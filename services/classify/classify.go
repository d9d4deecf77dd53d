// Package classify turns a step failure into a [Result]: one of nine error
// types, a short machine code and a message. The retry policy decides on the
// type alone, so the contract is:
//
//   - An error that carries its own classification ([Classified], built with
//     [New]) anywhere in its chain wins over every other rule.
//   - An [*HTTPError] is classified by status code ([HTTPStatusType]), with
//     code "HTTP_<status>".
//   - Timeouts, connection failures, DNS and TLS failures and context
//     cancellation are recognised through errors.Is/errors.As, so wrapping
//     with %w keeps the classification.
//   - Anything else falls back to keywords in the message, and finally to
//     [Unknown] with an empty code.
//
// Classify never fails and never returns an empty type. The package imports
// nothing from Lifeline.
package classify

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"
)

// Type is an error type, stored as its string value.
type Type string

// The nine error types.
const (
	Transient       Type = "transient"
	Permanent       Type = "permanent"
	Timeout         Type = "timeout"
	Validation      Type = "validation"
	Authorization   Type = "authorization"
	RateLimit       Type = "rate_limit"
	ExternalService Type = "external_service"
	Internal        Type = "internal"
	Unknown         Type = "unknown"
)

// Types returns all nine types in declaration order. The slice is new on
// every call.
func Types() []Type {
	return []Type{Transient, Permanent, Timeout, Validation, Authorization, RateLimit, ExternalService, Internal, Unknown}
}

// ParseType returns the Type whose string value is exactly s, and false if
// there is none.
func ParseType(s string) (Type, bool) {
	for _, t := range Types() {
		if string(t) == s {
			return t, true
		}
	}
	return "", false
}

// MaxMessageBytes is the longest Result.Message, in bytes.
const MaxMessageBytes = 4000

// Result is what the engine stores about a failure.
type Result struct {
	Type    Type
	Code    string // e.g. "HTTP_503", "ECONNREFUSED"; "" when there is none
	Message string // err.Error(), valid UTF-8, at most MaxMessageBytes bytes
}

// HTTPError is returned by http steps on a non-2xx response.
type HTTPError struct {
	Method     string
	URL        string
	StatusCode int
	Body       string        // first 2 KiB of the response body
	RetryAfter time.Duration // from the Retry-After header; 0 = none
}

// Error returns e.g. "POST https://x/y: 503 Service Unavailable". The body is
// not included.
func (e *HTTPError) Error() string {
	status := strconv.Itoa(e.StatusCode)
	if text := http.StatusText(e.StatusCode); text != "" {
		status += " " + text
	}
	return e.Method + " " + e.URL + ": " + status
}

// Classified lets a step (including custom step types registered by
// embedders) choose the type itself. An ErrorType outside [Types] is stored as
// [Unknown].
type Classified interface {
	error
	ErrorType() Type
	ErrorCode() string
}

type classified struct {
	t             Type
	code, message string
}

func (e *classified) Error() string     { return e.message }
func (e *classified) ErrorType() Type   { return e.t }
func (e *classified) ErrorCode() string { return e.code }

// New returns a [Classified] error with the given type, code and message.
func New(t Type, code, message string) error {
	return &classified{t: t, code: code, message: message}
}

// HTTPStatusType maps an HTTP status code to a Type: 400 and 422 are
// validation; 401 and 403 authorization; 408 and 504 timeout; 429 rate_limit;
// other 4xx permanent; 500, 502 and 503 transient; other 5xx
// external_service. Anything outside 400-599 is unknown.
func HTTPStatusType(status int) Type {
	switch status {
	case 400, 422:
		return Validation
	case 401, 403:
		return Authorization
	case 408, 504:
		return Timeout
	case 429:
		return RateLimit
	case 500, 502, 503:
		return Transient
	}
	switch {
	case status >= 400 && status < 500:
		return Permanent
	case status >= 500 && status < 600:
		return ExternalService
	}
	return Unknown
}

// RetryAfter returns the delay the server asked for, from the first
// [*HTTPError] in err's chain; false when there is none or it is not positive.
func RetryAfter(err error) (time.Duration, bool) {
	var he *HTTPError
	if errors.As(err, &he) && he.RetryAfter > 0 {
		return he.RetryAfter, true
	}
	return 0, false
}

// Classify classifies err; see the package documentation for the rules, which
// apply in the order listed there. A nil err classifies as unknown with an
// empty message.
func Classify(err error) Result {
	if err == nil {
		return Result{Type: Unknown}
	}
	t, code := classify(err)
	return Result{Type: t, Code: code, Message: message(err.Error())}
}

func classify(err error) (Type, string) {
	var c Classified
	if errors.As(err, &c) {
		t := c.ErrorType()
		if _, ok := ParseType(string(t)); !ok {
			t = Unknown
		}
		return t, c.ErrorCode()
	}

	// A service refusing to post into a period it has locked: no retry posts it, only a
	// change of period or the period reopened does.
	var he *HTTPError
	if LockedPeriod(err.Error()) || (errors.As(err, &he) && he.StatusCode >= 400 && he.StatusCode < 500 && LockedPeriod(he.Body)) {
		return Validation, CodePeriodClosed
	}
	if he != nil {
		return HTTPStatusType(he.StatusCode), "HTTP_" + strconv.Itoa(he.StatusCode)
	}

	// DNS before the generic timeout check: a DNS timeout is a net.Error too.
	var dns *net.DNSError
	if errors.As(err, &dns) {
		switch {
		case dns.IsNotFound:
			return Transient, "ENOTFOUND"
		case dns.IsTimeout:
			return Timeout, "ETIMEDOUT"
		}
		return Transient, "EDNS"
	}

	var ne net.Error
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded) ||
		errors.Is(err, syscall.ETIMEDOUT) || (errors.As(err, &ne) && ne.Timeout()) {
		return Timeout, "ETIMEDOUT"
	}

	if errors.Is(err, syscall.ECONNREFUSED) {
		return Transient, "ECONNREFUSED"
	}
	if errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) ||
		errors.Is(err, io.ErrUnexpectedEOF) || (errors.Is(err, io.EOF) && duringRequest(err)) {
		return Transient, "ECONNRESET"
	}

	if isTLS(err) {
		return ExternalService, "TLS"
	}

	if errors.Is(err, context.Canceled) {
		return Internal, "CANCELED"
	}

	return byMessage(strings.ToLower(err.Error())), ""
}

// duringRequest reports whether err comes from a network operation or an
// HTTP client call. A bare io.EOF (say, from decoding an empty document) is
// not a dropped connection.
func duringRequest(err error) bool {
	var ue *url.Error
	var oe *net.OpError
	return errors.As(err, &ue) || errors.As(err, &oe)
}

func isTLS(err error) bool {
	var (
		unknownAuthority x509.UnknownAuthorityError
		hostname         x509.HostnameError
		invalid          x509.CertificateInvalidError
		recordHeader     tls.RecordHeaderError
		alert            tls.AlertError
		verification     *tls.CertificateVerificationError
	)
	return errors.As(err, &unknownAuthority) || errors.As(err, &hostname) ||
		errors.As(err, &invalid) || errors.As(err, &recordHeader) ||
		errors.As(err, &alert) || errors.As(err, &verification)
}

// CodePeriodClosed is the code of a failure to post into a closed (locked) period: the
// office's own closed period, or the service's lock date.
const CodePeriodClosed = "period_closed"

// LockedPeriodPatterns are what accounting services say when a period is locked: Xero's
// "period lock date", Odoo's "lock date", "period … is locked/closed", and the Polish "okres
// … zamknięty" / "zamknięty okres" (matched case-insensitively).
var LockedPeriodPatterns = []*regexp.Regexp{
	regexp.MustCompile(`(?i)\block date\b`),
	regexp.MustCompile(`(?i)\bperiod\b[^.;]{0,40}\b(is|was|has been)\s+(locked|closed)\b`),
	regexp.MustCompile(`(?i)\b(locked|closed) (accounting |financial )?period\b`),
	regexp.MustCompile(`(?i)\bokres\b[^.;]{0,40}\bzamknięty\b`),
	regexp.MustCompile(`(?i)\bzamknięty okres\b`),
}

// LockedPeriod reports whether a service's message says the period is locked.
func LockedPeriod(msg string) bool {
	for _, p := range LockedPeriodPatterns {
		if p.MatchString(msg) {
			return true
		}
	}
	return false
}

// byMessage applies the keyword rules to a lower-cased message.
func byMessage(msg string) Type {
	rules := []struct {
		t     Type
		words []string
	}{
		{Timeout, []string{"timeout", "timed out"}},
		{RateLimit, []string{"rate limit", "too many requests"}},
		{Authorization, []string{"unauthorized", "forbidden"}},
		{Validation, []string{"validation", "invalid"}},
		{Permanent, []string{"not found"}},
		{Transient, []string{"network", "connection"}},
	}
	for _, r := range rules {
		for _, w := range r.words {
			if strings.Contains(msg, w) {
				return r.t
			}
		}
	}
	return Unknown
}

// message makes s valid UTF-8 and cuts it to MaxMessageBytes on a rune
// boundary.
func message(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= MaxMessageBytes {
		return s
	}
	n := MaxMessageBytes
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

var _ Classified = (*classified)(nil)
