package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"lifeline/models"
	"lifeline/models/apperr"
	"lifeline/models/modeltest"
	"lifeline/services/audit"
	"lifeline/services/breaker"
	"lifeline/services/engine"
)

// flipService answers with status (503 at first) and counts the requests.
type flipService struct {
	mu     sync.Mutex
	status int
	keys   []string
}

func (f *flipService) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.keys = append(f.keys, r.Header.Get("Idempotency-Key"))
	st := f.status
	f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(st)
	fmt.Fprintf(w, `{"status": %d}`, st)
}

func (f *flipService) set(status int) { f.mu.Lock(); f.status = status; f.mu.Unlock() }

func (f *flipService) calls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.keys...)
}

func breakerDef(url string) string {
	return fmt.Sprintf(`{"name": "Bank %d", "settings": {"retryPolicy": {"maxRetries": 0}, "circuitBreaker": {"resetTimeoutMs": 10000, "halfOpenRequests": 1}},
	  "steps": [{"id": "fetch", "type": "http", "config": {"method": "GET", "url": %q}}]}`, time.Now().UnixNano(), url)
}

func (h *harness) breakerRow(workflowID string) *models.CircuitBreaker {
	h.t.Helper()
	var rows []models.CircuitBreaker
	h.db.Conn(context.Background()).Where("organization_id = ? AND scope_key = ?", h.org, "step:"+workflowID+":fetch").Find(&rows)
	if len(rows) == 0 {
		return nil
	}
	return &rows[0]
}

// inWindow counts the breaker's failures in the window (its row is written only when it
// changes state).
func (h *harness) inWindow(breakerID string) int {
	h.t.Helper()
	b, err := h.db.GetBreaker(context.Background(), h.org, breakerID)
	if err != nil {
		h.t.Fatal(err)
	}
	return b.InWindow
}

// waitingAttempt polls until the execution's attempt waits on a breaker.
func (h *harness) waitingAttempt(execID string) models.StepAttempt {
	h.t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		for _, a := range h.attempts(execID) {
			if a.Status == models.StepPending && a.WaitingBreakerID != nil {
				return a
			}
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("execution %s never waited on a breaker: %+v", execID, h.attempts(execID))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// elapse makes the breaker's reset timeout pass (its opening moves into the past) and runs
// the waiting attempt now, as its job would when the time came.
func (h *harness) elapse(b *models.CircuitBreaker, a models.StepAttempt) {
	h.t.Helper()
	ctx := context.Background()
	if err := h.db.Conn(ctx).Model(&models.CircuitBreaker{}).Where("id = ?", b.ID).
		Update("opened_at", b.OpenedAt.Add(-time.Minute)).Error; err != nil {
		h.t.Fatal(err)
	}
	now, _ := h.db.Now(ctx)
	if err := h.db.Conn(ctx).Model(&models.StepAttempt{}).Where("id = ?", a.ID).
		Updates(map[string]any{"scheduled_at": now, "generation": a.Generation + 1}).Error; err != nil {
		h.t.Fatal(err)
	}
	if err := h.runner.Queue().Enqueue(ctx, []engine.Job{{AttemptID: a.ID, Generation: a.Generation + 1}}); err != nil {
		h.t.Fatal(err)
	}
}

func TestBreakerOpensWaitsAndCloses(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		h := newHarness(t, db)
		svc := &flipService{status: 503}
		srv := httptest.NewServer(svc)
		defer srv.Close()
		wf := h.workflow(breakerDef(srv.URL))

		// Five transient failures in the window open the breaker; the fifth dead letter says so.
		var fifth string
		for i := 0; i < 5; i++ {
			got := h.wait(h.start(wf, `{}`).ID, 20*time.Second)
			if got.Status != models.ExecDLQPending {
				t.Fatalf("execution %d: %s", i, got.Status)
			}
			fifth = got.ID
		}
		var states []engine.StepState
		dl := h.deadLetter(fifth)
		if err := json.Unmarshal(dl.StepStates, &states); err != nil || len(states) != 1 || states[0].Breaker == nil ||
			states[0].Breaker.State != breaker.Open || states[0].Breaker.Failures != 5 {
			t.Errorf("the dead letter does not record the breaker: %s", dl.StepStates)
		}
		b := h.breakerRow(wf.ID)
		if b == nil || b.State != breaker.Open || b.OpenedAt == nil || b.FailureCount != 5 {
			t.Fatalf("after 5 failures: %+v", b)
		}
		// The sixth attempt sends nothing: it waits, with its number and key, for the half-open time.
		ex := h.start(wf, `{}`)
		a := h.waitingAttempt(ex.ID)
		if n := len(svc.calls()); n != 5 {
			t.Fatalf("the open breaker let a request through: %d calls", n)
		}
		if a.Attempt != 1 || *a.ErrorCode != engine.CodeCircuitOpen || *a.ErrorType != "external_service" ||
			a.ScheduledAt.Sub(*b.OpenedAt) < 9*time.Second || !strings.Contains(*a.ErrorMessage, "Waiting on the circuit breaker until") {
			t.Fatalf("waiting attempt %+v (opened %v)", a, b.OpenedAt)
		}

		// After the reset timeout a trial goes through; it fails: the breaker opens again.
		h.elapse(b, a)
		deadline := time.Now().Add(15 * time.Second)
		for len(svc.calls()) < 6 || h.breakerRow(wf.ID).State != breaker.Open || h.breakerRow(wf.ID).OpenedAt.Equal(*b.OpenedAt) {
			if time.Now().After(deadline) {
				t.Fatalf("trial failure: calls %d, breaker %+v", len(svc.calls()), h.breakerRow(wf.ID))
			}
			time.Sleep(50 * time.Millisecond)
		}
		// A second waiting execution, then a trial that succeeds: closed, and the waiting one released.
		ex2 := h.start(wf, `{}`)
		a2 := h.waitingAttempt(ex2.ID)
		svc.set(200)
		b = h.breakerRow(wf.ID)
		h.elapse(b, a2)
		if got := h.wait(ex2.ID, 20*time.Second); got.Status != models.ExecSucceeded {
			t.Fatalf("trial execution: %s", got.Status)
		}
		// The breaker closes in its own transaction, just after the step's success commits.
		deadline = time.Now().Add(10 * time.Second)
		for b := h.breakerRow(wf.ID); b.State != breaker.Closed; b = h.breakerRow(wf.ID) {
			if time.Now().After(deadline) {
				t.Fatalf("after a successful trial: %+v", b)
			}
			time.Sleep(20 * time.Millisecond)
		}
		// The attempt that waited (and was refused as a trial failed before) ran with its own key.
		calls := svc.calls()
		if last := calls[len(calls)-1]; last != engine.IdempotencyKey(ex2.ID, "fetch", 1) {
			t.Errorf("released attempt's key %q", last)
		}
		acts := strings.Join(h.auditActions(), ",")
		for _, want := range []string{"circuit.opened", "circuit.half_opened", "circuit.closed"} {
			if !strings.Contains(acts, want) {
				t.Errorf("audit lacks %s: %s", want, acts)
			}
		}
	})
}

