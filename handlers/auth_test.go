package handlers_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"lifeline/handlers"
	"lifeline/models"
	"lifeline/models/apperr"
	"lifeline/models/modeltest"
	"lifeline/services/auth"
	"lifeline/services/workflows"
)

var form = map[string]string{"Content-Type": "application/x-www-form-urlencoded"}

// loginForm posts the login form from a fresh client and returns the response.
func loginForm(t *testing.T, base, email, password, next string) resp {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	m := csrfInput.FindStringSubmatch(do(t, c, "GET", base+"/login", "", nil).body)
	if m == nil {
		t.Fatal("no CSRF field on the login page")
	}
	v := url.Values{"email": {email}, "password": {password}, "_csrf": {m[1]}, "next": {next}}
	return do(t, c, "POST", base+"/login", v.Encode(), form)
}

// loginVia posts the login form as a request forwarded for client by a proxy.
func loginVia(t *testing.T, base, client, email, password string) resp {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	m := csrfInput.FindStringSubmatch(do(t, c, "GET", base+"/login", "", nil).body)
	if m == nil {
		t.Fatal("no CSRF field on the login page")
	}
	v := url.Values{"email": {email}, "password": {password}, "_csrf": {m[1]}}
	return do(t, c, "POST", base+"/login", v.Encode(), map[string]string{"Content-Type": form["Content-Type"], "X-Forwarded-For": client})
}

// Point 8 behind a reverse proxy: from a trusted proxy, the per-address limit counts the
// forwarded client; from anyone else, X-Forwarded-For is ignored (it cannot buy new tries).
func TestLoginThrottleBehindProxy(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		a := newApp(t, db)
		serve := func(trusted []netip.Prefix) string {
			srv := httptest.NewServer(handlers.New(handlers.Deps{DB: db, Engine: a.eng, Workflows: a.wfs, Auth: a.as,
				Log: slog.New(slog.NewTextHandler(io.Discard, nil)), LoginThrottle: &auth.Throttle{}, TrustedProxies: trusted}))
			t.Cleanup(srv.Close)
			return srv.URL
		}
		proxied := serve([]netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")})
		for i := range 10 {
			if r := loginVia(t, proxied, "203.0.113.7", fmt.Sprintf("p%d@example.com", i), "wrong password"); r.status != http.StatusUnauthorized {
				t.Fatalf("attempt %d: %d", i+1, r.status)
			}
		}
		if r := loginVia(t, proxied, "203.0.113.7", "p@example.com", "wrong password"); r.status != http.StatusTooManyRequests {
			t.Fatalf("11th attempt of one client: %d", r.status)
		}
		if r := loginVia(t, proxied, "203.0.113.8", "p@example.com", "wrong password"); r.status != http.StatusUnauthorized {
			t.Fatalf("another client behind the proxy: %d", r.status)
		}

		direct := serve(nil)
		for i := range 10 {
			loginVia(t, direct, fmt.Sprintf("198.51.100.%d", i), fmt.Sprintf("d%d@example.com", i), "wrong password")
		}
		if r := loginVia(t, direct, "198.51.100.99", "d@example.com", "wrong password"); r.status != http.StatusTooManyRequests {
			t.Fatalf("a forged X-Forwarded-For bought an 11th attempt: %d", r.status)
		}
	})
}

// Point 7: after login, next= leads only to a local path.
func TestLoginNextIsLocal(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		a := newApp(t, db)
		tn := a.tenant("Biuro Next")
		for _, next := range []string{
			"/\t/evil.example", "/\t\\evil.example", "/\n/evil.example", "/\r/evil.example", "/%09/evil.example", "/%09%5Cevil.example",
			"/%0a/evil.example", "/%5C%5Cevil.example", "/\\evil.example", "//evil.example", "https://evil.example/", "/%2F/evil.example",
			"javascript:alert(1)", "/\x00/evil.example", "/\u00a0/evil.example", "/%E2%80%8B/evil.example", "evil.example", "///evil.example",
		} {
			r := loginForm(t, a.srv.URL, tn.email, tn.password, next)
			if loc := r.header.Get("Location"); r.status != http.StatusSeeOther || loc != "/workflows" {
				t.Errorf("next=%q: %d → %q, want /workflows", next, r.status, loc)
			}
		}
		for _, next := range []string{"/executions?status=DLQ_PENDING", "/dlq/" + tn.dlqID, "/workflows/" + tn.wfID + "#start"} {
			if r := loginForm(t, a.srv.URL, tn.email, tn.password, next); r.header.Get("Location") != next {
				t.Errorf("local next=%q → %q", next, r.header.Get("Location"))
			}
		}
	})
}

