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
	"lifeline/services/audit"
	"lifeline/services/breaker"
	"lifeline/services/engine"
	"lifeline/services/jobs"
	"lifeline/services/workflows"
)

// hangingService answers its first request 503 at once (it opens the breaker); every later
// request is held until release is closed, then answered 503: a dependency that hangs far
// longer than the breaker's reset timeout.
type hangingService struct {
	release  chan struct{}
	mu       sync.Mutex
	keys     map[string]bool // idempotency keys that reached the service
	calls    int
	inFlight int
	most     int // most requests in flight at once
}

func (s *hangingService) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.calls++
	first := s.calls == 1
	s.keys[r.Header.Get("Idempotency-Key")] = true
	if !first {
		s.inFlight++
		s.most = max(s.most, s.inFlight)
	}
	s.mu.Unlock()
	if !first {
		select {
		case <-s.release:
		case <-r.Context().Done():
		}
		s.mu.Lock()
		s.inFlight--
		s.mu.Unlock()
	}
	w.WriteHeader(http.StatusServiceUnavailable)
}

func (s *hangingService) reached(key string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.keys[key]
}

func (s *hangingService) counts() (calls, most int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls, s.most
}

// TestBreakerTrialsHeldWhileTheyHang: two engines (two processes) share one database and a
// half-open breaker that allows 3 trials (reset 10 s). The trials hang at the service far
// longer than the reset timeout. Over several reset periods (the breaker's times moved into
// the past, not waited for) every waiting attempt asks again on either engine: the slots of
// the trials still running are not free, whatever the time since the breaker half-opened, so
// at most 3 requests ever reach the service while the trials hang.
func TestBreakerTrialsHeldWhileTheyHang(t *testing.T) {
	t.Parallel()
	for _, dialect := range modeltest.Dialects {
		t.Run(dialect, func(t *testing.T) {
			t.Parallel()
			testTrialsHeld(t, dialect)
		})
	}
}

