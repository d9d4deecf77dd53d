package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"sort"
	"strings"
	"testing"
	"time"

	"lifeline/models"
	"lifeline/models/modeltest"
	"lifeline/services/breaker"
	"lifeline/services/engine"
)

// rerun runs a waiting attempt now, as its job would when its time came.
func (h *harness) rerun(a models.StepAttempt) {
	h.t.Helper()
	ctx := context.Background()
	now, _ := h.db.Now(ctx)
	if err := h.db.Conn(ctx).Model(&models.StepAttempt{}).Where("id = ?", a.ID).
		Updates(map[string]any{"scheduled_at": now, "generation": a.Generation + 1}).Error; err != nil {
		h.t.Fatal(err)
	}
	if err := h.runner.Queue().Enqueue(ctx, []engine.Job{{AttemptID: a.ID, Generation: a.Generation + 1}}); err != nil {
		h.t.Fatal(err)
	}
}

// breakerStates is the breaker state a dead letter's snapshot records for each step.
func breakerStates(t *testing.T, dl *models.DeadLetter) []*engine.BreakerState {
	t.Helper()
	var states []engine.StepState
	if err := json.Unmarshal(dl.StepStates, &states); err != nil {
		t.Fatal(err)
	}
	out := make([]*engine.BreakerState, len(states))
	for i, s := range states {
		out[i] = s.Breaker
	}
	return out
}

// TestBreakerWaitBudget: a step that would wait on an open breaker past its budget (24 h by
// default; waitBudgetMs) goes to the DLQ as external_service, saying why, without a request;
// the dead letter records the breaker's state, and the refusal does not count against it.
func TestBreakerWaitBudget(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		h := newHarness(t, db)
		ctx := context.Background()
		svc := &flipService{status: 503}
		srv := httptest.NewServer(svc)
		defer srv.Close()
		def := func(name, cb string) string {
			return fmt.Sprintf(`{"name": %q, "settings": {"retryPolicy": {"maxRetries": 0}, "circuitBreaker": %s},
			  "steps": [{"id": "fetch", "type": "http", "config": {"method": "GET", "url": %q}}]}`, name, cb, srv.URL)
		}
		cases := []struct {
			name, cb, budget string
			// past moves the waiting attempt's creation into the past (0: its first refusal is past the budget).
			past time.Duration
		}{
			{name: "default budget", cb: `{"failureThreshold": 1, "resetTimeoutMs": 10000}`, budget: "24h0m0s", past: 24 * time.Hour},
			{name: "configured budget", cb: `{"failureThreshold": 1, "resetTimeoutMs": 120000, "waitBudgetMs": 60000}`, budget: "1m0s"},
		}
		for _, tc := range cases {
			wf := h.workflow(def(tc.name, tc.cb))
			if got := h.wait(h.start(wf, `{}`).ID, 20*time.Second); got.Status != models.ExecDLQPending {
				t.Fatalf("%s: first execution %s", tc.name, got.Status)
			}
			b := h.breakerRow(wf.ID)
			if b == nil || b.State != breaker.Open {
				t.Fatalf("%s: one failure did not open the breaker: %+v", tc.name, b)
			}
			calls := len(svc.calls())
			ex := h.start(wf, `{}`)
			if tc.past > 0 {
				a := h.waitingAttempt(ex.ID)
				if err := db.Conn(ctx).Model(&models.StepAttempt{}).Where("id = ?", a.ID).
					Update("created_at", a.CreatedAt.Add(-tc.past)).Error; err != nil {
					t.Fatal(err)
				}
				h.rerun(a)
			}
			got := h.wait(ex.ID, 20*time.Second)
			if got.Status != models.ExecDLQPending {
				t.Fatalf("%s: past its wait budget the execution is %s", tc.name, got.Status)
			}
			if n := len(svc.calls()); n != calls {
				t.Errorf("%s: the refused step sent %d requests", tc.name, n-calls)
			}
			dl := h.deadLetter(ex.ID)
			if dl.ErrorType != "external_service" || !strings.Contains(dl.Reason, "circuit breaker") ||
				!strings.Contains(dl.Reason, "wait ("+tc.budget+")") {
				t.Errorf("%s: dead letter %s: %q", tc.name, dl.ErrorType, dl.Reason)
			}
			if as := h.attempts(ex.ID); len(as) != 1 || as[0].Attempt != 1 || as[0].ErrorCode == nil || *as[0].ErrorCode != engine.CodeCircuitOpen {
				t.Errorf("%s: attempts %+v", tc.name, as)
			}
			if bs := breakerStates(t, dl); len(bs) != 1 || bs[0] == nil || *bs[0] != (engine.BreakerState{ID: b.ID, State: breaker.Open, Failures: 1}) {
				t.Errorf("%s: the dead letter does not record the breaker that refused the step: %s", tc.name, dl.StepStates)
			}
			// The refusal says nothing about the dependency: the breaker is as it was.
			var failures int64
			db.Conn(ctx).Model(&models.BreakerFailure{}).Where("breaker_id = ?", b.ID).Count(&failures)
			if after := h.breakerRow(wf.ID); failures != 1 || after.State != breaker.Open || after.FailureCount != 1 || !after.OpenedAt.Equal(*b.OpenedAt) {
				t.Errorf("%s: the refusal changed the breaker: %+v (%d failures)", tc.name, after, failures)
			}
		}
	})
}

