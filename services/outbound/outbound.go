// Package outbound builds the HTTP client Lifeline uses for every request to
// a user-supplied URL (HTTP steps, webhooks, Slack/Teams notifiers), guarded
// against server-side request forgery.
//
// The contract of [NewClient]:
//
//   - The check runs in the dialer's Control hook, on the address actually
//     being connected to after DNS resolution, so DNS rebinding and redirects
//     are covered. Every address a hostname resolves to is checked as it is
//     dialled.
//   - Link-local addresses (169.254.0.0/16, fe80::/10) and cloud metadata
//     endpoints (169.254.169.254, fd00:ec2::254, 100.100.100.200) are always
//     refused, even when an [Options.Allow] prefix covers them. IPv4-mapped
//     IPv6 and NAT64 (64:ff9b::/96) forms of those addresses are refused too.
//   - Every other non-public address — loopback, private ranges (10/8,
//     172.16/12, 192.168/16, fc00::/7), CGNAT (100.64/10), documentation,
//     multicast, anything outside IPv6 global unicast and the rest of the
//     IANA special-purpose registries as listed by code.dny.dev/ssrf — is
//     refused unless it lies inside an Allow prefix.
//   - A refusal fails the dial before any connection is attempted; the error
//     returned by the client wraps [ErrDenied] (errors.Is) and also the
//     code.dny.dev/ssrf sentinel when that package made the decision.
//   - Proxies are never used (Transport.Proxy is nil; HTTP_PROXY and
//     friends are ignored), so the check always sees the real destination.
//   - Only TCP, only the http and https schemes (any other scheme fails in the
//     transport), any port.
//   - Errors name the host and port as configured, never an address a name resolved
//     to: a failed dial, and a failed read or write of a connection the dialer made,
//     is a [*HostError] that keeps the failure's class (connection refused, i/o
//     timeout, no such host…) and lets errors.Is and errors.As see the original
//     (ErrDenied included). [Describe] does the same for errors made elsewhere (an
//     SMTP client's, a TLS handshake's).
//
// The package imports nothing from Lifeline.
package outbound

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"syscall"
	"time"

	"code.dny.dev/ssrf"
)

// ErrDenied is wrapped by the dial error when the guard refuses a
// destination address.
var ErrDenied = errors.New("outbound: destination address not allowed")

// DefaultTimeout is the overall request timeout used when Options.Timeout is
// zero or negative.
const DefaultTimeout = 30 * time.Second

// Options configures [NewClient].
type Options struct {
	// Allow lists prefixes that may be reached even though they are not
	// public (e.g. 127.0.0.0/8 in development, 10.0.0.0/8 for an internal
	// API). It cannot open link-local or metadata addresses.
	Allow []netip.Prefix
	// Timeout is the overall per-request timeout (http.Client.Timeout);
	// DefaultTimeout if zero or negative.
	Timeout time.Duration
}

// alwaysDenied cannot be opened by Options.Allow.
var alwaysDenied = []netip.Prefix{
	netip.MustParsePrefix("169.254.0.0/16"),     // IPv4 link-local, incl. 169.254.169.254 (AWS, GCP, Azure…)
	netip.MustParsePrefix("fe80::/10"),          // IPv6 link-local
	netip.MustParsePrefix("fd00:ec2::254/128"),  // AWS IMDS over IPv6
	netip.MustParsePrefix("100.100.100.200/32"), // Alibaba Cloud metadata
}

// nat64 is the well-known NAT64 prefix; its last 32 bits carry an IPv4
// address.
var nat64 = netip.MustParsePrefix("64:ff9b::/96")

// ParseAllow parses the LIFELINE_OUTBOUND_ALLOW form: comma-separated CIDRs
// or single IPv4/IPv6 addresses, with optional spaces. Empty entries are
// skipped, so "" yields no prefixes. A single address becomes a /32 or /128;
// host bits of a CIDR are masked off; IPv4-mapped IPv6 forms are converted to
// IPv4. The error names the first bad entry.
func ParseAllow(s string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for entry := range strings.SplitSeq(s, ",") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			continue
		}
		p, err := parseEntry(entry)
		if err != nil {
			return nil, fmt.Errorf("outbound: allow list entry %q: %w", entry, err)
		}
		out = append(out, p)
	}
	return out, nil
}

func parseEntry(entry string) (netip.Prefix, error) {
	if strings.Contains(entry, "/") {
		p, err := netip.ParsePrefix(entry)
		if err != nil {
			return netip.Prefix{}, err
		}
		if a := p.Addr(); a.Is4In6() && p.Bits() >= 96 {
			p = netip.PrefixFrom(a.Unmap(), p.Bits()-96)
		}
		return p.Masked(), nil
	}
	a, err := netip.ParseAddr(entry)
	if err != nil {
		return netip.Prefix{}, err
	}
	if a.Zone() != "" {
		return netip.Prefix{}, errors.New("zoned addresses are not allowed")
	}
	a = a.Unmap()
	return netip.PrefixFrom(a, a.BitLen()), nil
}

// NewClient returns an SSRF-guarded *http.Client (see the package
// documentation). Its Transport is an *http.Transport with Proxy nil and
// the usual connection-pool and handshake timeouts; each client has its own
// pool.
func NewClient(o Options) *http.Client {
	timeout := o.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	g := newGuard(o.Allow)
	dialer := &net.Dialer{
		Timeout:   min(10*time.Second, timeout),
		KeepAlive: 30 * time.Second,
		Control:   g.control,
	}
	tr := &http.Transport{
		Proxy:                 nil,
		DialContext:           hostDial(dialer.DialContext),
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          100,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: 1 * time.Second,
	}
	return &http.Client{Transport: tr, Timeout: timeout}
}

type guard struct {
	ssrf *ssrf.Guardian
}

func newGuard(allow []netip.Prefix) *guard {
	var v4, v6 []netip.Prefix
	for _, p := range allow {
		if p.Addr().Is4() {
			v4 = append(v4, p)
		} else {
			v6 = append(v6, p)
		}
	}
	return &guard{ssrf: ssrf.New(
		ssrf.WithAnyPort(),
		ssrf.WithAllowedV4Prefixes(v4...),
		ssrf.WithAllowedV6Prefixes(v6...),
	)}
}

// control is the net.Dialer Control hook. ssrf's allow list is checked before
// its deny list, so the always-denied prefixes are checked first here.
func (g *guard) control(network, address string, c syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrDenied, err)
	}
	// Check IPv4-mapped destinations as the IPv4 address they reach, both
	// here and in ssrf (which would otherwise treat them as non-global IPv6).
	addr := ap.Addr().Unmap().WithZone("")
	if denied(addr) {
		return fmt.Errorf("%w: %s is link-local or a cloud metadata address", ErrDenied, addr)
	}
	if err := g.ssrf.Safe(network, netip.AddrPortFrom(addr, ap.Port()).String(), c); err != nil {
		return fmt.Errorf("%w: %w", ErrDenied, err)
	}
	return nil
}

func denied(a netip.Addr) bool {
	if nat64.Contains(a) {
		b := a.As16()
		a = netip.AddrFrom4([4]byte(b[12:]))
	}
	for _, p := range alwaysDenied {
		if p.Contains(a) {
			return true
		}
	}
	return false
}
