package engine

import (
	"context"
	"testing"
	"time"

	"gorm.io/gorm"

	"lifeline/models"
	"lifeline/models/modeltest"
	"lifeline/services/breaker"
)

// TestBreakerTransitions is the conformance test of breakerTx: every change of a breaker's
// shared state, and its lost case, on each database. A lost change reports false with no
// error and writes nothing.
func TestBreakerTransitions(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		ctx := context.Background()
		now, err := db.Now(ctx)
		if err != nil {
			t.Fatal(err)
		}
		org := models.Organization{ID: models.NewID(), Name: "Biuro"}
		if err := db.Conn(ctx).Create(&org).Error; err != nil {
			t.Fatal(err)
		}
		wf := models.Workflow{ID: models.NewID(), OrganizationID: org.ID, Name: "W", Version: 1, Definition: models.JSON(`{}`),
			UnknownErrors: "retry", WebhookToken: models.NewID(), WebhookSecret: "x", CreatedAt: now, UpdatedAt: now}
		ex := models.Execution{ID: models.NewID(), OrganizationID: org.ID, WorkflowID: wf.ID, WorkflowVersion: 1, Status: models.ExecRunning,
			Input: models.JSON(`{}`), TriggerType: "api", CorrelationID: models.NewID(), CreatedAt: now, UpdatedAt: now}
		for _, row := range []any{&wf, &ex} {
			if err := db.Conn(ctx).Create(row).Error; err != nil {
				t.Fatal(err)
			}
		}
		cfg := breaker.Default()
		bt := breakerTx{tx: db.Conn(ctx), now: now}
		n := 0
		// fresh makes a breaker (closed) of a host of its own.
		fresh := func() string {
			t.Helper()
			n++
			host := "h" + string(rune('a'+n)) + ".example"
			id, err := bt.Ensure(breakerScope{org: org.ID, key: "host:" + host, host: &host}, cfg)
			if err != nil {
				t.Fatal(err)
			}
			return id
		}
		row := func(id string) models.CircuitBreaker {
			t.Helper()
			var b models.CircuitBreaker
			if err := db.Conn(ctx).First(&b, "id = ?", id).Error; err != nil {
				t.Fatal(err)
			}
			return b
		}
		// in runs a transition in a transaction of its own and checks what it reported (fn
		// touches the database only through bt: SQLite has one connection).
		in := func(name string, want bool, fn func(bt breakerTx) (bool, error)) {
			t.Helper()
			var won bool
			err := db.Tx(ctx, func(tx *gorm.DB) error {
				var err error
				won, err = fn(breakerTx{tx: tx, now: now})
				return err
			})
			if err != nil || won != want {
				t.Errorf("%s: won %v (%v), want %v", name, won, err, want)
			}
		}
		// set puts a breaker in a state, as a transition would have left it.
		set := func(id string, upd map[string]any) {
			t.Helper()
			if err := db.Conn(ctx).Model(&models.CircuitBreaker{}).Where("id = ?", id).Updates(upd).Error; err != nil {
				t.Fatal(err)
			}
		}
		failures := func(id string) int {
			t.Helper()
			n, err := bt.InWindow(id, now)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}

		t.Run("Ensure", func(t *testing.T) {
			host := "ensure.example"
			s := breakerScope{org: org.ID, key: "host:" + host, host: &host}
			a, err := bt.Ensure(s, cfg)
			if err != nil {
				t.Fatal(err)
			}
			b, err := bt.Ensure(s, breaker.Config{FailureThreshold: 99})
			if err != nil || a != b || row(a).State != breaker.Closed || row(a).FailureThreshold != cfg.FailureThreshold {
				t.Errorf("ensure twice: %s %s %v %+v", a, b, err, row(a))
			}
		})

		t.Run("RecordFailure", func(t *testing.T) {
			id := fresh()
			before := row(id)
			for i := 1; i <= 2; i++ {
				got, err := bt.RecordFailure(id)
				if err != nil || got != i {
					t.Fatalf("failure %d: counted %d (%v)", i, got, err)
				}
			}
			// An old failure is outside the window; the breaker's row is not written.
			old := breakerTx{tx: db.Conn(ctx), now: now.Add(-2 * breaker.Window)}
			if _, err := old.RecordFailure(id); err != nil {
				t.Fatal(err)
			}
			if got := failures(id); got != 2 {
				t.Errorf("in the window: %d, want 2", got)
			}
			if after := row(id); !after.UpdatedAt.Equal(before.UpdatedAt) || after.FailureCount != 0 {
				t.Errorf("a failure wrote the breaker's row: %+v", after)
			}
		})

		t.Run("Trip", func(t *testing.T) {
			id := fresh()
			in("closed → open", true, func(bt breakerTx) (bool, error) { return bt.Trip(id, cfg, 5) })
			if b := row(id); b.State != breaker.Open || b.OpenedAt == nil || b.FailureCount != 5 || b.Forced {
				t.Errorf("tripped: %+v", b)
			}
			in("lost: open already", false, func(bt breakerTx) (bool, error) { return bt.Trip(id, cfg, 6) })
			if b := row(id); b.FailureCount != 5 {
				t.Errorf("a lost trip wrote: %+v", b)
			}
		})

		t.Run("HalfOpen", func(t *testing.T) {
			id := fresh()
			opened := now.Add(-time.Minute)
			set(id, map[string]any{"state": breaker.Open, "opened_at": opened})
			at := *row(id).OpenedAt // as stored (and read back) on this database
			in("lost: opened at another time", false, func(bt breakerTx) (bool, error) { return bt.HalfOpen(id, at.Add(time.Second)) })
			in("open → half_open", true, func(bt breakerTx) (bool, error) { return bt.HalfOpen(id, at) })
			if b := row(id); b.State != breaker.HalfOpen || b.HalfOpenedAt == nil {
				t.Errorf("half-opened: %+v", b)
			}
			in("lost: half-open already", false, func(bt breakerTx) (bool, error) { return bt.HalfOpen(id, at) })
			forced := fresh()
			set(forced, map[string]any{"state": breaker.Open, "opened_at": opened, "forced": true})
			forcedAt := *row(forced).OpenedAt
			in("lost: forced open", false, func(bt breakerTx) (bool, error) { return bt.HalfOpen(forced, forcedAt) })
		})

		t.Run("Reopen", func(t *testing.T) {
			id := fresh()
			set(id, map[string]any{"state": breaker.HalfOpen, "half_opened_at": now})
			in("half_open → open", true, func(bt breakerTx) (bool, error) { return bt.Reopen(id) })
			if b := row(id); b.State != breaker.Open || b.HalfOpenedAt != nil || b.OpenedAt == nil {
				t.Errorf("reopened: %+v", b)
			}
			in("lost: not half-open", false, func(bt breakerTx) (bool, error) { return bt.Reopen(id) })
		})

		t.Run("Close", func(t *testing.T) {
			id := fresh()
			if _, err := bt.RecordFailure(id); err != nil {
				t.Fatal(err)
			}
			in("lost: closed already", false, func(bt breakerTx) (bool, error) { return bt.Close(id) })
			if failures(id) != 1 {
				t.Error("a lost close forgot the failures")
			}
			set(id, map[string]any{"state": breaker.HalfOpen, "half_opened_at": now})
			in("half_open → closed", true, func(bt breakerTx) (bool, error) { return bt.Close(id) })
			if b := row(id); b.State != breaker.Closed || b.SuccessCount != 1 || failures(id) != 0 {
				t.Errorf("closed: %+v, %d failures", b, failures(id))
			}
		})

		t.Run("Reset and ForceOpen", func(t *testing.T) {
			id := fresh()
			if _, err := bt.RecordFailure(id); err != nil {
				t.Fatal(err)
			}
			in("lost: another organization's", false, func(bt breakerTx) (bool, error) { return bt.ForceOpen(models.NewID(), id, "x") })
			in("any → open, forced", true, func(bt breakerTx) (bool, error) { return bt.ForceOpen(org.ID, id, "maintenance") })
			if b := row(id); b.State != breaker.Open || !b.Forced || b.Reason == nil || *b.Reason != "maintenance" {
				t.Errorf("forced: %+v", b)
			}
			in("lost: no such breaker", false, func(bt breakerTx) (bool, error) { return bt.Reset(org.ID, models.NewID(), "x") })
			in("any → closed", true, func(bt breakerTx) (bool, error) { return bt.Reset(org.ID, id, "done") })
			if b := row(id); b.State != breaker.Closed || b.Forced || b.OpenedAt != nil || failures(id) != 0 {
				t.Errorf("reset: %+v, %d failures", b, failures(id))
			}
		})

		// attempt makes an attempt of the execution in status at generation, leased until lease.
		attempt := func(status string, generation int, lease time.Time) *models.StepAttempt {
			t.Helper()
			a := models.StepAttempt{ID: models.NewID(), OrganizationID: org.ID, ExecutionID: ex.ID, StepID: models.NewID(), Attempt: 1, Status: status,
				Generation: generation, IdempotencyKey: models.NewID(), ScheduledAt: now, StartedAt: &now, LeaseExpiresAt: &lease, CreatedAt: now, UpdatedAt: now}
			if err := db.Conn(ctx).Create(&a).Error; err != nil {
				t.Fatal(err)
			}
			return &a
		}
		update := func(a *models.StepAttempt, upd map[string]any) {
			t.Helper()
			if err := db.Conn(ctx).Model(&models.StepAttempt{}).Where("id = ?", a.ID).Updates(upd).Error; err != nil {
				t.Fatal(err)
			}
		}

		t.Run("TakeTrial", func(t *testing.T) {
			id := fresh()
			set(id, map[string]any{"state": breaker.HalfOpen, "half_opened_at": now})
			lease := now.Add(time.Minute)
			a, b, c, d := attempt(models.StepRunning, 1, lease), attempt(models.StepRunning, 1, lease), attempt(models.StepRunning, 1, lease), attempt(models.StepRunning, 1, lease)
			take := func(name string, want bool, a *models.StepAttempt, at time.Time) {
				t.Helper()
				in(name, want, func(bt breakerTx) (bool, error) { bt.now = at; return bt.TakeTrial(id, 2, a) })
			}
			take("a takes slot 0", true, a, now)
			take("b takes slot 1", true, b, now)
			// Long past the reset timeout (10 s at least): the slots are still held.
			take("lost: every slot held by a trial still running", false, c, now.Add(50*time.Second))
			update(a, map[string]any{"status": models.StepSucceeded})
			take("a's end frees its slot", true, c, now)
			update(c, map[string]any{"status": models.StepPending, "generation": 2}) // handed back or reclaimed
			take("c's next generation frees its slot", true, d, now)
			take("lost: b and d hold both", false, attempt(models.StepRunning, 1, lease), now)
			take("b's lease has passed (its process died): its slot is free", true, attempt(models.StepRunning, 1, now.Add(2*time.Minute)), lease.Add(time.Second))
			var slots int64
			db.Conn(ctx).Model(&models.BreakerTrial{}).Where("breaker_id = ?", id).Count(&slots)
			if slots != 2 {
				t.Errorf("%d slot rows, want 2 (halfOpenRequests)", slots)
			}
			// A transaction that reads the holder as it was before its claim (PENDING at
			// the slot's generation) or not at all still finds the slot held.
			e := attempt(models.StepRunning, 1, lease)
			take("e takes the other slot (d's lease has passed too)", true, e, lease.Add(time.Second))
			update(e, map[string]any{"status": models.StepPending})
			take("lost: held by an attempt read as PENDING at its generation", false, attempt(models.StepRunning, 1, lease), now)
			if err := db.Conn(ctx).Model(&models.BreakerTrial{}).Where("breaker_id = ? AND attempt_id = ?", id, e.ID).
				Update("attempt_id", models.NewID()).Error; err != nil {
				t.Fatal(err)
			}
			take("lost: held by an attempt not found", false, attempt(models.StepRunning, 1, lease), now)
		})

		t.Run("ReleaseWaiting", func(t *testing.T) {
			id := fresh()
			waiting := make([]*models.StepAttempt, 3)
			for i := range waiting {
				waiting[i] = attempt(models.StepPending, 3, now)
				update(waiting[i], map[string]any{"waiting_breaker_id": id, "scheduled_at": now.Add(time.Duration(i) * time.Second),
					"started_at": nil, "lease_expires_at": nil})
			}
			other := attempt(models.StepPending, 1, now) // waits on no breaker
			update(other, map[string]any{"started_at": nil, "lease_expires_at": nil})
			jobs, more, err := bt.ReleaseWaiting(id, now, 0, 2)
			if err != nil || !more || len(jobs) != 2 {
				t.Fatalf("first batch: %+v more %v (%v)", jobs, more, err)
			}
			for i, j := range jobs {
				want := now.Add(time.Duration(i) * releaseSpacing)
				if j.AttemptID != waiting[i].ID || j.Generation != 4 || !j.RunAt.Equal(want) {
					t.Errorf("job %d: %+v, want %s at generation 4, %v", i, j, waiting[i].ID, want)
				}
			}
			// Lost: the last one moved on (its own job ran it) after it was read.
			stale := *waiting[2]
			update(waiting[2], map[string]any{"generation": 4})
			if jobs, err := bt.release(id, []models.StepAttempt{stale}, now, 2); err != nil || len(jobs) != 0 {
				t.Errorf("released an attempt that moved on: %+v (%v)", jobs, err)
			}
			jobs, more, err = bt.ReleaseWaiting(id, now, 2, 2)
			if err != nil || more || len(jobs) != 1 || jobs[0].AttemptID != waiting[2].ID || jobs[0].Generation != 5 || !jobs[0].RunAt.Equal(now.Add(2*releaseSpacing)) {
				t.Errorf("the rest, where the first batch left off: %+v more %v (%v)", jobs, more, err)
			}
			var left int64
			db.Conn(ctx).Model(&models.StepAttempt{}).Where("waiting_breaker_id = ?", id).Count(&left)
			var o models.StepAttempt
			db.Conn(ctx).First(&o, "id = ?", other.ID)
			if left != 0 || o.Generation != 1 {
				t.Errorf("%d still waiting; the attempt waiting on no breaker is at generation %d", left, o.Generation)
			}
		})
	})
}
