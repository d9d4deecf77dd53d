package dbconn

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"lifeline/services/outbound"
)

// ErrOwnServer is wrapped by the dial error when a connection would reach one of Lifeline's
// own servers (Config.Own).
var ErrOwnServer = errors.New("dbconn: the address is Lifeline's own database server or web server")

// errOwnUnknown: an own server's host name never resolved, so no address can be checked
// against it; every dial fails until it does.
var errOwnUnknown = errors.New("dbconn: Lifeline's own database server's address is not known")

// lookupTimeout bounds the name resolution of a DSN's hosts when a connection is saved.
const lookupTimeout = 3 * time.Second

// own knows the addresses of Lifeline's own servers: Config.Own resolved, each address
// resolved once kept for the life of the process (a managed database that changes its
// address on failover stays refused at its old one too).
type own struct {
	servers []string
	mu      sync.Mutex
	seen    map[string][]netip.AddrPort
}

// addrs resolves the own servers. An entry whose host does not resolve now counts with the
// addresses it resolved to before; one that never resolved is errOwnUnknown.
func (o *own) addrs(ctx context.Context) ([]netip.AddrPort, error) {
	var out []netip.AddrPort
	for _, hp := range o.servers {
		got, err := resolveHostPort(ctx, hp)
		o.mu.Lock()
		if err == nil {
			for _, ap := range got {
				if !slices.Contains(o.seen[hp], ap) {
					o.seen[hp] = append(o.seen[hp], ap)
				}
			}
		}
		known := slices.Clone(o.seen[hp])
		o.mu.Unlock()
		if len(known) == 0 {
			return nil, fmt.Errorf("%w: %s", errOwnUnknown, hp)
		}
		out = append(out, known...)
	}
	return out, nil
}

// resolveHostPort resolves "host:port"; an empty host is every address of this machine
// (the unspecified addresses).
func resolveHostPort(ctx context.Context, hp string) ([]netip.AddrPort, error) {
	host, portText, err := net.SplitHostPort(hp)
	if err != nil {
		return nil, err
	}
	port, err := strconv.ParseUint(portText, 10, 16)
	if err != nil {
		return nil, fmt.Errorf("port %q: %w", portText, err)
	}
	var ips []netip.Addr
	switch a, err := netip.ParseAddr(host); {
	case host == "":
		ips = []netip.Addr{netip.IPv4Unspecified(), netip.IPv6Unspecified()}
	case err == nil:
		ips = []netip.Addr{a}
	default:
		if ips, err = net.DefaultResolver.LookupNetIP(ctx, "ip", host); err != nil {
			return nil, err
		}
	}
	out := make([]netip.AddrPort, len(ips))
	for i, ip := range ips {
		out[i] = netip.AddrPortFrom(ip.Unmap(), uint16(port))
	}
	return out, nil
}

// localAddrs are the addresses of this machine's interfaces (the loopback and unspecified
// addresses count as this machine's without being listed: isLocal).
func localAddrs() []netip.Addr {
	addrs, _ := net.InterfaceAddrs() // none known: loopback and unspecified still count
	var out []netip.Addr
	for _, a := range addrs {
		if p, err := netip.ParsePrefix(a.String()); err == nil {
			out = append(out, p.Addr().Unmap().WithZone(""))
		}
	}
	return out
}

// isLocal reports whether a reaches this machine: a loopback address (all of 127.0.0.0/8,
// ::1), an unspecified one (0.0.0.0, ::) or an address of one of its interfaces.
func isLocal(a netip.Addr, local []netip.Addr) bool {
	a = a.Unmap().WithZone("")
	return a.IsLoopback() || a.IsUnspecified() || slices.Contains(local, a)
}

// reachesOwn reports whether a connection to ap reaches one of the own servers: the same
// address and port, or — when the own server is on this machine — the same port on any
// address of this machine (local lists its interfaces' addresses). IPv4-mapped IPv6
// addresses count as the IPv4 address they reach.
func reachesOwn(own []netip.AddrPort, local []netip.Addr, ap netip.AddrPort) bool {
	a := ap.Addr().Unmap().WithZone("")
	for _, o := range own {
		if o.Port() != ap.Port() {
			continue
		}
		oa := o.Addr().Unmap().WithZone("")
		if oa == a || (isLocal(oa, local) && isLocal(a, local)) {
			return true
		}
	}
	return false
}

// savedReachesOwn reports whether a DSN's hosts, resolved now, reach an own server: the
// check when a connection is saved. A host that does not resolve, or own servers that
// cannot be resolved, are left to the check at dial time.
func (s *Service) savedReachesOwn(ctx context.Context, cfg *pgconn.Config) bool {
	if len(s.own.servers) == 0 {
		return false
	}
	ctx, cancel := context.WithTimeout(ctx, lookupTimeout)
	defer cancel()
	own, err := s.own.addrs(ctx)
	if err != nil {
		return false
	}
	local := localAddrs()
	targets := []struct {
		host string
		port uint16
	}{{cfg.Host, cfg.Port}}
	for _, f := range cfg.Fallbacks {
		targets = append(targets, struct {
			host string
			port uint16
		}{f.Host, f.Port})
	}
	for _, t := range targets {
		aps, err := resolveHostPort(ctx, net.JoinHostPort(t.host, strconv.Itoa(int(t.port))))
		if err != nil {
			continue
		}
		for _, ap := range aps {
			if reachesOwn(own, local, ap) {
				return true
			}
		}
	}
	return false
}

// dialFunc is the driver's dialer: it resolves the address it is given (the driver gives an
// IP address), refuses it when any of its addresses reaches an own server (ErrOwnServer),
// and dials the checked address itself, not the name again, through the SSRF guard
// (outbound.ErrDenied for an address outside Config.Allow). Only TCP.
func (s *Service) dialFunc(ctx context.Context, network, addr string) (net.Conn, error) {
	switch network {
	case "tcp", "tcp4", "tcp6":
	default:
		return nil, fmt.Errorf("%w: network %s", outbound.ErrDenied, network)
	}
	aps, err := resolveHostPort(ctx, addr)
	if err != nil {
		return nil, err
	}
	if len(s.own.servers) > 0 {
		own, err := s.own.addrs(ctx)
		if err != nil {
			return nil, err
		}
		local := localAddrs()
		for _, ap := range aps {
			if reachesOwn(own, local, ap) {
				return nil, ErrOwnServer
			}
		}
	}
	var errs []error
	for _, ap := range aps {
		conn, err := s.dial(ctx, network, ap.String())
		if err == nil {
			return conn, nil
		}
		errs = append(errs, err)
	}
	return nil, errors.Join(errs...)
}
