package sandbox

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeSleep records requested sleeps and returns at once.
type fakeSleep struct {
	mu    sync.Mutex
	slept []time.Duration
}

func (f *fakeSleep) Sleep(ctx context.Context, d time.Duration) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.slept = append(f.slept, d)
	return ctx.Err()
}

func (f *fakeSleep) got() []time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]time.Duration(nil), f.slept...)
}

type call struct {
	method, target, body string
	header               map[string]string
}

type result struct {
	status int
	header http.Header
	body   map[string]any
	raw    string
}

func do(t *testing.T, h http.Handler, c call) result {
	t.Helper()
	return doCtx(t, context.Background(), h, c)
}

func doCtx(t *testing.T, ctx context.Context, h http.Handler, c call) result {
	t.Helper()
	if c.method == "" {
		c.method = http.MethodPost
	}
	req := httptest.NewRequestWithContext(ctx, c.method, c.target, strings.NewReader(c.body))
	for k, v := range c.header {
		req.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	res := result{status: rec.Code, header: rec.Header(), raw: rec.Body.String()}
	if ct := rec.Header().Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Errorf("%s %s: Content-Type %q, want JSON", c.method, c.target, ct)
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &res.body); err != nil {
		t.Fatalf("%s %s: body %q is not a JSON object: %v", c.method, c.target, res.raw, err)
	}
	if res.status >= 400 {
		if e, _ := res.body["error"].(string); e == "" {
			t.Errorf("%s %s: error response %d without \"error\": %s", c.method, c.target, res.status, res.raw)
		}
	}
	return res
}

func newTestHandler() (*Handler, *fakeSleep) {
	fs := &fakeSleep{}
	return New(Options{Sleep: fs.Sleep}), fs
}

func idem(exec, step string, attempt int) map[string]string {
	return map[string]string{"Idempotency-Key": fmt.Sprintf("wf:%s:step:%s:attempt:%d", exec, step, attempt)}
}

const importBody = `{"clientNip":"5261040828","account":"PL61109010140000071219812874","period":"2026-10"}`

func TestScenarios(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		query      string // appended to the path
		header     string // X-Sandbox-Scenario
		want       []int
		retryAfter string // expected on 429 responses
		slept      []time.Duration
		check      func(t *testing.T, res result)
	}{
		{name: "default", want: []int{200, 200}},
		{name: "ok", query: "?scenario=ok", want: []int{200, 200}},
		{name: "flaky", query: "?scenario=flaky", want: []int{503, 503, 200, 200}},
		{name: "flaky via header", header: "flaky", want: []int{503, 503, 200}},
		{name: "query wins over header", query: "?scenario=ok", header: "down", want: []int{200}},
		{name: "case and spaces", query: "?scenario=%20FLAKY%20", want: []int{503, 503, 200}},
		{name: "fail503:1", query: "?scenario=fail503:1", want: []int{503, 200}},
		{name: "fail503:0", query: "?scenario=fail503:0", want: []int{200}},
		{name: "fail503:4", query: "?scenario=fail503:4", want: []int{503, 503, 503, 503, 200}},
		{name: "down", query: "?scenario=down", want: []int{503, 503, 503, 503, 503, 503}},
		{name: "rate_limited", query: "?scenario=rate_limited", want: []int{429, 200, 200}, retryAfter: "2"},
		{name: "429:2:5", query: "?scenario=429:2:5", want: []int{429, 429, 200}, retryAfter: "5"},
		{name: "slow", query: "?scenario=slow", want: []int{200, 200, 200}, slept: []time.Duration{30 * time.Second}},
		{name: "slow:2:1500", query: "?scenario=slow:2:1500", want: []int{200, 200, 200},
			slept: []time.Duration{1500 * time.Millisecond, 1500 * time.Millisecond}},
		{name: "invalid", query: "?scenario=invalid", want: []int{400, 400}, check: func(t *testing.T, res result) {
			want := map[string]any{"error": "validation", "fields": map[string]any{"clientNip": "NIP must have 10 digits"}}
			if !reflect.DeepEqual(res.body, want) {
				t.Errorf("body = %s, want %v", res.raw, want)
			}
		}},
		{name: "notfound", query: "?scenario=notfound", want: []int{404, 404}},
		{name: "unauthorized", query: "?scenario=unauthorized", want: []int{401, 401}, check: func(t *testing.T, res result) {
			if res.header.Get("WWW-Authenticate") == "" {
				t.Error("401 without WWW-Authenticate")
			}
		}},
		{name: "server_error", query: "?scenario=server_error", want: []int{500, 500, 500}},
		{name: "unknown", query: "?scenario=explode", want: []int{400}, check: func(t *testing.T, res result) {
			if res.body["error"] != "unknown scenario" {
				t.Errorf("body = %s", res.raw)
			}
		}},
		{name: "bad count", query: "?scenario=fail503:x", want: []int{400}},
		{name: "negative count", query: "?scenario=429:-1:2", want: []int{400}},
		{name: "slow too long", query: "?scenario=slow:1:999999999", want: []int{400}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h, fs := newTestHandler()
			for i, want := range tt.want {
				hdr := idem("exec-1", "import_statement", i+1)
				if tt.header != "" {
					hdr[HeaderScenario] = tt.header
				}
				res := do(t, h, call{target: "/bank/statements/import" + tt.query, body: importBody, header: hdr})
				if res.status != want {
					t.Fatalf("call %d: status %d, want %d (body %s)", i+1, res.status, want, res.raw)
				}
				if res.status == http.StatusTooManyRequests && res.header.Get("Retry-After") != tt.retryAfter {
					t.Errorf("call %d: Retry-After %q, want %q", i+1, res.header.Get("Retry-After"), tt.retryAfter)
				}
				if res.status == http.StatusOK && res.body["statementId"] == nil {
					t.Errorf("call %d: success without statementId: %s", i+1, res.raw)
				}
				if res.header.Get(HeaderReplayed) != "" {
					t.Errorf("call %d: unexpected replay", i+1)
				}
				if tt.check != nil && res.status != http.StatusOK {
					tt.check(t, res)
				}
			}
			if got := fs.got(); !reflect.DeepEqual(got, tt.slept) && (len(got) > 0 || len(tt.slept) > 0) {
				t.Errorf("slept %v, want %v", got, tt.slept)
			}
		})
	}
}

