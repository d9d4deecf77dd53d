package engine_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"lifeline/models"
	"lifeline/models/apperr"
	"lifeline/models/modeltest"
	"lifeline/services/classify"
	"lifeline/services/engine"
	"lifeline/services/periods"
)

// postingLedger is an accounting service on loopback that counts the postings it receives; it
// answers 503 while down is set.
type postingLedger struct {
	calls atomic.Int64
	down  atomic.Bool
}

func (l *postingLedger) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	l.calls.Add(1)
	if l.down.Load() {
		w.WriteHeader(503)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprint(w, `{"posted": true}`)
}

// postingDef: prepare (transform) → post (http to url, postsToPeriod), about the input's
// client and period; retries validation failures too (a period_closed must still not be
// retried) and retries others policy times.
func postingDef(url string, maxRetries int) string {
	return fmt.Sprintf(`{"name": "Księgowanie %d", "settings": {"client": "{{ input.nip }}", "period": "{{ input.period }}",
	  "retryPolicy": {"maxRetries": %d, "initialDelayMs": 1000, "retryOnErrors": ["validation", "transient"], "noRetryOnErrors": ["permanent"]}},
	  "steps": [
	    {"id": "prepare", "type": "transform", "config": {"output": {"period": "{{ input.period }}"}}},
	    {"id": "post", "type": "http", "postsToPeriod": true, "config": {"method": "POST", "url": %q, "body": {"nip": "{{ input.nip }}", "period": "{{ steps.prepare.output.period }}"}}}
	  ]}`, time.Now().UnixNano(), maxRetries, url)
}

// TestAttemptIntoClosedPeriodIsNotSent: with 2026-09 closed for one client, an attempt of
// the posting step for that client is not sent (the postingLedger counts no call), fails as
// validation / period_closed without a retry, and the execution is in the DLQ; the same
// workflow for another client (or another period) posts.
func TestAttemptIntoClosedPeriodIsNotSent(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		h := newHarness(t, db)
		var l postingLedger
		srv := httptest.NewServer(&l)
		defer srv.Close()
		wf := h.workflow(postingDef(srv.URL, 3))
		admin := h.user()
		if _, err := periods.New(db, nil).Close(context.Background(), h.org, admin, periods.Input{Period: "2026-09", Client: "5260001246", Note: "JPK wysłany"}); err != nil {
			t.Fatal(err)
		}
		_, dl := h.deadLettered(wf, `{"nip": "5260001246", "period": "2026-09"}`)
		if n := l.calls.Load(); n != 0 {
			t.Fatalf("the postingLedger got %d calls for a closed period", n)
		}
		if dl.ErrorType != string(classify.Validation) || dl.FailedStepID != "post" || !strings.Contains(dl.Reason, "2026-09") {
			t.Errorf("dead letter: %s %s %q", dl.ErrorType, dl.FailedStepID, dl.Reason)
		}
		posts := stepAttempts(h.attempts(dl.ExecutionID), "post")
		if len(posts) != 1 || posts[0].ErrorCode == nil || *posts[0].ErrorCode != classify.CodePeriodClosed {
			t.Fatalf("post attempts: %+v", posts)
		}
		if m := deref(posts[0].ErrorMessage); !strings.Contains(m, "Anna Nowak") || !strings.Contains(m, "was not run") {
			t.Errorf("message %q", m)
		}
		for _, in := range []string{`{"nip": "1111111111", "period": "2026-09"}`, `{"nip": "5260001246", "period": "2026-10"}`} {
			ex := h.start(wf, in)
			if got := h.wait(ex.ID, 20*time.Second); got.Status != models.ExecSucceeded {
				t.Errorf("%s: %s", in, got.Status)
			}
		}
		if n := l.calls.Load(); n != 2 {
			t.Errorf("the postingLedger got %d calls, want 2", n)
		}
	})
}