// fakeClock is a settable clock.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (f *fakeClock) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

func (f *fakeClock) Add(d time.Duration) {
	f.mu.Lock()
	f.now = f.now.Add(d)
	f.mu.Unlock()
}

// Point 8: login attempts are limited per client address and per account; 429 with
// Retry-After beyond them.
func TestLoginThrottle(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		a := newApp(t, db)
		tn := a.tenant("Biuro Limit")
		clock := &fakeClock{now: time.Now()}
		serve := func(th *auth.Throttle) string {
			srv := httptest.NewServer(handlers.New(handlers.Deps{DB: db, Engine: a.eng, Workflows: a.wfs, Auth: a.as,
				Log: slog.New(slog.NewTextHandler(io.Discard, nil)), LoginThrottle: th}))
			t.Cleanup(srv.Close)
			return srv.URL
		}

		// Per address: 10 attempts a minute, whatever the accounts.
		base := serve(&auth.Throttle{Now: clock.Now})
		for i := range 10 {
			if r := loginForm(t, base, fmt.Sprintf("nobody%d@example.com", i), "wrong password", ""); r.status != http.StatusUnauthorized {
				t.Fatalf("attempt %d: %d", i+1, r.status)
			}
		}
		r := loginForm(t, base, tn.email, tn.password, "")
		if r.status != http.StatusTooManyRequests || r.header.Get("Retry-After") == "" || !strings.Contains(r.body, "Too many login attempts") {
			t.Fatalf("11th attempt: %d Retry-After=%q", r.status, r.header.Get("Retry-After"))
		}
		clock.Add(61 * time.Second)
		if r := loginForm(t, base, tn.email, tn.password, ""); r.status != http.StatusSeeOther {
			t.Fatalf("a minute later: %d", r.status)
		}

		// Per account: 5 failures a quarter-hour, then even the right password waits.
		base = serve(&auth.Throttle{Now: clock.Now, PerAddress: 1000})
		for i := range 5 {
			if r := loginForm(t, base, tn.email, "wrong password", ""); r.status != http.StatusUnauthorized {
				t.Fatalf("failure %d: %d", i+1, r.status)
			}
		}
		r = loginForm(t, base, tn.email, tn.password, "")
		if r.status != http.StatusTooManyRequests || r.header.Get("Retry-After") == "" {
			t.Fatalf("after 5 failures: %d", r.status)
		}
		if r := loginForm(t, base, "other@example.com", "wrong password", ""); r.status != http.StatusUnauthorized {
			t.Fatalf("another account is not locked: %d", r.status)
		}
		clock.Add(15*time.Minute + time.Second)
		if r := loginForm(t, base, tn.email, tn.password, ""); r.status != http.StatusSeeOther {
			t.Fatalf("a quarter-hour later: %d", r.status)
		}
	})
}

// Point 11: a NUL byte in the login email is the same 401 on both databases.
func TestLoginOddEmail(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		a := newApp(t, db)
		for _, email := range []string{"anna\x00@example.com", "\xff\xfe@example.com", strings.Repeat("a", 5000) + "@example.com"} {
			if r := loginForm(t, a.srv.URL, email, "whatever password", ""); r.status != http.StatusUnauthorized {
				t.Errorf("email %.20q: %d", email, r.status)
			}
		}
	})
}

// Point 12: one body limit for every route; nothing is saved from a refused body.
func TestBodyLimitEverywhere(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		a := newApp(t, db)
		tn := a.tenant("Biuro Body")
		b, tok := a.browser(tn)
		before := count(t, db, "workflows")
		big := strings.Repeat("x", 2<<20)
		r := do(t, b, "POST", a.srv.URL+"/workflows", url.Values{"definition": {`{"name": "` + big + `"}`}, "_csrf": {tok}}.Encode(), form)
		if r.status != http.StatusRequestEntityTooLarge || !strings.Contains(r.body, "too large") {
			t.Fatalf("2 MiB form: %d %.200s", r.status, r.body)
		}
		r = do(t, http.DefaultClient, "POST", a.srv.URL+"/api/v1/workflows", `{"name": "`+big+`"}`, bearer(tn.token))
		if r.status != http.StatusRequestEntityTooLarge || r.json(t)["error"] == nil {
			t.Fatalf("2 MiB API body: %d %.200s", r.status, r.body)
		}
		r = do(t, http.DefaultClient, "POST", a.srv.URL+"/hooks/"+tn.webhookToken, `{"x": "`+big+`"}`, map[string]string{"Content-Type": "application/json"})
		if r.status != http.StatusRequestEntityTooLarge || r.json(t)["error"] == nil {
			t.Fatalf("2 MiB webhook body: %d %.200s", r.status, r.body)
		}
		if n := count(t, db, "workflows"); n != before {
			t.Fatalf("a refused body saved a workflow (%d → %d)", before, n)
		}
	})
}