func TestEndpoints(t *testing.T) {
	t.Parallel()
	tests := []struct {
		method, path, body string
		want               map[string]any // exact values; nil value = key present
	}{
		{http.MethodGet, "/health", "", map[string]any{"ok": true}},
		{http.MethodPost, "/bank/statements/import", importBody,
			map[string]any{"statementId": nil, "transactions": nil, "totalCredits": nil, "totalDebits": nil, "currency": "PLN"}},
		{http.MethodPost, "/invoices/match", `{"statementId":"WB-202610-ABCDEF","transactions":100}`,
			map[string]any{"matched": nil, "unmatched": nil, "matchRate": nil}},
		{http.MethodPost, "/ledger/postings", `{"statementId":"WB-202610-ABCDEF","matched":90}`,
			map[string]any{"postingId": nil, "entries": 180.0}},
		{http.MethodPost, "/vat/jpk-v7/validate", `{"clientNip":"526-104-08-28","period":"2026-10","salesTotal":100000,"purchaseTotal":"40 000,00"}`,
			map[string]any{"valid": true, "vatDue": 13800.0}},
		{http.MethodPost, "/vat/jpk-v7/submit", `{"clientNip":"5261040828","period":"2026-10","vatDue":13800}`,
			map[string]any{"referenceNumber": nil, "status": "accepted", "upo": nil}},
		{http.MethodPost, "/payroll/export", `{"clientNip":"5261040828","period":"2026-10","employees":12}`,
			map[string]any{"fileId": nil, "rows": 12.0}},
		{http.MethodPost, "/payroll/export", `{"clientNip":"5261040828","period":"2026-10","employees":[{"name":"Anna"},{"name":"Jan"}]}`,
			map[string]any{"fileId": nil, "rows": 2.0}},
		{http.MethodPost, "/mail/send", `{"to":"biuro@kowalski.pl","subject":"JPK_V7"}`,
			map[string]any{"messageId": nil}},
		{http.MethodPost, "/undo/ledger/postings/PK-1234", `{"postingId":"PK-1234"}`, map[string]any{"undone": true}},
		{http.MethodPost, "/undo/x", "", map[string]any{"undone": true}},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			t.Parallel()
			first := do(t, New(Options{}), call{method: tt.method, target: tt.path, body: tt.body})
			again := do(t, New(Options{}), call{method: tt.method, target: tt.path, body: tt.body})
			if first.status != http.StatusOK {
				t.Fatalf("status %d: %s", first.status, first.raw)
			}
			if first.raw != again.raw {
				t.Errorf("not deterministic:\n%s\n%s", first.raw, again.raw)
			}
			if len(first.body) != len(tt.want) {
				t.Errorf("keys of %s, want %v", first.raw, tt.want)
			}
			for k, v := range tt.want {
				got, ok := first.body[k]
				if !ok {
					t.Errorf("missing %q in %s", k, first.raw)
				} else if v != nil && got != v {
					t.Errorf("%s = %v, want %v", k, got, v)
				}
			}
		})
	}
}

