// Package sandbox serves fake external services (bank, invoice matching,
// ledger, VAT/JPK_V7, payroll, mail) with failures a request scripts (a
// scenario, for tests) or, with Options.Office, the failures an office meets
// (office.go: wrong data, outages and breaks by the clock, a late invoice, a
// used-up quota), so the demo shows retries and dead-letter items without any
// real integration.
//
// Contract:
//
//   - Routes: POST /bank/statements/import, POST /bank/statements/from-file (the
//     statement from the file the bank e-mailed; the office's bank outage does not reach
//     it), POST /invoices/match,
//     POST /ledger/postings, POST /vat/jpk-v7/validate, POST /vat/jpk-v7/submit,
//     POST /payroll/export, POST /mail/send, GET /health, POST /undo/{anything},
//     POST /tasks; and the Slack and Teams webhook stand-ins (see [Hooks]):
//     POST /hooks/slack/{anything}, POST /hooks/teams/{anything}.
//     The [Handler] works mounted with http.StripPrefix("/sandbox", h) and
//     directly; a leading "/sandbox" left in the path is ignored.
//   - Success bodies are JSON derived only from the path and the request body,
//     so the same request always gets the same answer.
//   - Every error response is JSON with an "error" key: 404 unknown path,
//     405 wrong method, 413 body over 1 MiB, 400 {"error":"invalid JSON"},
//     400 {"error":"unknown scenario"}, 400 {"error":"validation","fields":…}
//     for a clientNip that is not 10 digits, and the scripted failures below.
//   - The scenario comes from the query parameter "scenario", else the header
//     X-Sandbox-Scenario, else "ok": ok; flaky (= fail503:2); fail503:N
//     (503 for the first N calls); down (always 503); rate_limited
//     (= 429:1:2); 429:N:S (429 with Retry-After: S for the first N calls);
//     slow (= slow:1:30000); slow:N:MS (the first N calls wait MS ms, honouring
//     the request context, then succeed); invalid (always 400 validation);
//     notfound (404); unauthorized (401); server_error (500). Names are
//     case-insensitive; an unknown one gets 400 {"error":"unknown scenario"}.
//   - Calls are counted per logical operation: the Idempotency-Key minus its
//     ":attempt:{n}" suffix, or, without the header, method, path, scenario and
//     a hash of the body. A request whose full Idempotency-Key was already
//     answered with a 2xx gets that answer again with the header
//     "Idempotent-Replayed: true", without being counted or re-run. Both
//     counters and stored answers are scoped to method and path.
//   - State is in memory and bounded: an entry not written for an hour is
//     forgotten, and at most 10 000 entries per table are kept (oldest first
//     out). Two concurrent requests with the same new key may both run.
package sandbox