// Point 12: the CSRF token belongs to its session.
func TestCSRFTokenIsTheSessions(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		a := newApp(t, db)
		tn := a.tenant("Biuro Sesja")
		ctx := context.Background()
		other := *tn
		other.email = "druga@sesja.example"
		if _, err := a.as.CreateUser(ctx, tn.org, other.email, tn.password, models.RoleAdmin); err != nil {
			t.Fatal(err)
		}
		alice, aliceTok := a.browser(tn)
		bob, bobTok := a.browser(&other)
		if aliceTok == bobTok {
			t.Fatal("two sessions share a CSRF token")
		}
		start := a.srv.URL + "/workflows/" + tn.wfID + "/executions"
		before := count(t, db, "workflow_executions")
		hdr := func(tok string) map[string]string {
			return map[string]string{"Content-Type": form["Content-Type"], "X-CSRF-Token": tok, "HX-Request": "true"}
		}
		if r := do(t, bob, "POST", start, "input=%7B%7D", hdr(aliceTok)); r.status != http.StatusForbidden {
			t.Fatalf("Bob's session with Alice's token: %d", r.status)
		}
		// Nor with a CSRF cookie planted to match it (a cookie token is not the session's).
		planted := hdr(aliceTok)
		planted["Cookie"] = "lifeline_csrf=" + aliceTok + "; _csrf=" + aliceTok
		if r := do(t, bob, "POST", start, "input=%7B%7D", planted); r.status != http.StatusForbidden {
			t.Fatalf("Bob's session with Alice's token and a planted CSRF cookie: %d", r.status)
		}
		if n := count(t, db, "workflow_executions"); n != before {
			t.Fatal("a refused request started an execution")
		}
		if r := do(t, bob, "POST", start, "input=%7B%7D", hdr(bobTok)); r.status != http.StatusNoContent {
			t.Fatalf("Bob with his own token: %d %s", r.status, r.body)
		}
		// After logout, the old token is worth nothing, even in a new session of the same browser.
		if r := do(t, alice, "POST", a.srv.URL+"/logout", url.Values{"_csrf": {aliceTok}}.Encode(), form); r.status >= 400 {
			t.Fatalf("logout: %d", r.status)
		}
		if r := do(t, alice, "POST", a.srv.URL+"/login", url.Values{"email": {tn.email}, "password": {tn.password}, "_csrf": {aliceTok}}.Encode(), form); r.status != http.StatusForbidden {
			t.Fatalf("the token of an ended session was accepted: %d", r.status)
		}
	})
}

// The session's CSRF token is made when a page needs it: a visitor who gets no form (a 404,
// a redirect to the login page) writes no session; the login page does.
func TestCSRFTokenOnlyForForms(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		a := newApp(t, db)
		c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		for _, p := range []string{"/no-such-page", "/workflows", "/static/no-such.css"} {
			if r := do(t, c, "GET", a.srv.URL+p, "", nil); r.header.Get("Set-Cookie") != "" {
				t.Errorf("GET %s: %d sets %q", p, r.status, r.header.Get("Set-Cookie"))
			}
		}
		if n := count(t, db, "sessions"); n != 0 {
			t.Fatalf("%d sessions stored for visitors without a form", n)
		}
		r := do(t, c, "GET", a.srv.URL+"/login", "", nil)
		if !strings.Contains(r.header.Get("Set-Cookie"), "lifeline_session=") || csrfInput.FindStringSubmatch(r.body) == nil {
			t.Fatalf("login page: no session or no CSRF field (%q)", r.header.Get("Set-Cookie"))
		}
		// A session without a token cannot post anything.
		if r := do(t, c, "POST", a.srv.URL+"/logout", url.Values{"_csrf": {"x"}}.Encode(), form); r.status != http.StatusForbidden {
			t.Fatalf("post without a session: %d", r.status)
		}
	})
}

