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
	"lifeline/models/modeltest"
	"lifeline/services/audit"
	"lifeline/services/engine"
	"lifeline/services/workflows"
)

// undoLedger is a loopback service for TestRollbackCrash: the steps' calls succeed, /fail
// refuses, and a cancellation (/undo/…) takes 150 ms and is applied once per idempotency key.
type undoLedger struct {
	mu       sync.Mutex
	requests map[string]int // cancellation requests per key
	applied  map[string]int // cancellations applied per key
}

func (l *undoLedger) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	switch {
	case r.URL.Path == "/fail":
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprint(w, `{"error": "the tax office refuses"}`)
		return
	case !strings.HasPrefix(r.URL.Path, "/undo/"):
		fmt.Fprint(w, `{"ok": true}`)
		return
	}
	key := r.Header.Get("Idempotency-Key")
	l.mu.Lock()
	l.requests[key]++
	l.mu.Unlock()
	time.Sleep(150 * time.Millisecond)
	l.mu.Lock()
	if l.applied[key] == 0 { // idempotent: a repeat with the same key changes nothing
		l.applied[key]++
	}
	l.mu.Unlock()
	fmt.Fprint(w, `{"undone": true}`)
}

// TestRollbackCrash kills the engine process (SIGKILL) while compensations are in flight;
// another process finishes every rollback, each compensation sent again only with its own
// key and applied once.
func TestRollbackCrash(t *testing.T) {
	if testing.Short() {
		t.Skip("kills and restarts engine processes")
	}
	t.Parallel()
	for _, dialect := range modeltest.Dialects {
		t.Run(dialect, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			url, db := openDialect(t, dialect)
			clock := modeltest.Clock(t, db) // before the stack: River reads a SQLite database's clock when built
			svc := &undoLedger{requests: map[string]int{}, applied: map[string]int{}}
			srv := httptest.NewServer(svc)
			t.Cleanup(srv.Close)
			eng, _, reg, err := newStack(db, testLogger(t))
			if err != nil {
				t.Fatal(err)
			}
			org := models.Organization{ID: models.NewID(), Name: "Biuro Testowe"}
			if err := db.Conn(ctx).Create(&org).Error; err != nil {
				t.Fatal(err)
			}
			undo := func(what string) string {
				return fmt.Sprintf(`{"compensationType": "api_call", "config": {"method": "POST", "url": "%s/undo/%s", "timeoutMs": 2000}}`, srv.URL, what)
			}
			wf, err := (&workflows.Service{DB: db, Steps: reg}).Create(ctx, org.ID, audit.System, []byte(fmt.Sprintf(`{"name": "Crash rollback",
			  "settings": {"retryPolicy": {"maxRetries": 0}, "rollbackOnFailure": true, "circuitBreaker": {"enabled": false}},
			  "steps": [
			    {"id": "reserve", "type": "http", "config": {"method": "POST", "url": "%[1]s/reserve"}, "compensation": %[2]s},
			    {"id": "charge", "type": "http", "config": {"method": "POST", "url": "%[1]s/charge"}, "compensation": %[3]s},
			    {"id": "file", "type": "http", "config": {"method": "POST", "url": "%[1]s/fail"}}]}`, srv.URL, undo("reserve"), undo("charge"))))
			if err != nil {
				t.Fatal(err)
			}
			const executions = 10
			for i := range executions {
				if _, _, err := eng.Start(ctx, engine.StartRequest{OrganizationID: org.ID, WorkflowID: wf.ID,
					Input: fmt.Appendf(nil, `{"n": %d}`, i)}); err != nil {
					t.Fatal(err)
				}
			}
			count := func(q string, args ...any) int64 {
				var n int64
				if err := db.Conn(ctx).Raw(q, args...).Scan(&n).Error; err != nil {
					t.Fatal(err)
				}
				return n
			}
			first := startChild(t, url, "engine 1", clock)
			deadline := time.Now().Add(60 * time.Second)
			for count(`SELECT COUNT(*) FROM compensation_actions WHERE organization_id = ? AND status = 'running'`, org.ID) < 2 {
				if time.Now().After(deadline) {
					t.Fatal("no compensation ran")
				}
				time.Sleep(2 * time.Millisecond)
			}
			first.kill(t)
			inFlight := count(`SELECT COUNT(*) FROM compensation_actions WHERE organization_id = ? AND status = 'running'`, org.ID)
			t.Logf("killed with %d compensations running", inFlight)

			// The compensations' leases and the dead process's River leadership pass, as the time
			// a restart takes would.
			clock.Advance(afterKill)
			second := startChild(t, url, "engine 2", clock)
			deadline = time.Now().Add(60 * time.Second)
			for count(`SELECT COUNT(*) FROM workflow_executions WHERE organization_id = ? AND (rollback_status IS NULL OR rollback_status <> ?)`,
				org.ID, models.RolledBack) > 0 {
				if time.Now().After(deadline) {
					var cs []models.CompensationAction
					db.Conn(ctx).Where("organization_id = ?", org.ID).Find(&cs)
					var open []string
					for _, c := range cs {
						if *c.Status != models.CompCompleted {
							open = append(open, fmt.Sprintf("%s %s gen %d", *c.IdempotencyKey, *c.Status, c.Generation))
						}
					}
					t.Fatalf("rollbacks not finished after the kill:\n%s", strings.Join(open, "\n"))
				}
				time.Sleep(100 * time.Millisecond)
			}
			second.kill(t)

			var cs []models.CompensationAction
			if err := db.Conn(ctx).Where("organization_id = ?", org.ID).Find(&cs).Error; err != nil {
				t.Fatal(err)
			}
			if len(cs) != 2*executions {
				t.Fatalf("%d compensations, want %d", len(cs), 2*executions)
			}
			svc.mu.Lock()
			defer svc.mu.Unlock()
			resent := 0
			for _, c := range cs {
				key := *c.IdempotencyKey
				if key != engine.CompensationKey(*c.ExecutionID, c.StepID) || *c.Status != models.CompCompleted {
					t.Errorf("compensation %s: %s", key, *c.Status)
				}
				if svc.applied[key] != 1 {
					t.Errorf("%s applied %d times", key, svc.applied[key])
				}
				if svc.requests[key] > 1 {
					resent++
				}
			}
			if len(svc.requests) != 2*executions {
				t.Errorf("requests carried %d distinct keys, want %d", len(svc.requests), 2*executions)
			}
			if int64(resent) > inFlight {
				t.Errorf("%d compensations were sent again, but only %d were in flight at the kill", resent, inFlight)
			}
		})
	}
}