func TestImportAndMatchArePlausible(t *testing.T) {
	t.Parallel()
	h := New(Options{})
	imp := do(t, h, call{target: "/bank/statements/import", body: importBody})
	n := imp.body["transactions"].(float64)
	credits, debits := imp.body["totalCredits"].(float64), imp.body["totalDebits"].(float64)
	if n < 1 || credits <= 0 || debits <= 0 || debits > credits {
		t.Errorf("implausible import: %s", imp.raw)
	}
	if id := imp.body["statementId"].(string); !strings.HasPrefix(id, "WB-202610-") {
		t.Errorf("statementId = %q", id)
	}
	other := do(t, h, call{target: "/bank/statements/import", body: `{"clientNip":"7740001454","period":"2026-10"}`})
	if other.body["statementId"] == imp.body["statementId"] {
		t.Error("different clients got the same statement")
	}

	m := do(t, h, call{target: "/invoices/match", body: fmt.Sprintf(`{"statementId":%q,"transactions":%v}`, imp.body["statementId"], n)})
	matched, unmatched, rate := m.body["matched"].(float64), m.body["unmatched"].(float64), m.body["matchRate"].(float64)
	if matched+unmatched != n || rate <= 0 || rate > 1 {
		t.Errorf("implausible match for %v transactions: %s", n, m.raw)
	}
}

func TestCountersPerLogicalOperation(t *testing.T) {
	t.Parallel()
	h, _ := newTestHandler()
	target := "/bank/statements/import?scenario=flaky"
	status := func(hdr map[string]string, body string) int {
		return do(t, h, call{target: target, body: body, header: hdr}).status
	}

	// Attempts of one step share a counter.
	if got := status(idem("e1", "a", 1), importBody); got != 503 {
		t.Fatalf("e1/a attempt 1: %d", got)
	}
	// Another step and another execution have their own counters.
	if got := status(idem("e1", "b", 1), importBody); got != 503 {
		t.Errorf("e1/b attempt 1: %d, want 503", got)
	}
	if got := status(idem("e2", "a", 1), importBody); got != 503 {
		t.Errorf("e2/a attempt 1: %d, want 503", got)
	}
	if got := status(idem("e1", "a", 2), importBody); got != 503 {
		t.Errorf("e1/a attempt 2: %d, want 503", got)
	}
	if got := status(idem("e1", "a", 3), importBody); got != 200 {
		t.Errorf("e1/a attempt 3: %d, want 200", got)
	}
	// The same key on another path is another operation.
	other := do(t, h, call{target: "/payroll/export?scenario=flaky", body: `{}`, header: idem("e1", "a", 4)})
	if other.status != 503 {
		t.Errorf("same key on another path: %d, want 503", other.status)
	}
	// A key without an attempt suffix is counted whole.
	plain := map[string]string{"Idempotency-Key": "custom-key"}
	if got := status(plain, importBody); got != 503 {
		t.Errorf("custom key call 1: %d", got)
	}

	// Without the header: same body (any key order) is one operation,
	// another body is another.
	reordered := `{"period":"2026-10","account":"PL61109010140000071219812874","clientNip":"5261040828"}`
	for i, want := range []int{503, 503, 200} {
		body := importBody
		if i == 1 {
			body = reordered
		}
		if got := status(nil, body); got != want {
			t.Errorf("no header call %d: %d, want %d", i+1, got, want)
		}
	}
	if got := status(nil, `{"clientNip":"7740001454"}`); got != 503 {
		t.Errorf("no header, other body: %d, want 503", got)
	}
	// Without the header the scenario is part of the key.
	if got := do(t, h, call{target: "/bank/statements/import?scenario=fail503:1", body: importBody}).status; got != 503 {
		t.Errorf("no header, other scenario: %d, want 503", got)
	}
}