// Point 12: authenticated responses are not cached; /readyz does not show internal errors;
// webhook tokens stay out of the request log.
func TestNoStoreReadyzAndLogs(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		var logs syncBuffer
		a := newAppWith(t, db, &logs)
		tn := a.tenant("Biuro Cache")
		b, _ := a.browser(tn)
		for _, p := range []string{"/workflows", "/executions/" + tn.execID, "/settings/tokens"} {
			if r := do(t, b, "GET", a.srv.URL+p, "", nil); r.header.Get("Cache-Control") != "no-store" {
				t.Errorf("page %s: Cache-Control %q", p, r.header.Get("Cache-Control"))
			}
		}
		if r := do(t, http.DefaultClient, "GET", a.srv.URL+"/api/v1/workflows", "", bearer(tn.token)); r.header.Get("Cache-Control") != "no-store" {
			t.Errorf("API: Cache-Control %q", r.header.Get("Cache-Control"))
		}

		srv := httptest.NewServer(handlers.New(handlers.Deps{DB: db, Engine: a.eng, Workflows: a.wfs, Auth: a.as,
			Log:   slog.New(slog.NewJSONHandler(&logs, nil)),
			Ready: func(context.Context) error { return errors.New("dial tcp 10.1.2.3:5432: connect: connection refused") }}))
		defer srv.Close()
		r := do(t, http.DefaultClient, "GET", srv.URL+"/readyz", "", nil)
		if r.status != http.StatusServiceUnavailable || strings.Contains(r.body, "10.1.2.3") || strings.Contains(r.body, "refused") {
			t.Fatalf("readyz: %d %s", r.status, r.body)
		}
		do(t, http.DefaultClient, "POST", a.srv.URL+"/hooks/"+tn.webhookToken, `{}`, nil)
		if strings.Contains(logs.String(), tn.webhookToken) {
			t.Fatal("the request log shows a webhook token")
		}
		if !strings.Contains(logs.String(), "/hooks/[token]") {
			t.Fatal("the webhook request is not logged at all")
		}
	})
}

// Point 12: a webhook request that fails on our side is logged without its token either.
func TestWebhookTokenNotInErrorLog(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		a := newApp(t, db)
		tn := a.tenant("Biuro Log")
		var logs syncBuffer
		broken := modeltest.New(t, db.Dialect)
		_ = broken.Close() // every query fails: the webhook answers 500
		// The workflows service reads the webhook's workflow: on the closed database too.
		srv := httptest.NewServer(handlers.New(handlers.Deps{DB: broken, Engine: a.eng, Workflows: &workflows.Service{DB: broken}, Auth: a.as,
			Log: slog.New(slog.NewJSONHandler(&logs, nil))}))
		defer srv.Close()
		r := do(t, http.DefaultClient, "POST", srv.URL+"/hooks/"+tn.webhookToken, `{}`, map[string]string{"Content-Type": "application/json"})
		if r.status != http.StatusInternalServerError {
			t.Fatalf("webhook on a closed database: %d %s", r.status, r.body)
		}
		if !strings.Contains(logs.String(), "request failed") {
			t.Fatalf("the failure is not logged: %s", logs.String())
		}
		if strings.Contains(logs.String(), tn.webhookToken) || strings.Contains(r.body, tn.webhookToken) {
			t.Fatalf("the webhook token is in the log or the answer: %s", logs.String())
		}
	})
}

var plainToken = regexp.MustCompile(`llt_[0-9a-f]{64}`)