import (
	"bytes"
	"container/list"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

const (
	defaultMaxEntries = 10_000
	defaultTTL        = time.Hour
	maxBodyBytes      = 1 << 20

	// HeaderScenario selects a scenario when the query has none.
	HeaderScenario = "X-Sandbox-Scenario"
	// HeaderReplayed is set to "true" on a replayed idempotent answer.
	HeaderReplayed = "Idempotent-Replayed"
)

// Options configures a Handler. Zero values get defaults.
type Options struct {
	// Now is the clock used to expire remembered state. Default time.Now.
	Now func() time.Time
	// Sleep waits d or until ctx is done, returning ctx.Err() in that case.
	// Default: a timer that honours ctx.
	Sleep func(ctx context.Context, d time.Duration) error
	// Office turns on the office's weather (office.go): failures that come from the data and
	// the clock, each with its true cause, for requests that name no scenario. The demo runs
	// with it; tests that script failures run without.
	Office bool
}

// Handler serves the fake services. It is safe for concurrent use.
type Handler struct {
	now   func() time.Time
	sleep func(ctx context.Context, d time.Duration) error

	mu      sync.Mutex
	calls   *store[int]   // logical operation → calls so far
	answers *store[reply] // scope + full Idempotency-Key → 2xx answer
	hooks   *Hooks

	// The office's weather (nil seen: off): its cycles count from started; seen remembers
	// when a late invoice or a used-up quota was first met; zone is the office's clock.
	office  bool
	started time.Time
	seen    *store[time.Time]
	zone    *time.Location
}

type reply struct {
	status int
	body   []byte
}

// Hooks returns the Slack and Teams webhook stand-ins (POST /hooks/slack/…, /hooks/teams/…).
func (h *Handler) Hooks() *Hooks { return h.hooks }

// New returns a Handler with empty state.
func New(opts Options) *Handler {
	h := &Handler{
		now:     opts.Now,
		sleep:   opts.Sleep,
		calls:   newStore[int](defaultMaxEntries, defaultTTL),
		answers: newStore[reply](defaultMaxEntries, defaultTTL),
	}
	h.hooks = &Hooks{now: func() time.Time { return h.now() }}
	if h.now == nil {
		h.now = time.Now
	}
	if h.sleep == nil {
		h.sleep = sleepCtx
	}
	if opts.Office {
		h.office, h.started, h.zone = true, h.now(), loadZone(officeTimeZone)
		h.seen = newStore[time.Time](defaultMaxEntries, defaultTTL)
	}
	return h
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// ServeHTTP routes, applies the scenario and answers.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	path := routePath(r.URL.Path)
	if h.hooks.serve(w, r, path) {
		return
	}
	ep, ok := lookup(path)
	if !ok {
		writeError(w, http.StatusNotFound, "not found", map[string]any{"path": path})
		return
	}
	if r.Method != ep.method {
		w.Header().Set("Allow", ep.method)
		writeError(w, http.StatusMethodNotAllowed, "method not allowed", map[string]any{"allow": ep.method})
		return
	}
	scName := scenarioName(r)
	sc, err := parseScenario(scName)
	if err != nil {
		writeError(w, http.StatusBadRequest, "unknown scenario", map[string]any{"scenario": scName, "detail": err.Error(), "known": knownScenarios()})
		return
	}

	raw, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBodyBytes))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			writeError(w, http.StatusRequestEntityTooLarge, "request body too large", nil)
			return
		}
		writeError(w, http.StatusBadRequest, "could not read request body", nil)
		return
	}

	scope := r.Method + " " + path
	idemKey := strings.TrimSpace(r.Header.Get("Idempotency-Key"))
	if idemKey != "" {
		if rep, ok := h.answer(scope + " " + idemKey); ok {
			w.Header().Set(HeaderReplayed, "true")
			writeRaw(w, rep.status, rep.body)
			return
		}
	}

	var req map[string]any
	canonical := []byte("{}")
	if ep.method == http.MethodPost {
		if req, err = decodeObject(raw); err != nil {
			writeError(w, http.StatusBadRequest, "invalid JSON", nil)
			return
		}
		canonical, _ = json.Marshal(req) // sorted keys; cannot fail for decoded JSON
	}

	n := h.count(counterKey(scope, idemKey, sc.name, canonical))
	if h.fail(w, r, sc, n) {
		return
	}
	if h.office && scName == "" && h.weather(w, r.Header, path, req, n) {
		return
	}

	status, resp := ep.serve(req, newGen(path, canonical))
	body, err := json.Marshal(resp)
	if err != nil {
		writeError(w, http.StatusInternalServerError, "internal sandbox error", nil)
		return
	}
	if idemKey != "" && status >= 200 && status < 300 {
		h.remember(scope+" "+idemKey, reply{status: status, body: body})
	}
	writeRaw(w, status, body)
}

// fail writes the scripted failure for call n, or sleeps for a slow call.
// It reports whether the response has been written.
func (h *Handler) fail(w http.ResponseWriter, r *http.Request, sc scenario, n int) bool {
	detail := map[string]any{"scenario": sc.name, "call": n}
	switch sc.kind {
	case kindOK:
		return false
	case kindFail503:
		if n <= sc.n {
			writeError(w, http.StatusServiceUnavailable, "service unavailable", detail)
			return true
		}
	case kindDown:
		writeError(w, http.StatusServiceUnavailable, "service unavailable", detail)
		return true
	case kindRateLimited:
		if n <= sc.n {
			w.Header().Set("Retry-After", strconv.Itoa(sc.retryAfter))
			detail["retryAfterSeconds"] = sc.retryAfter
			writeError(w, http.StatusTooManyRequests, "rate limited", detail)
			return true
		}
	case kindSlow:
		if n <= sc.n {
			if err := h.sleep(r.Context(), sc.delay); err != nil {
				// The caller has most likely gone; answer anyway for the record.
				detail["detail"] = err.Error()
				writeError(w, http.StatusServiceUnavailable, "request cancelled while slow", detail)
				return true
			}
		}
	case kindInvalid:
		writeError(w, http.StatusBadRequest, "validation", map[string]any{
			"fields": map[string]string{"clientNip": "NIP must have 10 digits"},
		})
		return true
	case kindNotFound:
		writeError(w, http.StatusNotFound, "not found", detail)
		return true
	case kindUnauthorized:
		w.Header().Set("WWW-Authenticate", `Bearer realm="sandbox"`)
		writeError(w, http.StatusUnauthorized, "unauthorized", detail)
		return true
	case kindServerError:
		writeError(w, http.StatusInternalServerError, "internal server error", detail)
		return true
	case kindOutage:
		if since := time.Duration(h.now().UnixNano()) % sc.period; since < sc.down {
			detail["backInSeconds"] = int((sc.down - since).Seconds()) + 1
			writeError(w, http.StatusServiceUnavailable, "service unavailable (outage)", detail)
			return true
		}
	}
	return false
}

