package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"lifeline/models"
	"lifeline/models/modeltest"
	"lifeline/services/engine"
)

// bankOffice is a loopback bank API (/api: its status, 503 at first), the bank's e-mailed
// statement file (/file: a statement, or fileStatus when set), and the ledger (/ledger:
// records what it was sent). It keeps the Idempotency-Key of every request by path.
type bankOffice struct {
	mu         sync.Mutex
	apiStatus  int
	fileStatus int
	keys       map[string][]string
	ledger     []map[string]any
}

func newBankOffice() *bankOffice { return &bankOffice{apiStatus: 503, keys: map[string][]string{}} }

func (b *bankOffice) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	b.mu.Lock()
	defer b.mu.Unlock()
	b.keys[r.URL.Path] = append(b.keys[r.URL.Path], r.Header.Get("Idempotency-Key"))
	w.Header().Set("Content-Type", "application/json")
	switch r.URL.Path {
	case "/api":
		w.WriteHeader(b.apiStatus)
		fmt.Fprint(w, `{"statementId": "API-1", "source": "api"}`)
	case "/file":
		if b.fileStatus != 0 {
			w.WriteHeader(b.fileStatus)
			fmt.Fprint(w, `{"error": "the mailbox is unreachable"}`)
			return
		}
		fmt.Fprint(w, `{"statementId": "FILE-7", "source": "file"}`)
	case "/ledger":
		var m map[string]any
		_ = json.Unmarshal(body, &m)
		b.ledger = append(b.ledger, m)
		fmt.Fprint(w, `{"postingId": "P-1"}`)
	}
}

func (b *bankOffice) set(api, file int) {
	b.mu.Lock()
	b.apiStatus, b.fileStatus = api, file
	b.mu.Unlock()
}

func (b *bankOffice) calls(path string) []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.keys[path])
}

func (b *bankOffice) posted() []map[string]any {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.ledger)
}

// fallbackDef: fetch (the bank's API, its breaker opening at the first failure and staying
// open) → post (the ledger, reading fetch's output), with from_file, fetch's fallback (its
// own breaker off; retried once).
func fallbackDef(url string) string {
	return fmt.Sprintf(`{"name": "Bank %d", "settings": {"retryPolicy": {"maxRetries": 0}, "circuitBreaker": {"failureThreshold": 1, "resetTimeoutMs": 600000, "halfOpenRequests": 1}},
	  "steps": [
	    {"id": "fetch", "name": "Import z API banku", "type": "http", "fallbackStepId": "from_file", "config": {"method": "POST", "url": "%[2]s/api"}},
	    {"id": "post", "type": "http", "config": {"method": "POST", "url": "%[2]s/ledger", "body": {"statementId": "{{ steps.fetch.output.statementId }}", "source": "{{ steps.fetch.output.source }}", "via": "{{ steps.fetch.fallback }}"}}},
	    {"id": "from_file", "name": "Import z pliku", "type": "http", "handler": true,
	     "retryPolicy": {"maxRetries": 1, "initialDelayMs": 1000, "jitterRatio": 0}, "circuitBreaker": {"enabled": false},
	     "config": {"method": "POST", "url": "%[2]s/file", "body": {"for": "{{ failedStep.id }}", "why": "{{ error.code }}"}}}
	  ]}`, time.Now().UnixNano(), url)
}

// stepAttempts returns the execution's attempts of a step, in order.
func (h *harness) stepAttempts(execID, stepID string) []models.StepAttempt {
	var out []models.StepAttempt
	for _, a := range h.attempts(execID) {
		if a.StepID == stepID {
			out = append(out, a)
		}
	}
	slices.SortFunc(out, func(a, b models.StepAttempt) int { return a.Attempt - b.Attempt })
	return out
}