// Point 12: API tokens expire and can be revoked; admins manage them on a page.
func TestAPITokensExpireAndRevoke(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		a := newApp(t, db)
		tn := a.tenant("Biuro Tokeny")
		other := a.tenant("Biuro Obcy")
		ctx := context.Background()
		b, tok := a.browser(tn)

		// Create from the page: the plain token is shown once and works.
		r := do(t, b, "POST", a.srv.URL+"/settings/tokens", url.Values{"_csrf": {tok}, "name": {"ERP export"}, "role": {"accountant"}, "expires": {"30"}}.Encode(), form)
		plain := plainToken.FindString(r.body)
		if r.status != http.StatusCreated || plain == "" || !strings.Contains(r.body, `data-testid="token-created"`) {
			t.Fatalf("create: %d %.300s", r.status, r.body)
		}
		if r := do(t, http.DefaultClient, "GET", a.srv.URL+"/api/v1/workflows", "", bearer(plain)); r.status != 200 {
			t.Fatalf("new token: %d", r.status)
		}
		if list := do(t, b, "GET", a.srv.URL+"/settings/tokens", "", nil).body; plainToken.MatchString(list) || !strings.Contains(list, "ERP export") {
			t.Fatal("the list must show the token's name and never its value")
		}
		// Bad input: 422 with field messages, nothing created.
		n := count(t, db, "api_tokens")
		for _, bad := range []url.Values{
			{"name": {""}, "role": {"viewer"}, "expires": {"30"}},
			{"name": {"x"}, "role": {"owner"}, "expires": {"30"}}, // above an admin's own role
			{"name": {"x"}, "role": {"viewer"}, "expires": {"forever"}},
		} {
			bad.Set("_csrf", tok)
			if r := do(t, b, "POST", a.srv.URL+"/settings/tokens", bad.Encode(), form); r.status != http.StatusUnprocessableEntity || !strings.Contains(r.body, `class="field-error"`) && !strings.Contains(r.body, "field-error") {
				t.Errorf("bad token form %v: %d", bad, r.status)
			}
		}
		if count(t, db, "api_tokens") != n {
			t.Fatal("a refused form created a token")
		}

		// Revoke from the page: the token stops working with a clear message.
		var row models.APIToken
		db.Conn(ctx).Where("organization_id = ? AND name = ?", tn.org, "ERP export").First(&row)
		if r := do(t, b, "POST", a.srv.URL+"/settings/tokens/"+row.ID+"/revoke", url.Values{"_csrf": {tok}}.Encode(), form); r.status != http.StatusSeeOther {
			t.Fatalf("revoke: %d", r.status)
		}
		r = do(t, http.DefaultClient, "GET", a.srv.URL+"/api/v1/workflows", "", bearer(plain))
		if r.status != 401 || !strings.Contains(r.body, "revoked") {
			t.Fatalf("revoked token: %d %s", r.status, r.body)
		}
		// Another organization's token: 404, and it keeps working.
		var foreign models.APIToken
		db.Conn(ctx).Where("organization_id = ?", other.org).First(&foreign)
		if r := do(t, b, "POST", a.srv.URL+"/settings/tokens/"+foreign.ID+"/revoke", url.Values{"_csrf": {tok}}.Encode(), form); r.status != 404 {
			t.Fatalf("revoke another organization's token: %d", r.status)
		}
		if r := do(t, http.DefaultClient, "GET", a.srv.URL+"/api/v1/workflows", "", bearer(other.token)); r.status != 200 {
			t.Fatalf("the other organization's token: %d", r.status)
		}
		// The audit log records both, with the admin as actor.
		var events []models.AuditEntry
		db.Conn(ctx).Where("organization_id = ? AND entity_id = ?", tn.org, row.ID).Order("created_at, action").Find(&events)
		if len(events) != 2 || events[0].Action != "token.created" || events[1].Action != "token.revoked" || events[1].ActorType != "user" {
			t.Fatalf("audit events %+v", events)
		}
		// Roles: accountants and viewers cannot see or use the page.
		for i, role := range []string{models.RoleAccountant, models.RoleViewer} {
			acc := *tn
			acc.email = fmt.Sprintf("%s%d@tokeny.example", role, i)
			if _, err := a.as.CreateUser(ctx, tn.org, acc.email, tn.password, role); err != nil {
				t.Fatal(err)
			}
			ab, atok := a.browser(&acc)
			if r := do(t, ab, "GET", a.srv.URL+"/settings/tokens", "", nil); r.status != 403 {
				t.Fatalf("%s GET: %d", role, r.status)
			}
			if r := do(t, ab, "POST", a.srv.URL+"/settings/tokens", url.Values{"_csrf": {atok}, "name": {"x"}, "role": {"viewer"}, "expires": {"30"}}.Encode(), form); r.status != 403 {
				t.Fatalf("%s POST: %d", role, r.status)
			}
			if r := do(t, ab, "POST", a.srv.URL+"/settings/tokens/"+row.ID+"/revoke", url.Values{"_csrf": {atok}}.Encode(), form); r.status != 403 {
				t.Fatalf("%s revoke: %d", role, r.status)
			}
		}

		// Expiry: a token past its time is refused with the date.
		clock := &fakeClock{now: time.Now()}
		svc := &auth.Service{DB: db, Now: clock.Now}
		exp, _, err := svc.IssueToken(ctx, auth.TokenRequest{OrganizationID: tn.org, Role: models.RoleViewer, Name: "short", TTL: 24 * time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := svc.TokenPrincipal(ctx, exp); err != nil {
			t.Fatalf("fresh token: %v", err)
		}
		clock.Add(25 * time.Hour)
		if _, err := svc.TokenPrincipal(ctx, exp); apperr.ErrorCode(err) != apperr.EUNAUTHORIZED || !strings.Contains(err.Error(), "expired") {
			t.Fatalf("expired token: %v", err)
		}
		// The default for new tokens is 90 days.
		if _, t2, _ := svc.CreateToken(ctx, tn.org, models.RoleViewer, "default"); t2.ExpiresAt == nil || t2.ExpiresAt.Sub(clock.Now()) != auth.DefaultTokenTTL {
			t.Fatalf("default expiry %v", t2.ExpiresAt)
		}
	})
}