// TestBreakerTrialNotCountedClosesAndReleases: a half-open trial that ends in an error that
// does not count (validation) closes the breaker, and the steps waiting on it are released at
// once, releaseSpacing (100 ms) apart, as after a successful trial.
func TestBreakerTrialNotCountedClosesAndReleases(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		h := newHarness(t, db)
		svc := &flipService{status: 503}
		srv := httptest.NewServer(svc)
		defer srv.Close()
		wf := h.workflow(fmt.Sprintf(`{"name": "Bank", "settings": {"retryPolicy": {"maxRetries": 0},
		  "circuitBreaker": {"failureThreshold": 1, "resetTimeoutMs": 30000, "halfOpenRequests": 1}},
		  "steps": [{"id": "fetch", "type": "http", "config": {"method": "GET", "url": %q}}]}`, srv.URL))
		h.wait(h.start(wf, `{}`).ID, 20*time.Second)
		b := h.breakerRow(wf.ID)
		if b == nil || b.State != breaker.Open {
			t.Fatalf("one failure did not open the breaker: %+v", b)
		}
		trial := h.start(wf, `{}`)
		ta := h.waitingAttempt(trial.ID)
		var waiting []string
		for i := 0; i < 3; i++ {
			ex := h.start(wf, `{}`)
			h.waitingAttempt(ex.ID)
			waiting = append(waiting, ex.ID)
		}
		// Their jobs are due when the breaker half-opens, resetTimeout after it opened: 30 s,
		// so that a slow setup (four executions under the race detector) stays well inside it.
		halfOpen := b.OpenedAt.Add(30 * time.Second)

		svc.set(400)
		h.elapse(b, ta)
		if got := h.wait(trial.ID, 20*time.Second); got.Status != models.ExecDLQPending || h.deadLetter(trial.ID).ErrorType != "validation" {
			t.Fatalf("the trial: %s", got.Status)
		}
		if after := h.breakerRow(wf.ID); after.State != breaker.Closed {
			t.Fatalf("a trial the service answered did not close the breaker: %+v", after)
		}
		if !strings.Contains(strings.Join(h.auditActions(), ","), "circuit.closed") {
			t.Errorf("no circuit.closed: %v", h.auditActions())
		}
		// Released by the close, well before their half-open time, one after another.
		var released []time.Time
		for _, id := range waiting {
			if got := h.wait(id, 8*time.Second); got.Status != models.ExecDLQPending {
				t.Fatalf("released execution %s: %s", id, got.Status)
			}
			as := h.attempts(id)
			if len(as) != 1 || as[0].Attempt != 1 || as[0].WaitingBreakerID != nil || *as[0].ErrorType != "validation" {
				t.Fatalf("released attempt %+v", as)
			}
			released = append(released, as[0].ScheduledAt)
		}
		sort.Slice(released, func(i, j int) bool { return released[i].Before(released[j]) })
		for i, at := range released {
			if !at.Before(halfOpen) {
				t.Errorf("attempt %d was not released by the close: due %v, half-open at %v", i, at, halfOpen)
			}
			if i > 0 && at.Sub(released[i-1]) != 100*time.Millisecond {
				t.Errorf("released %v apart, want 100ms: %v", at.Sub(released[i-1]), released)
			}
		}
		if n := len(svc.calls()); n != 5 {
			t.Errorf("%d requests, want 5 (the failure, the trial, the 3 released)", n)
		}
	})
}