// TestReplayIntoClosedPeriod: an execution that failed to post (the postingLedger was down) while
// 2026-09 was open; then every client's 2026-09 is closed. Retrying it, resuming from the
// first step or retrying it entirely is refused with period_closed naming the period, who
// closed it and when, and changes nothing. An edited input that moves it to 2026-10 runs
// (what it is about moves with it, on the execution and the dead letter); after the period
// is reopened, a second execution's plain retry runs.
func TestReplayIntoClosedPeriod(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		ctx := context.Background()
		h := newHarness(t, db)
		var l postingLedger
		l.down.Store(true)
		srv := httptest.NewServer(&l)
		defer srv.Close()
		wf := h.workflow(postingDef(srv.URL, 0))
		ex1, dl1 := h.deadLettered(wf, `{"nip": "5260001246", "period": "2026-09"}`)
		ex2, dl2 := h.deadLettered(wf, `{"nip": "7770001111", "period": "2026-09"}`)
		l.down.Store(false)
		admin := h.user()
		svc := periods.New(db, func() time.Time { return time.Date(2026, 10, 6, 8, 15, 0, 0, time.UTC) })
		closed, err := svc.Close(ctx, h.org, admin, periods.Input{Period: "2026-09", Note: "wrzesień zamknięty"})
		if err != nil {
			t.Fatal(err)
		}
		calls := l.calls.Load()
		before := len(h.attempts(ex1.ID))
		for _, r := range []engine.ReplayRequest{
			{Mode: engine.ReplayFromFailed},
			{Mode: engine.ReplayFromStep, FromStepID: "prepare"},
			{Mode: engine.ReplayFull},
			{Mode: engine.ReplayFromFailed, Input: []byte(`{"nip": "5260001246", "period": "2026-09", "note": "x"}`)},
		} {
			r.OrganizationID, r.DeadLetterID, r.Actor = h.org, dl1.ID, admin
			_, err := h.eng.Replay(ctx, r)
			if apperr.ErrorCode(err) != apperr.EPERIODCLOSED {
				t.Fatalf("%s: %v, want period_closed", r.Mode, err)
			}
			for _, want := range []string{"2026-09", "every client", "Anna Nowak", "2026-10-06 08:15 UTC", `"post"`} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("%s: %q does not say %q", r.Mode, err, want)
				}
			}
		}
		if got := h.deadLetterByID(dl1.ID); got.Status != models.DLQPending || got.ManualRetryCount != 0 {
			t.Errorf("dead letter changed: %s %d", got.Status, got.ManualRetryCount)
		}
		if got := h.wait(ex1.ID, time.Second); got.Status != models.ExecDLQPending || len(h.attempts(ex1.ID)) != before {
			t.Errorf("execution changed: %s, %d attempts (was %d)", got.Status, len(h.attempts(ex1.ID)), before)
		}
		var n int64
		db.Conn(ctx).Model(&models.Execution{}).Where("retry_of = ?", ex1.ID).Count(&n)
		if n != 0 || l.calls.Load() != calls {
			t.Errorf("something ran: %d new executions, %d calls", n, l.calls.Load()-calls)
		}

		// Moved to an open period: runs, and what it is about moves with it.
		h.replay(engine.ReplayRequest{DeadLetterID: dl1.ID, Mode: engine.ReplayFromFailed, Actor: admin,
			Input: []byte(`{"nip": "5260001246", "period": "2026-10"}`)})
		got := h.wait(ex1.ID, 20*time.Second)
		if got.Status != models.ExecSucceeded || deref(got.Period) != "2026-10" {
			t.Fatalf("edited replay: %s, period %s", got.Status, deref(got.Period))
		}
		if d := h.waitDeadLetter(dl1.ID); deref(d.Period) != "2026-10" || d.Status != models.DLQResolved {
			t.Errorf("dead letter: %s period %s", d.Status, deref(d.Period))
		}

		// Reopened: the plain retry of the other runs.
		if _, err := svc.Reopen(ctx, h.org, closed.ID, admin); err != nil {
			t.Fatal(err)
		}
		h.replay(engine.ReplayRequest{DeadLetterID: dl2.ID, Mode: engine.ReplayFromFailed, Actor: admin})
		if got := h.wait(ex2.ID, 20*time.Second); got.Status != models.ExecSucceeded || deref(got.Period) != "2026-09" {
			t.Fatalf("after reopening: %s", got.Status)
		}
		if acts := h.auditActions(closed.ID); !slices.Contains(acts, "period.closed") || !slices.Contains(acts, "period.reopened") {
			t.Errorf("audit: %v", acts)
		}
	})
}
