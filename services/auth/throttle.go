package auth

import (
	"net/netip"
	"strings"
	"sync"
	"time"
)

// Throttle limits login attempts: at most PerAddress attempts a minute from one client
// address, and at most PerAccount failed attempts a quarter-hour for one account (email),
// after which even the right password waits. It is in memory, per process, and bounded: a
// key's history holds at most its limit of timestamps, and expired keys are dropped.
type Throttle struct {
	// PerAddress attempts a minute per client address (default 10).
	PerAddress int
	// PerAccount failures a quarter-hour per account (default 5).
	PerAccount int
	// Now is the clock (time.Now when nil).
	Now func() time.Time

	mu       sync.Mutex
	attempts map[string][]time.Time // by address, within the last minute
	failures map[string][]time.Time // by account, within the last 15 minutes
	sweep    time.Time
}

const (
	addressWindow = time.Minute
	accountWindow = 15 * time.Minute
)

func (t *Throttle) now() time.Time {
	if t.Now != nil {
		return t.Now()
	}
	return time.Now()
}

// Allow records a login attempt from addr for email and reports whether it may proceed;
// when not, how long to wait. IPv6 addresses count by their /64 network (one host's
// allocation), so one client cannot get a fresh limit from every address it holds.
func (t *Throttle) Allow(addr, email string) (bool, time.Duration) {
	addr = addressKey(addr)
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	t.init(now)
	perAddr, perAcct := or(t.PerAddress, 10), or(t.PerAccount, 5)
	if fails := live(t.failures[account(email)], now, accountWindow); len(fails) >= perAcct {
		t.failures[account(email)] = fails
		return false, fails[0].Add(accountWindow).Sub(now)
	}
	tries := live(t.attempts[addr], now, addressWindow)
	if len(tries) >= perAddr {
		t.attempts[addr] = tries
		return false, tries[0].Add(addressWindow).Sub(now)
	}
	t.attempts[addr] = append(tries, now)
	return true, 0
}

// Failed records a failed login for email.
func (t *Throttle) Failed(email string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	t.init(now)
	k := account(email)
	fails := live(t.failures[k], now, accountWindow)
	if len(fails) >= or(t.PerAccount, 5) {
		fails = fails[1:]
	}
	t.failures[k] = append(fails, now)
}

// Succeeded forgets the account's failures.
func (t *Throttle) Succeeded(email string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.failures, account(email))
}

func (t *Throttle) init(now time.Time) {
	if t.attempts == nil {
		t.attempts, t.failures = map[string][]time.Time{}, map[string][]time.Time{}
	}
	if now.Sub(t.sweep) < time.Minute {
		return
	}
	t.sweep = now
	for k, v := range t.attempts {
		if len(live(v, now, addressWindow)) == 0 {
			delete(t.attempts, k)
		}
	}
	for k, v := range t.failures {
		if len(live(v, now, accountWindow)) == 0 {
			delete(t.failures, k)
		}
	}
}

// live returns the times within window before now (times are in order).
func live(ts []time.Time, now time.Time, window time.Duration) []time.Time {
	for len(ts) > 0 && !ts[0].After(now.Add(-window)) {
		ts = ts[1:]
	}
	return ts
}

// addressKey is what the per-address limit counts by: an IPv4 address, or an IPv6 /64.
func addressKey(addr string) string {
	ip, err := netip.ParseAddr(addr)
	if err != nil {
		return addr
	}
	ip = ip.Unmap()
	if ip.Is4() {
		return ip.String()
	}
	p, _ := ip.WithZone("").Prefix(64)
	return p.String()
}

func account(email string) string { return strings.ToLower(strings.TrimSpace(email)) }

func or(v, def int) int {
	if v <= 0 {
		return def
	}
	return v
}