func TestIdempotentReplay(t *testing.T) {
	t.Parallel()
	h, fs := newTestHandler()
	target := "/bank/statements/import?scenario=fail503:1"

	if r := do(t, h, call{target: target, body: importBody, header: idem("e", "s", 1)}); r.status != 503 {
		t.Fatalf("attempt 1: %d", r.status)
	}
	first := do(t, h, call{target: target, body: importBody, header: idem("e", "s", 2)})
	if first.status != 200 || first.header.Get(HeaderReplayed) != "" {
		t.Fatalf("attempt 2: %d replayed=%q", first.status, first.header.Get(HeaderReplayed))
	}
	// Same full key: replayed, even with another body or scenario.
	for _, c := range []call{
		{target: target, body: importBody, header: idem("e", "s", 2)},
		{target: "/bank/statements/import?scenario=down", body: `{"clientNip":"7740001454"}`, header: idem("e", "s", 2)},
		{target: "/bank/statements/import?scenario=slow", body: `not json`, header: idem("e", "s", 2)},
	} {
		r := do(t, h, c)
		if r.status != 200 || r.raw != first.raw || r.header.Get(HeaderReplayed) != "true" {
			t.Errorf("%s: status %d replayed=%q body %s, want replay of %s", c.target, r.status, r.header.Get(HeaderReplayed), r.raw, first.raw)
		}
	}
	if len(fs.got()) != 0 {
		t.Errorf("a replay slept: %v", fs.got())
	}

	// Errors are not stored: the same full key is re-run and counted until
	// it succeeds, and only then replayed.
	target3 := "/bank/statements/import?scenario=fail503:3"
	for i, want := range []int{503, 503, 503, 200} {
		r := do(t, h, call{target: target3, body: importBody, header: idem("e3", "s", 1)})
		if r.status != want {
			t.Fatalf("same key, call %d: %d, want %d", i+1, r.status, want)
		}
		if r.header.Get(HeaderReplayed) != "" {
			t.Fatalf("same key, call %d: error replayed", i+1)
		}
	}
	if r := do(t, h, call{target: target3, body: importBody, header: idem("e3", "s", 1)}); r.header.Get(HeaderReplayed) != "true" {
		t.Error("success after errors was not stored for replay")
	}
	// A new attempt number of the same operation runs again (no replay).
	if r := do(t, h, call{target: target3, body: importBody, header: idem("e3", "s", 2)}); r.status != 200 || r.header.Get(HeaderReplayed) != "" {
		t.Errorf("fresh attempt: %d replayed=%q", r.status, r.header.Get(HeaderReplayed))
	}
}

func TestReplayDoesNotCount(t *testing.T) {
	t.Parallel()
	h, _ := newTestHandler()
	ok := "/payroll/export"
	body := `{"clientNip":"5261040828","period":"2026-10","employees":3}`
	do(t, h, call{target: ok, body: body, header: idem("e", "s", 1)})
	for range 5 {
		do(t, h, call{target: ok, body: body, header: idem("e", "s", 1)})
	}
	h.mu.Lock()
	n, _ := h.calls.get("POST /payroll/export wf:e:step:s", time.Now())
	h.mu.Unlock()
	if n != 1 {
		t.Errorf("counter = %d after one call and five replays, want 1", n)
	}
}

func TestMounting(t *testing.T) {
	t.Parallel()
	h := New(Options{})
	mux := http.NewServeMux()
	mux.Handle("/sandbox/", http.StripPrefix("/sandbox", h))
	for _, tc := range []struct {
		name   string
		h      http.Handler
		target string
	}{
		{"strip prefix", mux, "/sandbox/health"},
		{"direct", h, "/health"},
		{"direct with prefix", h, "/sandbox/health"},
	} {
		r := do(t, tc.h, call{method: http.MethodGet, target: tc.target})
		if r.status != 200 || r.body["ok"] != true {
			t.Errorf("%s %s: %d %s", tc.name, tc.target, r.status, r.raw)
		}
	}
	r := do(t, mux, call{target: "/sandbox/mail/send?scenario=fail503:1", body: `{"to":"a@b.pl","subject":"x"}`})
	if r.status != 503 {
		t.Errorf("scenario through StripPrefix: %d", r.status)
	}
}

