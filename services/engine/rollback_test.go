package engine_test

import (
	"context"
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
	"lifeline/services/engine"
)

// bookings is a loopback service: POST /book answers {"id": "B-<n>"}; /fail answers 400;
// DELETE /cancel/<id> records the cancellation (failing with 503 while failCancels > 0).
type bookings struct {
	mu          sync.Mutex
	booked      int
	cancels     []string // "<path> <Idempotency-Key>"
	failCancels int
}

func (l *bookings) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	l.mu.Lock()
	defer l.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	switch {
	case r.URL.Path == "/book":
		l.booked++
		fmt.Fprintf(w, `{"id": "B-%d"}`, l.booked)
	case r.URL.Path == "/fail":
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprint(w, `{"error": "VAT gateway refuses the declaration"}`)
	case strings.HasPrefix(r.URL.Path, "/cancel/"):
		if l.failCancels > 0 {
			l.failCancels--
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprint(w, `{"error": "try later"}`)
			return
		}
		l.cancels = append(l.cancels, r.Method+" "+r.URL.Path+" "+r.Header.Get("Idempotency-Key"))
		fmt.Fprint(w, `{"cancelled": true}`)
	default:
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprint(w, `{"error": "no such path"}`)
	}
}

func (l *bookings) cancelled() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.cancels...)
}

// rollbackDef: book (api_call compensation), note (notification), reserve (manual or
// api_call), then file, which fails for good.
func rollbackDef(url string, rollbackOnFailure bool, reserveComp string) string {
	return fmt.Sprintf(`{"name": "Booking %d", "settings": {"retryPolicy": {"maxRetries": 0}, "rollbackOnFailure": %t},
	  "steps": [
	    {"id": "book", "type": "http", "config": {"method": "POST", "url": "%[3]s/book"},
	     "compensation": {"compensationType": "api_call", "config": {"method": "DELETE", "endpoint": "%[3]s/cancel/{{ step.output.id }}"},
	       "retryPolicy": {"maxRetries": 2, "initialDelayMs": 1000, "jitterRatio": 0}}},
	    {"id": "note", "type": "transform", "config": {"output": {"client": "{{ input.client }}"}},
	     "compensation": {"compensationType": "notification", "config": {"notificationTemplate": "Booking for {{ step.output.client }} undone"}}},
	    {"id": "reserve", "type": "http", "config": {"method": "POST", "url": "%[3]s/book"}, "compensation": %[4]s},
	    {"id": "file", "type": "http", "config": {"method": "POST", "url": "%[3]s/fail"}}
	  ]}`, time.Now().UnixNano(), rollbackOnFailure, url, reserveComp)
}

func (h *harness) waitRollback(execID string) *models.Execution {
	h.t.Helper()
	return h.waitRollbackMoving(nil, execID)
}

