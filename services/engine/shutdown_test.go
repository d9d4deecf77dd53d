package engine_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"lifeline/models"
	"lifeline/models/modeltest"
	"lifeline/services/engine"
)

// TestShutdownReleasesInFlightAttempt: a graceful stop that cannot wait for a slow step
// hands the attempt back (PENDING, next generation, same attempt number and key); the next
// process runs it to the end.
func TestShutdownReleasesInFlightAttempt(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		release := make(chan struct{})
		var mu sync.Mutex
		var keys []string
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			keys = append(keys, r.Header.Get("Idempotency-Key"))
			n := len(keys)
			mu.Unlock()
			if n == 1 {
				select { // the first call hangs until the process stops
				case <-release:
				case <-r.Context().Done():
				}
				return
			}
			fmt.Fprint(w, `{"ok": true}`)
		}))
		defer srv.Close()
		defer close(release)
		h := newHarness(t, db)
		wf := h.workflow(fmt.Sprintf(`{"name": "Slow", "steps": [{"id": "post", "type": "http", "timeoutMs": 60000, "config": {"url": %q, "method": "POST", "body": {}}}]}`, srv.URL))
		ex := h.start(wf, `{}`)
		deadline := time.Now().Add(10 * time.Second)
		for len(h.attempts(ex.ID)) == 0 || h.attempts(ex.ID)[0].Status != models.StepRunning {
			if time.Now().After(deadline) {
				t.Fatal("attempt never started")
			}
			time.Sleep(20 * time.Millisecond)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		_ = h.runner.Stop(ctx) // cannot wait for the hanging call: cancels it
		// The cancelled job writes the release as it unwinds, which on a loaded machine
		// (SQLite under the race detector) can land just after Stop has returned.
		var as []models.StepAttempt
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			if as = h.attempts(ex.ID); len(as) == 1 && as[0].Status == models.StepPending && as[0].Generation == 2 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("after stop: %+v", as)
			}
		}
		if as[0].Attempt != 1 {
			t.Fatalf("after stop: %+v", as)
		}
		// A new process on the same database finishes it with the same idempotency key.
		h2 := newHarness(t, db)
		got := h2.wait(ex.ID, 30*time.Second)
		if got.Status != models.ExecSucceeded {
			t.Fatalf("status %s", got.Status)
		}
		mu.Lock()
		defer mu.Unlock()
		if len(keys) != 2 || keys[0] != keys[1] {
			t.Fatalf("keys %v: the released attempt must run again with the same key", keys)
		}
	})
}

func TestRetention(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		h := newHarness(t, db)
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { http.Error(w, "no", 404) }))
		defer srv.Close()
		ex := h.start(h.workflow(httpDef(srv.URL, fastPolicy)), `{}`)
		h.wait(ex.ID, 20*time.Second)
		ctx := context.Background()
		// The runner's own retention job (run once on start, when it becomes leader) must
		// not take the pass this test makes: stop it first.
		if err := h.runner.Stop(ctx); err != nil {
			t.Fatal(err)
		}
		// Age the dead letter past its 30 days.
		if err := db.Conn(ctx).Model(&models.DeadLetter{}).Where("execution_id = ?", ex.ID).
			Update("expires_at", time.Now().UTC().Add(-time.Minute)).Error; err != nil {
			t.Fatal(err)
		}
		// Beside it, more than a batch of items past their time, and items of day 29 (a day
		// left) and a processing one past its time: only the due pending ones expire.
		var orig models.DeadLetter
		if err := db.Conn(ctx).First(&orig, "execution_id = ?", ex.ID).Error; err != nil {
			t.Fatal(err)
		}
		var origEx models.Execution
		var origErr models.ExecutionError
		if db.Conn(ctx).First(&origEx, "id = ?", ex.ID).Error != nil || db.Conn(ctx).First(&origErr, "id = ?", orig.ErrorID).Error != nil {
			t.Fatal("the dead letter's execution and error")
		}
		clone := func(status string, expiresIn time.Duration) string {
			e, er, dl := origEx, origErr, orig
			e.ID, e.CorrelationID = models.NewID(), models.NewID()
			er.ID, er.ExecutionID = models.NewID(), e.ID
			dl.ID, dl.ExecutionID, dl.ErrorID, dl.Status, dl.ExpiresAt = models.NewID(), e.ID, er.ID, status, time.Now().UTC().Add(expiresIn)
			for _, row := range []any{&e, &er, &dl} {
				if err := db.Conn(ctx).Create(row).Error; err != nil {
					t.Fatal(err)
				}
			}
			return dl.ID
		}
		for range engine.RetentionBatch + 20 {
			clone(models.DLQPending, -time.Hour)
		}
		day29 := clone(models.DLQPending, 24*time.Hour)
		processing := clone(models.DLQProcessing, -time.Hour)
		res, err := h.eng.Retain(ctx)
		if err != nil || res.ExpiredDeadLetters != engine.RetentionBatch+21 {
			t.Fatalf("retain: %+v %v", res, err)
		}
		for id, want := range map[string]string{day29: models.DLQPending, processing: models.DLQProcessing} {
			var dl models.DeadLetter
			if db.Conn(ctx).First(&dl, "id = ?", id).Error != nil || dl.Status != want || string(dl.StepStates) == "[]" {
				t.Errorf("an item that is not due: %s %s", dl.Status, dl.StepStates)
			}
		}
		var audits int64
		db.Conn(ctx).Model(&models.AuditEntry{}).Where("action = ? AND organization_id = ?", "dlq.expired", orig.OrganizationID).Count(&audits)
		if audits != engine.RetentionBatch+21 {
			t.Errorf("%d dlq.expired audit entries", audits)
		}
		var dl models.DeadLetter
		db.Conn(ctx).First(&dl, "execution_id = ?", ex.ID)
		// Expired: the payload is purged; the item, its error and the audit trail stay.
		if dl.Status != models.DLQExpired || string(dl.StepStates) != "[]" || string(dl.OriginalInput) != "{}" || dl.ErrorType == "" {
			t.Fatalf("dead letter %+v", dl)
		}
		if res, _ := h.eng.Retain(ctx); res.ExpiredDeadLetters != 0 {
			t.Fatal("expired twice")
		}
	})
}