func TestErrors(t *testing.T) {
	t.Parallel()
	big := `{"x":"` + strings.Repeat("a", maxBodyBytes) + `"}`
	tests := []struct {
		name string
		c    call
		want int
		err  string
	}{
		{"bad JSON", call{target: "/invoices/match", body: `{"statementId":`}, 400, "invalid JSON"},
		{"JSON array", call{target: "/invoices/match", body: `[1,2]`}, 400, "invalid JSON"},
		{"JSON null", call{target: "/invoices/match", body: `null`}, 400, "invalid JSON"},
		{"trailing data", call{target: "/invoices/match", body: `{} {}`}, 400, "invalid JSON"},
		{"bad JSON with failing scenario", call{target: "/invoices/match?scenario=down", body: `nope`}, 400, "invalid JSON"},
		{"unknown path", call{target: "/bank/nothing", body: `{}`}, 404, "not found"},
		{"root", call{method: http.MethodGet, target: "/"}, 404, "not found"},
		{"bare undo", call{target: "/undo/", body: `{}`}, 404, "not found"},
		{"wrong method", call{method: http.MethodGet, target: "/mail/send"}, 405, "method not allowed"},
		{"post health", call{target: "/health"}, 405, "method not allowed"},
		{"too large", call{target: "/mail/send", body: big}, 413, "request body too large"},
		{"short NIP", call{target: "/vat/jpk-v7/validate", body: `{"clientNip":"12345"}`}, 400, "validation"},
		{"NIP with letters", call{target: "/payroll/export", body: `{"clientNip":"PL52610408"}`}, 400, "validation"},
		{"bad recipient", call{target: "/mail/send", body: `{"to":"nobody"}`}, 400, "validation"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := do(t, New(Options{}), tt.c)
			if r.status != tt.want || r.body["error"] != tt.err {
				t.Errorf("got %d %s, want %d %q", r.status, r.raw, tt.want, tt.err)
			}
		})
	}
	// A numeric NIP is accepted.
	if r := do(t, New(Options{}), call{target: "/payroll/export", body: `{"clientNip":5261040828}`}); r.status != 200 {
		t.Errorf("numeric NIP: %d %s", r.status, r.raw)
	}
}

// TestSlowHonoursCancellation uses the real timer-based Sleep.
func TestSlowHonoursCancellation(t *testing.T) {
	t.Parallel()
	h := New(Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	r := doCtx(t, ctx, h, call{target: "/ledger/postings?scenario=slow", body: `{"matched":3}`, header: idem("e", "post", 1)})
	if elapsed := time.Since(start); elapsed > 5*time.Second {
		t.Fatalf("slow call ignored cancellation: took %v", elapsed)
	}
	if r.status != http.StatusServiceUnavailable {
		t.Errorf("cancelled slow call: %d %s", r.status, r.raw)
	}
	// The first call was counted, so the retry is fast and succeeds.
	start = time.Now()
	r = do(t, h, call{target: "/ledger/postings?scenario=slow", body: `{"matched":3}`, header: idem("e", "post", 2)})
	if r.status != 200 || time.Since(start) > 5*time.Second {
		t.Errorf("second call: %d after %v", r.status, time.Since(start))
	}
}

func TestSlowRealTimer(t *testing.T) {
	t.Parallel()
	h := New(Options{})
	start := time.Now()
	r := do(t, h, call{target: "/ledger/postings?scenario=slow:1:30", body: `{"matched":3}`})
	if r.status != 200 || time.Since(start) < 30*time.Millisecond {
		t.Errorf("slow:1:30: %d after %v", r.status, time.Since(start))
	}
}

func TestStateIsBounded(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 10, 1, 9, 0, 0, 0, time.UTC)
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }

	h := New(Options{Now: clock, Sleep: (&fakeSleep{}).Sleep})
	h.calls.max, h.answers.max = 3, 3
	target := "/mail/send?scenario=fail503:1"
	body := `{"to":"a@b.pl"}`

	// Four operations: the first is evicted by size.
	for i := 1; i <= 4; i++ {
		if r := do(t, h, call{target: target, body: body, header: idem(fmt.Sprint(i), "m", 1)}); r.status != 503 {
			t.Fatalf("op %d: %d", i, r.status)
		}
	}
	if h.calls.len() != 3 {
		t.Errorf("calls kept: %d, want 3", h.calls.len())
	}
	if r := do(t, h, call{target: target, body: body, header: idem("1", "m", 2)}); r.status != 503 {
		t.Errorf("evicted op was not forgotten: %d", r.status)
	}

	// Entries expire an hour after their last write.
	if r := do(t, h, call{target: target, body: body, header: idem("4", "m", 2)}); r.status != 200 {
		t.Fatalf("op 4 attempt 2: %d", r.status)
	}
	advance(59 * time.Minute)
	if r := do(t, h, call{target: target, body: body, header: idem("4", "m", 2)}); r.header.Get(HeaderReplayed) != "true" {
		t.Error("answer forgotten before an hour")
	}
	advance(2 * time.Minute)
	if r := do(t, h, call{target: target, body: body, header: idem("4", "m", 2)}); r.status != 503 {
		t.Errorf("after an hour: %d, want 503 (forgotten answer and counter)", r.status)
	}
	if h.answers.len() > 3 || h.calls.len() > 3 {
		t.Errorf("store sizes %d/%d over bound", h.answers.len(), h.calls.len())
	}
}