// waitRollbackMoving is waitRollback that moves clock (when not nil) to each retry and
// compensation's time instead of waiting for it.
func (h *harness) waitRollbackMoving(clock *modeltest.MovableClock, execID string) *models.Execution {
	h.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var ex models.Execution
		h.db.Conn(context.Background()).First(&ex, "id = ?", execID)
		if ex.RollbackStatus != nil && *ex.RollbackStatus != models.RollingBack {
			return &ex
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("rollback of %s still %v: %+v", execID, ex.RollbackStatus, h.compensations(execID))
		}
		if clock != nil {
			moveToNextRetry(h.t, h.db, clock, execID)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (h *harness) compensations(execID string) []models.CompensationAction {
	cs, err := h.eng.Compensations(context.Background(), h.org, execID)
	if err != nil {
		h.t.Fatal(err)
	}
	return cs
}

func TestRollbackRunsCompensationsInReverse(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		h := newHarness(t, db)
		svc := &bookings{failCancels: 1} // the first cancellation fails once: it is retried
		srv := httptest.NewServer(svc)
		defer srv.Close()
		apiCancel := fmt.Sprintf(`{"compensationType": "api_call", "config": {"method": "DELETE", "url": "%s/cancel/{{ step.output.id }}"}, "retryPolicy": {"initialDelayMs": 1000, "jitterRatio": 0}}`, srv.URL)
		ex := h.start(h.workflow(rollbackDef(srv.URL, true, apiCancel)), `{"client": "Kowalski"}`)
		if got := h.wait(ex.ID, 20*time.Second); got.Status != models.ExecDLQPending {
			t.Fatalf("status %s", got.Status)
		}
		done := h.waitRollback(ex.ID)
		if *done.RollbackStatus != models.RolledBack {
			t.Fatalf("rollback %s: %+v", *done.RollbackStatus, h.compensations(ex.ID))
		}
		cs := h.compensations(ex.ID)
		var order []string
		for _, c := range cs {
			order = append(order, c.StepID+":"+*c.Status)
		}
		if strings.Join(order, ",") != "reserve:completed,note:completed,book:completed" {
			t.Fatalf("compensations %v", order)
		}
		if cs[0].Attempts != 2 || cs[2].Attempts != 1 {
			t.Errorf("attempts: reserve %d (one 503, then done), book %d", cs[0].Attempts, cs[2].Attempts)
		}
		// Reverse order at the receiver, each once, with its own key.
		want := []string{"DELETE /cancel/B-2 " + engine.CompensationKey(ex.ID, "reserve"), "DELETE /cancel/B-1 " + engine.CompensationKey(ex.ID, "book")}
		if got := svc.cancelled(); strings.Join(got, "|") != strings.Join(want, "|") {
			t.Fatalf("cancellations %v, want %v", got, want)
		}
		if !strings.Contains(string(cs[1].Result), "Booking for Kowalski undone") {
			t.Errorf("notification result %s", cs[1].Result)
		}
		acts := strings.Join(h.auditActions(), ",")
		if strings.Count(acts, "execution.rollback") != 2 || strings.Count(acts, "compensation.completed") != 3 {
			t.Errorf("audit %s", acts)
		}
	})
}

