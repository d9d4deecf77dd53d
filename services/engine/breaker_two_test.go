package engine_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"lifeline/models"
	"lifeline/models/modeltest"
	"lifeline/services/audit"
	"lifeline/services/breaker"
	"lifeline/services/engine"
	"lifeline/services/workflows"
)

// TestBreakerTrialSlotsAcrossEngines: two engines on one PostgreSQL release 20 waiting
// attempts at once into a half-open breaker that allows 2 trials; only 2 requests leave.
func TestBreakerTrialSlotsAcrossEngines(t *testing.T) {
	if os.Getenv("TEST_DATABASE_URL") == "" {
		t.Skip("PostgreSQL only: TEST_DATABASE_URL is not set (make test starts a throwaway server)")
	}
	t.Parallel()
	ctx := context.Background()
	var requests, inFlight, maxInFlight atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		n := inFlight.Add(1)
		for {
			m := maxInFlight.Load()
			if n <= m || maxInFlight.CompareAndSwap(m, n) {
				break
			}
		}
		time.Sleep(300 * time.Millisecond)
		inFlight.Add(-1)
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer srv.Close()

	url := modeltest.URL(t, models.Postgres)
	dbs, runners, _ := twoEngines(t, url)
	db := dbs[0]
	clock := modeltest.Clock(t, db) // the database's clock, which both engines read
	org := models.Organization{ID: models.NewID(), Name: "Biuro Testowe"}
	if err := db.Conn(ctx).Create(&org).Error; err != nil {
		t.Fatal(err)
	}
	wfs := &workflows.Service{DB: db, Steps: loopbackSteps()}
	wf, err := wfs.Create(ctx, org.ID, audit.System, []byte(fmt.Sprintf(`{"name": "Bank", "settings": {"retryPolicy": {"maxRetries": 0},
	  "circuitBreaker": {"failureThreshold": 1, "resetTimeoutMs": 600000, "halfOpenRequests": 2}},
	  "steps": [{"id": "fetch", "type": "http", "config": {"method": "GET", "url": %q}}]}`, srv.URL)))
	if err != nil {
		t.Fatal(err)
	}
	eng := engine.New(db, loopbackSteps(), testLogger(t), engine.Config{Queue: runners[0].Queue()})
	start := func() string {
		ex, _, err := eng.Start(ctx, engine.StartRequest{OrganizationID: org.ID, WorkflowID: wf.ID, Input: []byte(`{}`)})
		if err != nil {
			t.Fatal(err)
		}
		return ex.ID
	}
	poll := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s", what)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	count := func(q string, args ...any) int64 {
		var n int64
		db.Conn(ctx).Raw(q, args...).Scan(&n)
		return n
	}
	start() // one failure opens it (threshold 1)
	poll("the breaker to open", func() bool {
		return count(`SELECT count(*) FROM circuit_breaker_state WHERE organization_id = ? AND state = ?`, org.ID, breaker.Open) == 1
	})
	for i := 0; i < 20; i++ {
		start()
	}
	poll("20 waiting attempts", func() bool {
		return count(`SELECT count(*) FROM step_executions WHERE organization_id = ? AND waiting_breaker_id IS NOT NULL AND status = 'PENDING'`, org.ID) == 20
	})
	before := requests.Load()

	// The reset timeout passes (the database's clock, which both engines read, moves): every
	// waiting attempt falls due at once, on both engines, and races for the 2 trial slots.
	// (The attempts are left to the engines: a test that rewrote their generation after the
	// move would race their claims, and a slot whose attempt moved to a later generation is
	// free by design; that, not a clock, let 3 to 9 requests through an earlier version.)
	// The reset timeout is the longest allowed, so that it passes only when the clock moves,
	// however slowly the 20 starts run (the race detector on a loaded machine took over 10 s).
	clock.Advance(10 * time.Minute)
	// Both trials fail: the breaker opens again and the rest keep waiting, unsent.
	poll("the breaker to reopen", func() bool {
		return requests.Load() > before && count(`SELECT count(*) FROM circuit_breaker_state WHERE organization_id = ? AND state = ?`, org.ID, breaker.Open) == 1
	})
	// Attempts refused during the trials ask again 2 s later: they must find it open again
	// and go back to waiting, unsent.
	clock.Advance(3 * time.Second)
	poll("every refused attempt to wait again", func() bool {
		return count(`SELECT count(*) FROM step_executions WHERE organization_id = ? AND (status = 'RUNNING' OR (status = 'PENDING' AND scheduled_at <= now()))`, org.ID) == 0 &&
			count(`SELECT count(*) FROM step_executions WHERE organization_id = ? AND status = 'PENDING' AND waiting_breaker_id IS NOT NULL`, org.ID)+requests.Load()-before == 20
	})
	if got := requests.Load() - before; got < 1 || got > 2 {
		t.Fatalf("%d requests left during half-open, want at most the 2 trial slots", got)
	}
	if m := maxInFlight.Load(); m > 2 {
		t.Fatalf("%d requests in flight at once, want at most 2", m)
	}
}
