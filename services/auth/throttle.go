package auth

import (
	"net/netip"
	"strings"
	"sync"
	"time"
)

// Throttle limits login attempts without handing anyone a lockout weapon:
//
//   - at most PerAddress attempts a minute from one client network (any account);
//   - at most PerAccountNetwork failed attempts a quarter-hour for one account from one
//     client network, after which even the right password waits, from that network only;
//   - at most PerAccount failed attempts an hour for one account from all networks
//     together, after which it waits everywhere (guessing spread over many networks).
//
// A client network is an IPv4 address, or an IPv6 /64 (one host's allocation, so that a
// client cannot get fresh limits from every address it holds). So a stranger who fails 5
// times locks only themselves out: the account's owner logs in from the office's network,
// and a successful login clears the failures of its account and network (not the account's
// count across networks, which a stranger's guessing keeps).
//
// It is in memory, per process, and bounded: a key's history holds at most its limit of
// timestamps, and expired keys are dropped. Time comes from Now.
type Throttle struct {
	// PerAddress attempts a minute per client network (default 10).
	PerAddress int
	// PerAccountNetwork failures a quarter-hour per account and client network (default 5).
	PerAccountNetwork int
	// PerAccount failures an hour per account across all networks (default 50).
	PerAccount int
	// Now is the clock (time.Now when nil).
	Now func() time.Time

	mu        sync.Mutex
	attempts  map[string][]time.Time // by network, within the last minute
	pairFails map[string][]time.Time // by account and network, within the last quarter-hour
	acctFails map[string][]time.Time // by account, within the last hour
	sweep     time.Time
}

const (
	addressWindow = time.Minute
	pairWindow    = 15 * time.Minute
	accountWindow = time.Hour
)

func (t *Throttle) now() time.Time {
	if t.Now != nil {
		return t.Now()
	}
	return time.Now()
}

func (t *Throttle) limits() (perAddr, perPair, perAcct int) {
	return or(t.PerAddress, 10), or(t.PerAccountNetwork, 5), or(t.PerAccount, 50)
}

// Allow records a login attempt from addr for email and reports whether it may proceed;
// when not, how long to wait (the account's failures from addr's network, then the
// account's failures from everywhere, then addr's network's attempts).
func (t *Throttle) Allow(addr, email string) (bool, time.Duration) {
	network, acct := addressKey(addr), account(email)
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	t.init(now)
	perAddr, perPair, perAcct := t.limits()
	if wait := t.locked(t.pairFails, pairKey(acct, network), perPair, pairWindow, now); wait > 0 {
		return false, wait
	}
	if wait := t.locked(t.acctFails, acct, perAcct, accountWindow, now); wait > 0 {
		return false, wait
	}
	tries := live(t.attempts[network], now, addressWindow)
	if len(tries) >= perAddr {
		t.attempts[network] = tries
		return false, tries[0].Add(addressWindow).Sub(now)
	}
	t.attempts[network] = append(tries, now)
	return true, 0
}

// locked returns how long key waits with limit failures within window (0: it does not).
func (t *Throttle) locked(m map[string][]time.Time, key string, limit int, window time.Duration, now time.Time) time.Duration {
	fails := live(m[key], now, window)
	if len(fails) < limit {
		if len(fails) == 0 {
			delete(m, key)
		} else {
			m[key] = fails
		}
		return 0
	}
	m[key] = fails
	return fails[0].Add(window).Sub(now)
}

// Failed records a failed login from addr for email.
func (t *Throttle) Failed(addr, email string) {
	network, acct := addressKey(addr), account(email)
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	t.init(now)
	_, perPair, perAcct := t.limits()
	record(t.pairFails, pairKey(acct, network), perPair, pairWindow, now)
	record(t.acctFails, acct, perAcct, accountWindow, now)
}

// record appends now to key's times, keeping at most limit within window.
func record(m map[string][]time.Time, key string, limit int, window time.Duration, now time.Time) {
	ts := live(m[key], now, window)
	if len(ts) >= limit {
		ts = ts[len(ts)-limit+1:]
	}
	m[key] = append(ts, now)
}

// Succeeded forgets the failures of email from addr's network.
func (t *Throttle) Succeeded(addr, email string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.pairFails, pairKey(account(email), addressKey(addr)))
}

func (t *Throttle) init(now time.Time) {
	if t.attempts == nil {
		t.attempts, t.pairFails, t.acctFails = map[string][]time.Time{}, map[string][]time.Time{}, map[string][]time.Time{}
	}
	if now.Sub(t.sweep) < time.Minute {
		return
	}
	t.sweep = now
	for _, s := range []struct {
		m      map[string][]time.Time
		window time.Duration
	}{{t.attempts, addressWindow}, {t.pairFails, pairWindow}, {t.acctFails, accountWindow}} {
		for k, v := range s.m {
			if len(live(v, now, s.window)) == 0 {
				delete(s.m, k)
			}
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

// addressKey is the client network an address counts by: an IPv4 address, or an IPv6 /64.
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

// pairKey is the key of an account's failures from a network.
func pairKey(acct, network string) string { return acct + "\x00" + network }

func or(v, def int) int {
	if v <= 0 {
		return def
	}
	return v
}
