package engine_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"testing"
	"time"

	"lifeline/models"
	"lifeline/models/modeltest"
	"lifeline/services/engine"
)

// TestStoreErrorHandsAttemptBack: when the engine's own database fails while it prepares an
// attempt (here the breaker's table is away), before any request leaves, the attempt is
// handed back and runs once the database answers, as attempt 1 with the same idempotency
// key; no failure is recorded and no retry is spent.
func TestStoreErrorHandsAttemptBack(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		h := newHarness(t, db)
		svc := &scripted{}
		srv := httptest.NewServer(svc)
		defer srv.Close()
		wf := h.workflow(fmt.Sprintf(`{"name": "VAT", "steps": [{"id": "submit", "type": "http", "config": {"url": %q, "method": "POST", "body": {}}}]}`, srv.URL))
		ctx := context.Background()
		if err := db.Conn(ctx).Exec(`ALTER TABLE circuit_breaker_state RENAME TO circuit_breaker_state_away`).Error; err != nil {
			t.Fatal(err)
		}
		ex := h.start(wf, `{}`)
		// Handed back at least once (each hand-back moves the attempt to its next generation).
		for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			var gen int
			db.Conn(ctx).Raw(`SELECT COALESCE(MAX(generation), 0) FROM step_executions WHERE execution_id = ?`, ex.ID).Scan(&gen)
			if gen >= 2 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the attempt was not handed back: %s", h.describe(ex.ID))
			}
		}
		if n := len(svc.Calls()); n != 0 {
			t.Fatalf("%d requests left while the breaker's state could not be read", n)
		}
		if err := db.Conn(ctx).Exec(`ALTER TABLE circuit_breaker_state_away RENAME TO circuit_breaker_state`).Error; err != nil {
			t.Fatal(err)
		}
		if got := h.wait(ex.ID, 20*time.Second); got.Status != models.ExecSucceeded {
			t.Fatalf("status %s: %s", got.Status, h.describe(ex.ID))
		}
		calls := svc.Calls()
		if len(calls) != 1 || calls[0].key != engine.IdempotencyKey(ex.ID, "submit", 1) {
			t.Errorf("calls %+v, want one with attempt 1's key", calls)
		}
		if as := h.attempts(ex.ID); len(as) != 1 || as[0].Attempt != 1 {
			t.Errorf("%d attempts, want attempt 1 alone", len(as))
		}
		var errs int64
		db.Conn(ctx).Model(&models.ExecutionError{}).Where("execution_id = ?", ex.ID).Count(&errs)
		if errs != 0 {
			t.Errorf("%d errors recorded for a failure of the engine's own database", errs)
		}
	})
}