func (h *Handler) count(key string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	now := h.now()
	n, _ := h.calls.get(key, now)
	n++
	h.calls.put(key, n, now)
	return n
}

func (h *Handler) answer(key string) (reply, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.answers.get(key, h.now())
}

func (h *Handler) remember(key string, rep reply) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.answers.put(key, rep, h.now())
}

// routePath strips a leading "/sandbox" so that the handler also works when
// mounted at the root without StripPrefix.
func routePath(p string) string {
	if p == "/sandbox" || strings.HasPrefix(p, "/sandbox/") {
		p = strings.TrimPrefix(p, "/sandbox")
	}
	if p == "" {
		p = "/"
	}
	return p
}

func scenarioName(r *http.Request) string {
	if s := r.URL.Query().Get("scenario"); s != "" {
		return s
	}
	return r.Header.Get(HeaderScenario)
}

// counterKey names the logical operation a call belongs to.
func counterKey(scope, idemKey, scenario string, canonicalBody []byte) string {
	if idemKey != "" {
		return scope + " " + stripAttempt(idemKey)
	}
	sum := sha256.Sum256(canonicalBody)
	return scope + " " + scenario + " " + hex.EncodeToString(sum[:])
}

// stripAttempt removes a trailing ":attempt:{digits}"; other keys are kept whole.
func stripAttempt(key string) string {
	i := strings.LastIndex(key, ":attempt:")
	if i < 0 {
		return key
	}
	digits := key[i+len(":attempt:"):]
	if digits == "" {
		return key
	}
	for _, c := range digits {
		if c < '0' || c > '9' {
			return key
		}
	}
	return key[:i]
}

// decodeObject parses a JSON object; an empty body counts as {}.
func decodeObject(raw []byte) (map[string]any, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return map[string]any{}, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		return nil, err
	}
	if m == nil {
		return nil, errors.New("body is not a JSON object")
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("trailing data after JSON object")
	}
	return m, nil
}

func writeError(w http.ResponseWriter, status int, msg string, extra map[string]any) {
	body := map[string]any{"error": msg}
	for k, v := range extra {
		body[k] = v
	}
	b, err := json.Marshal(body)
	if err != nil {
		b = []byte(fmt.Sprintf(`{"error":%q}`, msg))
	}
	writeRaw(w, status, b)
}

func writeRaw(w http.ResponseWriter, status int, body []byte) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// store is a map whose entries expire ttl after their last write and which
// keeps at most max entries, dropping the least recently written first.
// It is not safe for concurrent use; Handler guards it with its mutex.
type store[V any] struct {
	max   int
	ttl   time.Duration
	items map[string]*list.Element
	order *list.List // of *entry[V], front = least recently written
}

type entry[V any] struct {
	key string
	val V
	at  time.Time
}

func newStore[V any](max int, ttl time.Duration) *store[V] {
	return &store[V]{max: max, ttl: ttl, items: map[string]*list.Element{}, order: list.New()}
}

func (s *store[V]) get(key string, now time.Time) (V, bool) {
	s.expire(now)
	el, ok := s.items[key]
	if !ok {
		var zero V
		return zero, false
	}
	return el.Value.(*entry[V]).val, true
}

func (s *store[V]) put(key string, v V, now time.Time) {
	if el, ok := s.items[key]; ok {
		e := el.Value.(*entry[V])
		e.val, e.at = v, now
		s.order.MoveToBack(el)
	} else {
		s.items[key] = s.order.PushBack(&entry[V]{key: key, val: v, at: now})
	}
	s.expire(now)
	for s.order.Len() > s.max {
		s.remove(s.order.Front())
	}
}

func (s *store[V]) len() int { return s.order.Len() }

func (s *store[V]) expire(now time.Time) {
	for el := s.order.Front(); el != nil; el = s.order.Front() {
		if now.Sub(el.Value.(*entry[V]).at) < s.ttl {
			return
		}
		s.remove(el)
	}
}

func (s *store[V]) remove(el *list.Element) {
	delete(s.items, el.Value.(*entry[V]).key)
	s.order.Remove(el)
}
