package auth

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alexedwards/argon2id"

	"lifeline/models"
	"lifeline/models/apperr"
	"lifeline/models/modeltest"
)

// Point 8: the dummy hash for unknown emails is not made at start-up (it cost 64 MiB there),
// but on the first login with an unknown email, at the parameters of new hashes.
func TestDummyHashIsLazy(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		s := &Service{DB: db}
		if s.dummy != "" {
			t.Fatal("a new service already holds a dummy hash")
		}
		if _, err := s.Login(context.Background(), "nobody@example.com", "whatever password"); apperr.ErrorCode(err) != apperr.EUNAUTHORIZED {
			t.Fatalf("unknown email: %v", err)
		}
		p, _, _, err := argon2id.DecodeHash(s.dummy)
		if err != nil {
			t.Fatalf("dummy hash %q: %v", s.dummy, err)
		}
		if p.Memory != 19456 || p.Iterations != 2 || p.Parallelism != 1 {
			t.Fatalf("dummy hash parameters %+v, want m=19456 t=2 p=1", p)
		}
	})
}

// Point 8: new password hashes use OWASP's argon2id parameters; hashes stored with other
// parameters (argon2id's defaults, 64 MiB) still verify.
func TestPasswordHashParameters(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		ctx := context.Background()
		s := &Service{DB: db}
		org, err := s.CreateOrg(ctx, "Biuro Hash")
		if err != nil {
			t.Fatal(err)
		}
		u, err := s.CreateUser(ctx, org.ID, "nowa@hash.example", "correct horse", models.RoleAdmin)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(u.PasswordHash, "$argon2id$v=19$m=19456,t=2,p=1$") {
			t.Fatalf("new hash %q, want OWASP parameters", u.PasswordHash)
		}
		if _, err := s.Login(ctx, "nowa@hash.example", "correct horse"); err != nil {
			t.Fatalf("login: %v", err)
		}
		old, err := argon2id.CreateHash("old password", argon2id.DefaultParams)
		if err != nil {
			t.Fatal(err)
		}
		v, err := s.CreateUser(ctx, org.ID, "stara@hash.example", "placeholder", models.RoleViewer)
		if err != nil {
			t.Fatal(err)
		}
		if err := db.Conn(ctx).Model(v).Update("password_hash", old).Error; err != nil {
			t.Fatal(err)
		}
		if _, err := s.Login(ctx, "stara@hash.example", "old password"); err != nil {
			t.Fatalf("a hash with other parameters no longer verifies: %v", err)
		}
		if _, err := s.Login(ctx, "stara@hash.example", "wrong password"); apperr.ErrorCode(err) != apperr.EUNAUTHORIZED {
			t.Fatalf("wrong password: %v", err)
		}
	})
}

// Point 8: at most NumCPU password hashes run at a time; a waiter gives up with its context.
func TestHashingAtMostNumCPU(t *testing.T) {
	t.Parallel()
	s := &Service{}
	n := runtime.NumCPU()
	var running, peak atomic.Int32
	release := make(chan struct{})
	entered := make(chan struct{}, 3*n)
	var wg sync.WaitGroup
	for range 3 * n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = s.hashing(context.Background(), func() {
				cur := running.Add(1)
				for {
					p := peak.Load()
					if cur <= p || peak.CompareAndSwap(p, cur) {
						break
					}
				}
				entered <- struct{}{}
				<-release
				running.Add(-1)
			})
		}()
	}
	for range n { // n hashes hold every slot
		<-entered
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	ran := false
	if err := s.hashing(ctx, func() { ran = true }); err == nil || ran {
		t.Fatalf("a hash ran while %d were running (err %v)", n, err)
	}
	close(release)
	wg.Wait()
	if p := peak.Load(); p > int32(n) {
		t.Fatalf("%d hashes at once, want at most %d", p, n)
	}
}

// Point 8: the per-address limit counts an IPv6 client by its /64, and forgets nothing by
// mapping IPv4 into IPv6.
func TestThrottleAddressKey(t *testing.T) {
	t.Parallel()
	now := time.Now()
	th := &Throttle{Now: func() time.Time { return now }}
	for i := range 10 {
		if ok, _ := th.Allow(fmt.Sprintf("2001:db8:1:2::%x", i+1), fmt.Sprintf("u%d@example.com", i)); !ok {
			t.Fatalf("attempt %d refused", i+1)
		}
	}
	if ok, wait := th.Allow("2001:db8:1:2:ffff::1", "x@example.com"); ok || wait <= 0 || wait > time.Minute {
		t.Fatalf("11th attempt from the same /64: ok=%v wait=%v", ok, wait)
	}
	if ok, _ := th.Allow("2001:db8:1:3::1", "x@example.com"); !ok {
		t.Fatal("another /64 is limited too")
	}
	for i := range 10 {
		th.Allow("192.0.2.7", fmt.Sprintf("v%d@example.com", i))
	}
	if ok, _ := th.Allow("::ffff:192.0.2.7", "x@example.com"); ok {
		t.Fatal("an IPv4-mapped address escapes the IPv4 address's limit")
	}
	if ok, _ := th.Allow("192.0.2.8", "x@example.com"); !ok {
		t.Fatal("the next IPv4 address is limited too")
	}
}

// Issue 19: failures count per account and network (5 a quarter-hour) and per account
// (50 an hour); a success clears its pair only.
func TestThrottleAccountAndNetwork(t *testing.T) {
	t.Parallel()
	now := time.Now()
	th := &Throttle{Now: func() time.Time { return now }, PerAddress: 1000}
	fail := func(addr, email string, n int) {
		for range n {
			if ok, _ := th.Allow(addr, email); !ok {
				t.Fatalf("attempt from %s refused", addr)
			}
			th.Failed(addr, email)
		}
	}
	fail("192.0.2.1", "Anna@example.com", 5)
	if ok, wait := th.Allow("192.0.2.1", "anna@example.com "); ok || wait != 15*time.Minute {
		t.Fatalf("6th from the same network: ok=%v wait=%v", ok, wait)
	}
	if ok, _ := th.Allow("192.0.2.2", "anna@example.com"); !ok {
		t.Fatal("another network is locked out")
	}
	fail("2001:db8::1", "anna@example.com", 4)
	th.Succeeded("2001:db8::2", "anna@example.com") // the same /64
	fail("2001:db8::3", "anna@example.com", 4)
	if ok, _ := th.Allow("2001:db8::4", "anna@example.com"); !ok {
		t.Fatal("a success did not clear its network's failures")
	}
	for n := range 7 {
		fail(fmt.Sprintf("198.18.0.%d", n), "anna@example.com", 5)
	}
	fail("198.18.1.1", "anna@example.com", 2) // 5 + 4 + 4 + 35 + 2 = 50
	if ok, wait := th.Allow("203.0.113.9", "anna@example.com"); ok || wait <= 0 || wait > time.Hour {
		t.Fatalf("after 50 failures from many networks: ok=%v wait=%v", ok, wait)
	}
	if ok, _ := th.Allow("203.0.113.9", "bob@example.com"); !ok {
		t.Fatal("another account is locked out")
	}
	now = now.Add(time.Hour + time.Second)
	if ok, _ := th.Allow("203.0.113.9", "anna@example.com"); !ok {
		t.Fatal("still locked an hour later")
	}
}