// TestFallbackWhileBreakerOpen: while fetch's breaker is open its fallback runs instead of
// waiting: the bank's API gets no call, the fallback's output stands in for fetch's, and
// the execution succeeds; while it is closed (or half-open) fetch itself runs; a fallback
// that fails for good (after its own retry) sends the execution to the DLQ naming both steps.
func TestFallbackWhileBreakerOpen(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		h := newHarness(t, db)
		bank := newBankOffice()
		srv := httptest.NewServer(bank)
		defer srv.Close()
		wf := h.workflow(fallbackDef(srv.URL))

		// The API's first failure opens the breaker: that execution fails as usual (the
		// breaker was closed when it ran: no fallback).
		first := h.wait(h.start(wf, `{}`).ID, 20*time.Second)
		if first.Status != models.ExecDLQPending || len(h.stepAttempts(first.ID, "from_file")) != 0 {
			t.Fatalf("first execution: %s, attempts %+v", first.Status, h.attempts(first.ID))
		}
		b := h.breakerRow(wf.ID)
		if b == nil || b.State != "open" {
			t.Fatalf("breaker %+v, want open", b)
		}

		t.Run("open: the fallback runs, the API gets no call, the execution succeeds", func(t *testing.T) {
			apiCalls := len(bank.calls("/api"))
			ex := h.wait(h.start(wf, `{}`).ID, 20*time.Second)
			if ex.Status != models.ExecSucceeded {
				t.Fatalf("status %s, want SUCCEEDED: %s", ex.Status, h.describe(ex.ID))
			}
			if n := len(bank.calls("/api")); n != apiCalls {
				t.Fatalf("the bank's API got %d calls while its breaker was open", n-apiCalls)
			}
			fetch, fb := h.stepAttempts(ex.ID, "fetch"), h.stepAttempts(ex.ID, "from_file")
			if len(fetch) != 1 || fetch[0].Status != models.StepFailed || deref(fetch[0].ErrorCode) != engine.CodeFallback ||
				!strings.Contains(deref(fetch[0].ErrorMessage), `"Import z pliku"`) || fetch[0].WaitingBreakerID != nil {
				t.Fatalf("fetch's attempts %+v", fetch)
			}
			if len(fb) != 1 || fb[0].Status != models.StepSucceeded || fb[0].HandlesAttemptID == nil || *fb[0].HandlesAttemptID != fetch[0].ID ||
				fb[0].IdempotencyKey != engine.IdempotencyKey(ex.ID, "from_file", 1) {
				t.Fatalf("fallback's attempts %+v", fb)
			}
			keys := bank.calls("/file")
			if !slices.Contains(keys, engine.IdempotencyKey(ex.ID, "from_file", 1)) {
				t.Fatalf("the file service got keys %v", keys)
			}
			// post read the fallback's output as fetch's.
			posted := bank.posted()
			last := posted[len(posted)-1]
			if last["statementId"] != "FILE-7" || last["source"] != "file" || last["via"] != "from_file" {
				t.Fatalf("the ledger got %v", last)
			}
			if acts := h.auditActions(ex.ID); !slices.Contains(acts, "circuit.fallback") {
				t.Fatalf("audit %v has no circuit.fallback", acts)
			}
		})

		t.Run("open, fallback fails for good: DLQ naming both steps", func(t *testing.T) {
			bank.set(503, 503)
			defer bank.set(503, 0)
			ex := h.wait(h.start(wf, `{}`).ID, 30*time.Second)
			if ex.Status != models.ExecDLQPending {
				t.Fatalf("status %s, want DLQ_PENDING: %s", ex.Status, h.describe(ex.ID))
			}
			fb := h.stepAttempts(ex.ID, "from_file")
			if len(fb) != 2 || fb[0].Status != models.StepRetrying || fb[1].Status != models.StepDLQ ||
				fb[1].HandlesAttemptID == nil || *fb[1].HandlesAttemptID != *fb[0].HandlesAttemptID {
				t.Fatalf("the fallback's attempts (one retry, then the DLQ) %+v", fb)
			}
			dl := h.deadLetter(ex.ID)
			if dl.FailedStepID != "from_file" || !strings.Contains(dl.Reason, `"Import z pliku"`) || !strings.Contains(dl.Reason, `"Import z API banku"`) {
				t.Fatalf("dead letter at %s: %q", dl.FailedStepID, dl.Reason)
			}
			var states []engine.StepState
			if err := json.Unmarshal(dl.StepStates, &states); err != nil {
				t.Fatal(err)
			}
			byID := map[string]engine.StepState{}
			for _, s := range states {
				byID[s.StepID] = s
			}
			if byID["fetch"].Error == nil || byID["fetch"].Error.Code != engine.CodeFallback || byID["from_file"].Status != models.StepDLQ {
				t.Fatalf("step states %+v", states)
			}
			if _, ok := byID["post"]; ok {
				t.Fatalf("post never ran, yet is in the step states %+v", states)
			}

			// Skipping the failed fallback with the statement typed in goes on after fetch,
			// whose output the typed statement stands in for.
			h.replay(engine.ReplayRequest{DeadLetterID: dl.ID, Mode: engine.ReplaySkipFailed, Output: json.RawMessage(`{"statementId": "RECZNY-1", "source": "hand"}`)})
			if got := h.wait(ex.ID, 20*time.Second); got.Status != models.ExecSucceeded {
				t.Fatalf("after skipping the fallback: %s: %s", got.Status, h.describe(ex.ID))
			}
			posted := bank.posted()
			if last := posted[len(posted)-1]; last["statementId"] != "RECZNY-1" || last["via"] != "from_file" {
				t.Fatalf("the ledger got %v after the skip", last)
			}
		})

		t.Run("half-open: the step itself runs (a trial), and closes the breaker", func(t *testing.T) {
			bank.set(200, 0)
			ctx := context.Background()
			b := h.breakerRow(wf.ID)
			if err := db.Conn(ctx).Model(&models.CircuitBreaker{}).Where("id = ?", b.ID).Update("opened_at", b.OpenedAt.Add(-time.Hour)).Error; err != nil {
				t.Fatal(err)
			}
			apiCalls := len(bank.calls("/api"))
			ex := h.wait(h.start(wf, `{}`).ID, 20*time.Second)
			if ex.Status != models.ExecSucceeded || len(h.stepAttempts(ex.ID, "from_file")) != 0 || len(bank.calls("/api")) != apiCalls+1 {
				t.Fatalf("status %s, attempts %+v", ex.Status, h.attempts(ex.ID))
			}
			if got := h.breakerRow(wf.ID); got.State != "closed" {
				t.Fatalf("breaker %s after a successful trial, want closed", got.State)
			}
		})

		t.Run("closed: the step runs, the fallback does not", func(t *testing.T) {
			apiCalls, fileCalls := len(bank.calls("/api")), len(bank.calls("/file"))
			ex := h.wait(h.start(wf, `{}`).ID, 20*time.Second)
			if ex.Status != models.ExecSucceeded || len(h.stepAttempts(ex.ID, "from_file")) != 0 {
				t.Fatalf("status %s, attempts %+v", ex.Status, h.attempts(ex.ID))
			}
			if len(bank.calls("/api")) != apiCalls+1 || len(bank.calls("/file")) != fileCalls {
				t.Fatal("want one call to the API and none to the file service")
			}
			posted := bank.posted()
			if last := posted[len(posted)-1]; last["source"] != "api" || last["via"] != nil && last["via"] != "" {
				t.Fatalf("the ledger got %v", last)
			}
		})
	})
}