func TestRollbackManualAndFailures(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		clock := modeltest.Clock(t, db)
		h := newHarness(t, db)
		ctx := context.Background()
		svc := &bookings{failCancels: 100} // cancellations fail until the bank is back
		srv := httptest.NewServer(svc)
		defer srv.Close()
		manual := `{"compensationType": "manual", "config": {"instructions": "Cancel the reservation by phone."}}`
		wf := h.workflow(rollbackDef(srv.URL, false, manual))
		ex := h.start(wf, `{"client": "Nowak"}`)
		if got := h.waitMoving(clock, ex.ID, 10*time.Second); got.Status != models.ExecDLQPending || got.RollbackStatus != nil {
			t.Fatalf("without rollbackOnFailure: %s %v", got.Status, got.RollbackStatus)
		}
		actor := h.user()
		// An admin starts it by hand; a second start, another organization and a succeeded
		// execution are refused.
		if _, err := h.eng.StartRollback(ctx, engine.RollbackRequest{OrganizationID: models.NewID(), ExecutionID: ex.ID, Actor: actor}); apperr.ErrorCode(err) != apperr.ENOTFOUND {
			t.Errorf("another organization: %v", err)
		}
		if _, err := h.eng.StartRollback(ctx, engine.RollbackRequest{OrganizationID: h.org, ExecutionID: ex.ID, Actor: actor}); err != nil {
			t.Fatal(err)
		}
		if _, err := h.eng.StartRollback(ctx, engine.RollbackRequest{OrganizationID: h.org, ExecutionID: ex.ID, Actor: actor}); apperr.ErrorCode(err) != apperr.ECONFLICT {
			t.Errorf("second start: %v", err)
		}
		// The manual compensation (reserve) waits for an admin; the rest has not run.
		deadline := time.Now().Add(15 * time.Second)
		for cs := h.compensations(ex.ID); *cs[0].Status != models.CompWaiting; cs = h.compensations(ex.ID) {
			if time.Now().After(deadline) {
				t.Fatalf("manual compensation never waited: %+v", cs)
			}
			time.Sleep(50 * time.Millisecond)
		}
		cs := h.compensations(ex.ID)
		if *cs[1].Status != models.CompPending || *cs[2].Status != models.CompPending {
			t.Fatalf("later compensations ran before the manual one was confirmed: %s %s", *cs[1].Status, *cs[2].Status)
		}
		if err := h.eng.ActOnCompensation(ctx, engine.CompensationAction{OrganizationID: h.org, CompensationID: cs[0].ID, Action: "retry", Actor: actor}); apperr.ErrorCode(err) != apperr.ECONFLICT {
			t.Errorf("retry of a waiting compensation: %v", err)
		}
		if err := h.eng.ActOnCompensation(ctx, engine.CompensationAction{OrganizationID: h.org, CompensationID: cs[0].ID, Action: "confirm", Actor: actor}); err != nil {
			t.Fatal(err)
		}
		// book's cancellation fails (3 tries), is reported, and the rollback ends failed.
		done := h.waitRollbackMoving(clock, ex.ID)
		cs = h.compensations(ex.ID)
		if *done.RollbackStatus != models.RollbackFailed || *cs[2].Status != models.CompFailed || cs[2].Attempts != 3 || cs[2].ErrorMessage == nil ||
			!strings.Contains(*cs[2].ErrorMessage, "try later") {
			t.Fatalf("after failing cancellations: %s, %+v", *done.RollbackStatus, cs[2])
		}
		// The bank is back: an admin retries it, and the rollback completes.
		svc.mu.Lock()
		svc.failCancels = 0
		svc.mu.Unlock()
		if err := h.eng.ActOnCompensation(ctx, engine.CompensationAction{OrganizationID: h.org, CompensationID: cs[2].ID, Action: "retry", Actor: actor}); err != nil {
			t.Fatal(err)
		}
		if done := h.waitRollbackMoving(clock, ex.ID); *done.RollbackStatus != models.RolledBack {
			t.Fatalf("after the retry: %s %+v", *done.RollbackStatus, h.compensations(ex.ID))
		}
		if got := svc.cancelled(); len(got) != 1 || !strings.HasSuffix(got[0], engine.CompensationKey(ex.ID, "book")) {
			t.Errorf("cancellations %v", got)
		}
		// A succeeded execution has nothing to roll back.
		ok := h.start(h.workflow(fmt.Sprintf(`{"name": "Ok %d", "steps": [{"id": "a", "type": "transform", "config": {"output": 1}}]}`, time.Now().UnixNano())), `{}`)
		h.wait(ok.ID, 10*time.Second)
		if _, err := h.eng.StartRollback(ctx, engine.RollbackRequest{OrganizationID: h.org, ExecutionID: ok.ID, Actor: audit.System}); apperr.ErrorCode(err) != apperr.ECONFLICT {
			t.Errorf("rollback of a succeeded execution: %v", err)
		}
	})
}

