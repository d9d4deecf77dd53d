package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"gorm.io/gorm"

	"lifeline/models"
	"lifeline/models/modeltest"
	"lifeline/services/audit"
	"lifeline/services/breaker"
	"lifeline/services/engine"
	"lifeline/services/workflows"
)

// noQueue is a queue that keeps nothing: the test runs the attempts itself.
type noQueue struct{}

func (noQueue) EnqueueTx(context.Context, *gorm.DB, []engine.Job) (func(context.Context) error, error) {
	return nil, nil
}
func (noQueue) Enqueue(context.Context, []engine.Job) error            { return nil }
func (noQueue) EnqueuePgx(context.Context, pgx.Tx, []engine.Job) error { return nil }

// TestBreakerOpensAtItsThreshold: 50 workers fail at once against a closed breaker with
// failureThreshold 5. On PostgreSQL every failure's transaction is held once it has counted
// the window (each then sees its own failure only: none of the others has committed), and
// they are let commit one at a time: the breaker must be open once the 5th has been
// recorded (± 1), not lag by up to 49 failures. On SQLite (one writer) they run freely.
// Either way it opens once, at 5 failures in the window.
func TestBreakerOpensAtItsThreshold(t *testing.T) {
	t.Parallel()
	for _, dialect := range modeltest.Dialects {
		t.Run(dialect, func(t *testing.T) {
			t.Parallel()
			testOpensAtThreshold(t, dialect)
		})
	}
}

func testOpensAtThreshold(t *testing.T, dialect string) {
	const workers, threshold = 50, 5
	ctx := context.Background()
	var requests atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	db, err := models.Open(ctx, models.WithPool(modeltest.URL(t, dialect), 2*workers+20))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	reg := loopbackSteps()
	eng := engine.New(db, reg, testLogger(t), engine.Config{Queue: noQueue{}})
	org := models.Organization{ID: models.NewID(), Name: "Biuro Testowe"}
	if err := db.Conn(ctx).Create(&org).Error; err != nil {
		t.Fatal(err)
	}
	wf, err := (&workflows.Service{DB: db, Steps: reg}).Create(ctx, org.ID, audit.System, []byte(fmt.Sprintf(`{"name": "Bank",
	  "settings": {"retryPolicy": {"maxRetries": 0}, "circuitBreaker": {"failureThreshold": %d, "resetTimeoutMs": 60000}},
	  "steps": [{"id": "fetch", "type": "http", "config": {"method": "GET", "url": %q}}]}`, threshold, srv.URL)))
	if err != nil {
		t.Fatal(err)
	}
	// pending starts an execution and returns its first attempt, PENDING (nothing runs it).
	pending := func() models.StepAttempt {
		ex, _, err := eng.Start(ctx, engine.StartRequest{OrganizationID: org.ID, WorkflowID: wf.ID, Input: []byte(`{}`)})
		if err != nil {
			t.Fatal(err)
		}
		var a models.StepAttempt
		if err := db.Conn(ctx).Where("execution_id = ?", ex.ID).First(&a).Error; err != nil {
			t.Fatal(err)
		}
		return a
	}
	breakerRow := func() models.CircuitBreaker {
		var b models.CircuitBreaker
		if err := db.Conn(ctx).Where("organization_id = ?", org.ID).First(&b).Error; err != nil {
			t.Fatal(err)
		}
		return b
	}

	// A first failure makes the breaker's row; its failure is then forgotten (the window is
	// empty), so the 50 below start from a closed breaker with nothing counted.
	a0 := pending()
	if out, err := eng.RunAttempt(ctx, a0.ID, a0.Generation); err != nil || out != engine.OutcomeDLQ {
		t.Fatalf("first failure: %s %v", out, err)
	}
	b := breakerRow()
	if err := db.Conn(ctx).Where("breaker_id = ?", b.ID).Delete(&models.BreakerFailure{}).Error; err != nil {
		t.Fatal(err)
	}
	as := make([]models.StepAttempt, workers)
	for i := range as {
		as[i] = pending()
	}

	held := dialect == models.Postgres
	arrived, turn := make(chan struct{}, workers), make(chan struct{})
	if held {
		eng.SetHooks(engine.Hooks{FailureCounted: func(string) {
			arrived <- struct{}{}
			<-turn
		}})
	}
	type result struct {
		out engine.Outcome
		err error
	}
	done := make(chan result, workers)
	for _, a := range as {
		go func() {
			out, err := eng.RunAttempt(ctx, a.ID, a.Generation)
			done <- result{out, err}
		}()
	}
	openedAt := 0 // the number of failures recorded when the breaker was first seen open
	if held {
		timeout := time.After(60 * time.Second)
		for n := 0; n < workers; n++ {
			select {
			case <-arrived:
			case <-timeout:
				t.Fatalf("only %d of %d failures were counted together", n, workers)
			}
		}
		for k := 1; k <= workers; k++ {
			turn <- struct{}{}
			if r := <-done; r.err != nil || r.out != engine.OutcomeDLQ {
				t.Fatalf("failure %d: %s %v", k, r.out, r.err)
			}
			if openedAt == 0 && breakerRow().State == breaker.Open {
				openedAt = k
			}
		}
		t.Logf("the breaker was open once %d of the %d failures counted together had been recorded", openedAt, workers)
		if openedAt < threshold || openedAt > threshold+1 {
			t.Errorf("the breaker opened after %d recorded failures (0: never), want %d (± 1)", openedAt, threshold)
		}
	} else {
		for range workers {
			if r := <-done; r.err != nil {
				t.Fatal(r.err)
			}
		}
	}

	b = breakerRow()
	var opened []models.AuditEntry
	if err := db.Conn(ctx).Where("organization_id = ? AND action = ?", org.ID, "circuit.opened").Find(&opened).Error; err != nil {
		t.Fatal(err)
	}
	if b.State != breaker.Open || len(opened) != 1 {
		t.Fatalf("after %d failures the breaker is %s, opened %d times", workers, b.State, len(opened))
	}
	var details struct{ Failures int }
	if err := json.Unmarshal(opened[0].Details, &details); err != nil {
		t.Fatal(err)
	}
	if details.Failures < threshold || details.Failures > threshold+1 || b.FailureCount != details.Failures {
		t.Errorf("it opened counting %d failures (row: %d), want %d (± 1)", details.Failures, b.FailureCount, threshold)
	}
	t.Logf("%d requests reached the service; it opened counting %d failures", requests.Load(), details.Failures)
}