func testTrialsHeld(t *testing.T, dialect string) {
	ctx := context.Background()
	svc := &hangingService{release: make(chan struct{}), keys: map[string]bool{}}
	srv := httptest.NewServer(svc)
	t.Cleanup(srv.Close)

	url := modeltest.URL(t, dialect)
	dbs, runners, engs := twoEngines(t, url)
	// Cleanups run last in, first out: the hung requests are answered before the runners stop.
	t.Cleanup(func() { close(svc.release) })
	db := dbs[0]
	org := models.Organization{ID: models.NewID(), Name: "Biuro Testowe"}
	if err := db.Conn(ctx).Create(&org).Error; err != nil {
		t.Fatal(err)
	}
	wf, err := (&workflows.Service{DB: db, Steps: loopbackSteps()}).Create(ctx, org.ID, audit.System, []byte(fmt.Sprintf(`{"name": "Bank",
	  "settings": {"retryPolicy": {"maxRetries": 0}, "circuitBreaker": {"failureThreshold": 1, "resetTimeoutMs": 10000, "halfOpenRequests": 3}},
	  "steps": [{"id": "fetch", "type": "http", "timeoutMs": 600000, "config": {"method": "GET", "url": %q}}]}`, srv.URL)))
	if err != nil {
		t.Fatal(err)
	}
	start := func() string {
		ex, _, err := engs[0].Start(ctx, engine.StartRequest{OrganizationID: org.ID, WorkflowID: wf.ID, Input: []byte(`{}`)})
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
			time.Sleep(20 * time.Millisecond)
		}
	}
	breakerRow := func() models.CircuitBreaker {
		var bs []models.CircuitBreaker
		if err := db.Conn(ctx).Where("organization_id = ?", org.ID).Find(&bs).Error; err != nil {
			t.Fatal(err)
		}
		if len(bs) == 0 {
			return models.CircuitBreaker{}
		}
		return bs[0]
	}
	waiting := func() []models.StepAttempt {
		var as []models.StepAttempt
		if err := db.Conn(ctx).Where("organization_id = ? AND status = ? AND waiting_breaker_id IS NOT NULL", org.ID, models.StepPending).
			Find(&as).Error; err != nil {
			t.Fatal(err)
		}
		return as
	}

	start() // its 503 opens the breaker (threshold 1)
	poll("the breaker to open", func() bool { return breakerRow().State == breaker.Open })
	const executions = 12
	for range executions {
		start()
	}
	poll("every execution to wait on the breaker", func() bool { return len(waiting()) == executions })

	for period := range 4 {
		// The reset timeout passes (since the breaker opened, or half-opened).
		b := breakerRow()
		upd := map[string]any{}
		if b.OpenedAt != nil {
			upd["opened_at"] = b.OpenedAt.Add(-11 * time.Second)
		}
		if b.HalfOpenedAt != nil {
			upd["half_opened_at"] = b.HalfOpenedAt.Add(-11 * time.Second)
		}
		if err := db.Conn(ctx).Model(&models.CircuitBreaker{}).Where("id = ?", b.ID).Updates(upd).Error; err != nil {
			t.Fatal(err)
		}
		// Every waiting attempt asks again now, half of them on each engine.
		type asked struct {
			a   models.StepAttempt
			gen int
		}
		var all []asked
		now, err := db.Now(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for i, a := range waiting() {
			r := db.Conn(ctx).Model(&models.StepAttempt{}).Where("id = ? AND status = ? AND generation = ?", a.ID, models.StepPending, a.Generation).
				Updates(map[string]any{"scheduled_at": now, "generation": a.Generation + 1})
			if r.Error != nil {
				t.Fatal(r.Error)
			}
			if r.RowsAffected == 0 {
				continue // its own job moved it on meanwhile
			}
			if err := runners[i%2].Queue().Enqueue(ctx, []engine.Job{{AttemptID: a.ID, Generation: a.Generation + 1}}); err != nil {
				t.Fatal(err)
			}
			all = append(all, asked{a, a.Generation + 1})
		}
		// Each either reached the service (a trial) or waits again (a later generation).
		poll(fmt.Sprintf("period %d: every waiting attempt to be answered", period), func() bool {
			for _, x := range all {
				var cur models.StepAttempt
				if err := db.Conn(ctx).First(&cur, "id = ?", x.a.ID).Error; err != nil {
					t.Fatal(err)
				}
				if !svc.reached(x.a.IdempotencyKey) && !(cur.Status == models.StepPending && cur.Generation > x.gen) {
					return false
				}
			}
			return true
		})
		calls, most := svc.counts()
		t.Logf("period %d: %d requests reached the service (%d at most at once) after the one that opened it", period, calls-1, most)
		if calls-1 > 3 || most > 3 {
			t.Fatalf("period %d: %d requests reached the service while the trials hang (%d at once), want at most halfOpenRequests = 3",
				period, calls-1, most)
		}
	}
	if calls, _ := svc.counts(); calls-1 != 3 {
		t.Errorf("%d trials ran, want 3 (every slot taken)", calls-1)
	}
}

// twoEngines starts two engines, each with its own connection pool and queue, on the
// database at url: two processes sharing one database. They stop when t ends.
func twoEngines(t *testing.T, url string) (dbs [2]*models.DB, runners [2]*jobs.Runner, engs [2]*engine.Engine) {
	t.Helper()
	ctx := context.Background()
	for i := range dbs {
		db, err := models.Open(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = db.Close() })
		if i == 0 {
			// The database's movable clock (a test moves it with modeltest.Clock(t, dbs[0])),
			// installed before this stack's River workers read db's GORM config: installed
			// after, the race detector saw its write race their reads.
			modeltest.Clock(t, db)
		}
		eng, runner, _, err := newStackWith(db, testLogger(t), loopbackSteps())
		if err != nil {
			t.Fatal(err)
		}
		if err := runner.Start(ctx); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			_ = runner.Stop(ctx)
		})
		dbs[i], runners[i], engs[i] = db, runner, eng
	}
	return dbs, runners, engs
}