// TestRollbackSurvivesAKill: the worker running a compensation is stopped dead while its
// request is in flight; another engine on the same database takes the rollback over, and
// the compensation is sent again with the same idempotency key (the receiver applies it once).
func TestRollbackSurvivesAKill(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		clock := modeltest.Clock(t, db)
		h := newHarness(t, db)
		ctx := context.Background()
		var mu sync.Mutex
		var keys []string
		applied := map[string]int{}
		hang := make(chan struct{})
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			switch {
			case r.URL.Path == "/book":
				fmt.Fprint(w, `{"id": "B-1"}`)
			case r.URL.Path == "/fail":
				w.WriteHeader(http.StatusBadRequest)
				fmt.Fprint(w, `{"error": "refused"}`)
			default: // the cancellation
				key := r.Header.Get("Idempotency-Key")
				mu.Lock()
				keys = append(keys, key)
				first := len(keys) == 1
				mu.Unlock()
				if first {
					select { // the first request hangs: the worker dies waiting for it
					case <-hang:
					case <-time.After(10 * time.Second):
					}
					return
				}
				mu.Lock()
				applied[key]++
				mu.Unlock()
				fmt.Fprint(w, `{"cancelled": true}`)
			}
		}))
		defer srv.Close()
		defer close(hang)
		wf := h.workflow(fmt.Sprintf(`{"name": "Kill %d", "settings": {"retryPolicy": {"maxRetries": 0}, "rollbackOnFailure": true},
		  "steps": [
		    {"id": "book", "type": "http", "config": {"method": "POST", "url": "%[2]s/book"},
		     "compensation": {"compensationType": "api_call", "config": {"method": "DELETE", "url": "%[2]s/cancel/{{ step.output.id }}", "timeoutMs": 20000}}},
		    {"id": "file", "type": "http", "config": {"method": "POST", "url": "%[2]s/fail"}}]}`, time.Now().UnixNano(), srv.URL))
		ex := h.start(wf, `{}`)
		deadline := time.Now().Add(20 * time.Second)
		for {
			mu.Lock()
			n := len(keys)
			mu.Unlock()
			if n == 1 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("the compensation never started")
			}
			time.Sleep(20 * time.Millisecond)
		}
		h.runner.Kill()
		// Another engine takes over.
		_, runner2, _, err := newStackWith(db, testLogger(t), loopbackSteps())
		if err != nil {
			t.Fatal(err)
		}
		if err := runner2.Start(ctx); err != nil {
			t.Fatal(err)
		}
		defer func() {
			sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			_ = runner2.Stop(sctx)
		}()
		// The killed worker hands its compensation back, with no job: the reconciler queues it
		// again once it has waited the stack's PendingGrace (1 s), which the clock skips.
		for deadline := time.Now().Add(10 * time.Second); *h.compensations(ex.ID)[0].Status != models.CompPending; time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("the killed compensation was never handed back: %+v", h.compensations(ex.ID))
			}
		}
		clock.Advance(2 * time.Second)
		if done := h.waitRollbackMoving(clock, ex.ID); *done.RollbackStatus != models.RolledBack {
			t.Fatalf("after the kill: %s %+v", *done.RollbackStatus, h.compensations(ex.ID))
		}
		mu.Lock()
		defer mu.Unlock()
		want := engine.CompensationKey(ex.ID, "book")
		for _, k := range keys {
			if k != want {
				t.Errorf("a request with key %q, want %q", k, want)
			}
		}
		if len(keys) < 2 || applied[want] != 1 {
			t.Errorf("requests %d, applied %d times", len(keys), applied[want])
		}
	})
}

// A compensation of type none is skipped at once, and audited like every other.
func TestRollbackNoneIsAudited(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		h := newHarness(t, db)
		svc := &bookings{}
		srv := httptest.NewServer(svc)
		defer srv.Close()
		ex := h.start(h.workflow(rollbackDef(srv.URL, true, `{"compensationType": "none"}`)), `{"client": "Nowak"}`)
		h.wait(ex.ID, 20*time.Second)
		if done := h.waitRollback(ex.ID); *done.RollbackStatus != models.RolledBack {
			t.Fatalf("rollback %s", *done.RollbackStatus)
		}
		var order []string
		for _, c := range h.compensations(ex.ID) {
			order = append(order, c.StepID+":"+*c.Status)
		}
		if strings.Join(order, ",") != "reserve:skipped,note:completed,book:completed" {
			t.Fatalf("compensations %v", order)
		}
		acts := strings.Join(h.auditActions(), ",")
		if strings.Count(acts, "compensation.skipped") != 1 || strings.Count(acts, "compensation.completed") != 2 {
			t.Errorf("audit %s", acts)
		}
	})
}