func TestConcurrentUse(t *testing.T) {
	t.Parallel()
	h, _ := newTestHandler()
	var wg sync.WaitGroup
	statuses := make(chan int, 200)
	for i := range 200 {
		wg.Go(func() {
			hdr := idem("c", "s", i)
			req := httptest.NewRequest(http.MethodPost, "/invoices/match?scenario=fail503:50", strings.NewReader(`{"transactions":10}`))
			for k, v := range hdr {
				req.Header.Set(k, v)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			statuses <- rec.Code
		})
	}
	wg.Wait()
	close(statuses)
	counts := map[int]int{}
	for s := range statuses {
		counts[s]++
	}
	if counts[503] != 50 || counts[200] != 150 {
		t.Errorf("statuses %v, want 50×503 and 150×200", counts)
	}
}

func TestStripAttempt(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"wf:abc:step:import:attempt:3":  "wf:abc:step:import",
		"wf:abc:step:import:attempt:12": "wf:abc:step:import",
		"wf:abc:step:import:attempt:":   "wf:abc:step:import:attempt:",
		"wf:abc:step:import:attempt:x":  "wf:abc:step:import:attempt:x",
		"plain":                         "plain",
	} {
		if got := stripAttempt(in); got != want {
			t.Errorf("stripAttempt(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestOutageByTheClock(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 10, 1, 9, 0, 0, 0, time.UTC) // a multiple of 180 s since the epoch
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	set := func(d time.Duration) {
		mu.Lock()
		now = time.Date(2026, 10, 1, 9, 0, 0, 0, time.UTC).Add(d)
		mu.Unlock()
	}
	h := New(Options{Now: clock, Sleep: (&fakeSleep{}).Sleep})
	for _, c := range []struct {
		scenario string
		at       time.Duration
		want     int
	}{
		{"outage", 0, 503}, {"outage", 59 * time.Second, 503}, {"outage", 60 * time.Second, 200}, {"outage", 179 * time.Second, 200},
		{"outage", 180 * time.Second, 503}, {"outage:10:3", 2 * time.Second, 503}, {"outage:10:3", 3 * time.Second, 200},
		{"outage:10:0", 0, 200},
	} {
		set(c.at)
		if r := do(t, h, call{target: "/bank/statements/import?scenario=" + c.scenario, body: importBody}); r.status != c.want {
			t.Errorf("%s at +%v: %d, want %d", c.scenario, c.at, r.status, c.want)
		}
	}
	for _, bad := range []string{"outage:0:0", "outage:10:11", "outage:x:1"} {
		if r := do(t, h, call{target: "/bank/statements/import?scenario=" + bad, body: importBody}); r.status != 400 {
			t.Errorf("%s: %d, want 400", bad, r.status)
		}
	}
}

func TestHooksRecordWhatTheyReceive(t *testing.T) {
	h := New(Options{})
	post := func(path, body string) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, path, strings.NewReader(body)))
		return rec
	}
	if rec := post("/sandbox/hooks/slack/T1/B1/x", `{"text": "DLQ"}`); rec.Code != 200 || rec.Body.String() != "ok" {
		t.Errorf("slack: %d %q", rec.Code, rec.Body.String())
	}
	if rec := post("/sandbox/hooks/teams/wf", `{"type": "message"}`); rec.Code != http.StatusAccepted {
		t.Errorf("teams: %d", rec.Code)
	}
	if rec := post("/sandbox/hooks/slack/x", `not json`); rec.Code != 400 {
		t.Errorf("bad body: %d", rec.Code)
	}
	if rec := post("/sandbox/hooks/discord/x", `{}`); rec.Code != 404 {
		t.Errorf("unknown hook: %d", rec.Code)
	}
	got := h.Hooks().Received()
	if len(got) != 2 || got[0].Channel != "teams" || got[1].Channel != "slack" || string(got[1].Body) != `{"text": "DLQ"}` {
		t.Errorf("received %+v", got)
	}
}