func TestBreakerCountsOnlyItsErrorsInTheWindow(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		h := newHarness(t, db)
		ctx := context.Background()
		svc := &flipService{status: 400}
		srv := httptest.NewServer(svc)
		defer srv.Close()
		wf := h.workflow(breakerDef(srv.URL))
		// Validation errors say nothing about the service's health.
		for i := 0; i < 6; i++ {
			h.wait(h.start(wf, `{}`).ID, 20*time.Second)
		}
		if b := h.breakerRow(wf.ID); b != nil {
			t.Fatalf("validation errors counted: %+v", b)
		}
		// Four failures, then a minute passes, then one more: 1 in the window, still closed.
		svc.set(503)
		for i := 0; i < 4; i++ {
			h.wait(h.start(wf, `{}`).ID, 20*time.Second)
		}
		b := h.breakerRow(wf.ID)
		if b == nil || b.State != breaker.Closed || h.inWindow(b.ID) != 4 {
			t.Fatalf("after 4 failures: %+v", b)
		}
		if err := db.Conn(ctx).Exec("UPDATE circuit_breaker_failures SET at = ? WHERE breaker_id = ?", time.Now().UTC().Add(-61*time.Second), b.ID).Error; err != nil {
			t.Fatal(err)
		}
		h.wait(h.start(wf, `{}`).ID, 20*time.Second)
		if b := h.breakerRow(wf.ID); b.State != breaker.Closed || h.inWindow(b.ID) != 1 {
			t.Fatalf("failures spread over more than the window opened it: %+v", b)
		}

		// An admin forces it open (with a reason), then resets it; both are audited.
		actor := audit.Actor{Type: audit.ActorSystem}
		if _, err := h.eng.ActOnBreaker(ctx, engine.BreakerAction{OrganizationID: h.org, BreakerID: b.ID, Open: true, Actor: actor}); apperr.ErrorCode(err) != apperr.EINVALID {
			t.Errorf("no reason: %v", err)
		}
		if _, err := h.eng.ActOnBreaker(ctx, engine.BreakerAction{OrganizationID: models.NewID(), BreakerID: b.ID, Open: true, Reason: "x", Actor: actor}); apperr.ErrorCode(err) != apperr.ENOTFOUND {
			t.Errorf("another organization: %v", err)
		}
		forced, err := h.eng.ActOnBreaker(ctx, engine.BreakerAction{OrganizationID: h.org, BreakerID: b.ID, Open: true, Reason: "bank maintenance", Actor: actor})
		if err != nil || forced.State != breaker.Open || !forced.Forced {
			t.Fatalf("force open: %+v %v", forced, err)
		}
		svc.set(200)
		before := len(svc.calls())
		ex := h.start(wf, `{}`)
		a := h.waitingAttempt(ex.ID)
		if len(svc.calls()) != before {
			t.Fatal("a forced-open breaker let a request through")
		}
		if _, err := h.eng.ActOnBreaker(ctx, engine.BreakerAction{OrganizationID: h.org, BreakerID: b.ID, Reason: "maintenance over", Actor: actor}); err != nil {
			t.Fatal(err)
		}
		if got := h.wait(ex.ID, 20*time.Second); got.Status != models.ExecSucceeded {
			t.Fatalf("released after a reset: %s", got.Status)
		}
		if as := h.attempts(ex.ID); len(as) != 1 || as[0].Attempt != a.Attempt || as[0].ErrorCode != nil || as[0].WaitingBreakerID != nil {
			t.Errorf("the waiting attempt ran as %+v", as)
		}
	})
}