// Issue 19: failed logins lock the account only from the network they came from (5 a
// quarter-hour), so a stranger cannot lock the office's admin out; across all networks the
// account takes 50 failures an hour. A successful login clears its own network's failures.
// Clients are told apart by X-Forwarded-For from a trusted proxy; time is the test's clock.
func TestLoginLockoutIsPerNetwork(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		a := newApp(t, db)
		tn := a.tenant("Biuro Blokada")
		clock := &fakeClock{now: time.Now()}
		srv := httptest.NewServer(handlers.New(handlers.Deps{DB: db, Engine: a.eng, Workflows: a.wfs, Auth: a.as,
			Log: slog.New(slog.NewTextHandler(io.Discard, nil)), LoginThrottle: &auth.Throttle{Now: clock.Now},
			TrustedProxies: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}))
		t.Cleanup(srv.Close)
		login := func(client, email, password string, want int) resp {
			t.Helper()
			r := loginVia(t, srv.URL, client, email, password)
			if r.status != want {
				t.Fatalf("login of %s from %s: %d, want %d", email, client, r.status, want)
			}
			return r
		}

		// A stranger's 5 failures: that network waits a quarter-hour, even with the password.
		for range 5 {
			login("203.0.113.7", tn.email, "wrong password", http.StatusUnauthorized)
		}
		if r := login("203.0.113.7", tn.email, tn.password, http.StatusTooManyRequests); r.header.Get("Retry-After") != "900" {
			t.Errorf("Retry-After %q, want 900", r.header.Get("Retry-After"))
		}
		// The office's network is not locked: the admin logs in.
		login("198.51.100.4", tn.email, tn.password, http.StatusSeeOther)
		// IPv6 clients count by their /64.
		for range 5 {
			login("2001:db8:1:2::1", tn.email, "wrong password", http.StatusUnauthorized)
		}
		login("2001:db8:1:2::99", tn.email, tn.password, http.StatusTooManyRequests)
		login("2001:db8:1:3::1", tn.email, tn.password, http.StatusSeeOther)
		// A quarter-hour later the stranger's network may try again.
		clock.Add(15*time.Minute + time.Second)
		login("203.0.113.7", tn.email, tn.password, http.StatusSeeOther)

		// A success clears its network's failures: 4, a success, 4 more, and the password works.
		for range 4 {
			login("192.0.2.10", tn.email, "wrong password", http.StatusUnauthorized)
		}
		login("192.0.2.10", tn.email, tn.password, http.StatusSeeOther)
		for range 4 {
			login("192.0.2.10", tn.email, "wrong password", http.StatusUnauthorized)
		}
		login("192.0.2.10", tn.email, tn.password, http.StatusSeeOther)

		// 50 failures an hour spread over ten networks: the account waits everywhere, a new
		// network included, until the hour of the first failure is over.
		second := "druga@blokada.example"
		if _, err := a.as.CreateUser(context.Background(), tn.org, second, tn.password, models.RoleAccountant); err != nil {
			t.Fatal(err)
		}
		for n := range 10 {
			for range 5 {
				login(fmt.Sprintf("198.18.%d.1", n), second, "wrong password", http.StatusUnauthorized)
			}
		}
		if r := login("198.51.100.200", second, tn.password, http.StatusTooManyRequests); r.header.Get("Retry-After") != "3600" ||
			!strings.Contains(r.body, "Too many login attempts") {
			t.Errorf("after 50 failures: Retry-After %q", r.header.Get("Retry-After"))
		}
		login("198.51.100.4", tn.email, tn.password, http.StatusSeeOther) // another account is not affected
		clock.Add(time.Hour + time.Second)
		login("198.51.100.200", second, tn.password, http.StatusSeeOther)
	})
}
