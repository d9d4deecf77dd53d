package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"gorm.io/gorm"

	"lifeline/models"
	"lifeline/models/apperr"
	"lifeline/models/modeltest"
	"lifeline/services/definition"
	"lifeline/services/steps"
)

// fixture holds an organization and a workflow on one database, and makes the rows the
// transitions change.
type fixture struct {
	t   *testing.T
	ctx context.Context
	db  *models.DB
	e   *Engine
	org string
	wf  string
	at  time.Time // a minute ago: every row made is due
}

func newFixture(t *testing.T, db *models.DB) *fixture {
	ctx := context.Background()
	f := &fixture{t: t, ctx: ctx, db: db, e: New(db, steps.NewRegistry(), slog.New(slog.NewTextHandler(io.Discard, nil)), Config{Queue: &jobLog{}}),
		org: models.NewID(), wf: models.NewID(), at: time.Now().UTC().Add(-time.Minute)}
	f.create(&models.Organization{ID: f.org, Name: "Biuro"},
		&models.Workflow{ID: f.wf, OrganizationID: f.org, Name: "W", Version: 1, Definition: models.JSON(`{}`), UnknownErrors: "retry",
			WebhookToken: models.NewID(), WebhookSecret: "x", CreatedAt: f.at, UpdatedAt: f.at})
	return f
}

func (f *fixture) create(rows ...any) {
	f.t.Helper()
	for _, r := range rows {
		if err := f.db.Conn(f.ctx).Create(r).Error; err != nil {
			f.t.Fatal(err)
		}
	}
}

func (f *fixture) execution(status string, rollback *string) *models.Execution {
	ex := &models.Execution{ID: models.NewID(), OrganizationID: f.org, WorkflowID: f.wf, WorkflowVersion: 1, Status: status,
		Input: models.JSON(`{}`), TriggerType: "api", CorrelationID: models.NewID(), RollbackStatus: rollback, CreatedAt: f.at, UpdatedAt: f.at}
	f.create(ex)
	return ex
}

func (f *fixture) attempt(ex *models.Execution, status string, generation int) *models.StepAttempt {
	a := &models.StepAttempt{ID: models.NewID(), OrganizationID: f.org, ExecutionID: ex.ID, StepID: "a", Attempt: 1, Status: status,
		Generation: generation, IdempotencyKey: models.NewID(), ScheduledAt: f.at, CreatedAt: f.at, UpdatedAt: f.at}
	if status == models.StepRunning {
		until := time.Now().Add(time.Minute)
		a.StartedAt, a.LeaseExpiresAt = &f.at, &until
	}
	f.create(a)
	return a
}

func (f *fixture) deadLetter(ex *models.Execution, status string) *models.DeadLetter {
	rec := &models.ExecutionError{ID: models.NewID(), OrganizationID: f.org, ExecutionID: ex.ID, StepID: "a", ErrorType: "internal",
		ErrorMessage: "x", Status: models.ErrDeadLetter, CreatedAt: f.at, UpdatedAt: f.at}
	dl := &models.DeadLetter{ID: models.NewID(), OrganizationID: f.org, ErrorID: rec.ID, WorkflowID: f.wf, ExecutionID: ex.ID,
		OriginalInput: models.JSON(`{}`), StepStates: models.JSON(`[]`), FailedStepID: "a", Status: status, ExpiresAt: f.at, CreatedAt: f.at, UpdatedAt: f.at}
	f.create(rec, dl)
	return dl
}

func (f *fixture) compensation(ex *models.Execution, status string, generation int) *models.CompensationAction {
	key := CompensationKey(ex.ID, "a")
	c := &models.CompensationAction{ID: models.NewID(), OrganizationID: f.org, WorkflowID: f.wf, StepID: "a", CompensationType: "api_call",
		CompensationConfig: models.JSON(`{}`), ExecutionID: &ex.ID, Status: &status, Generation: generation, IdempotencyKey: &key,
		CreatedAt: f.at, UpdatedAt: f.at}
	f.create(c)
	return c
}

// in runs fn in a transaction at the database clock; a lost transition rolls it back.
func (f *fixture) in(fn func(st stateTx) (bool, error)) (bool, error) {
	now, err := f.db.Now(f.ctx)
	if err != nil {
		return false, err
	}
	won := false
	err = f.db.Tx(f.ctx, func(tx *gorm.DB) error {
		var err error
		won, err = fn(stateTx{tx: tx, now: now})
		if err == nil && !won {
			return errLost // nothing a lost transition did commits
		}
		return err
	})
	if errors.Is(err, errLost) {
		return false, nil
	}
	return won, err
}

// won reads a transition's error as won, or lost when it is errLost or ECONFLICT.
func won(err error) (bool, error) {
	var ae *apperr.Error
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, errLost), errors.As(err, &ae) && ae.Code == apperr.ECONFLICT:
		return false, nil
	}
	return false, err
}

func (f *fixture) attemptState(id string) string {
	var a models.StepAttempt
	if err := f.db.Conn(f.ctx).First(&a, "id = ?", id).Error; err != nil {
		f.t.Fatal(err)
	}
	s := fmt.Sprintf("%s/%d", a.Status, a.Generation)
	if a.Reclaims > 0 {
		s += fmt.Sprintf(" reclaims %d", a.Reclaims)
	}
	if a.WaitingBreakerID != nil {
		s += " waiting"
	}
	return s
}

func (f *fixture) executionState(id string) string {
	var ex models.Execution
	if err := f.db.Conn(f.ctx).First(&ex, "id = ?", id).Error; err != nil {
		f.t.Fatal(err)
	}
	s := ex.Status
	if ex.RollbackStatus != nil {
		s += " " + *ex.RollbackStatus
	}
	if ex.CurrentStepID != nil {
		s += " at " + *ex.CurrentStepID
	}
	return s
}

func (f *fixture) deadLetterState(id string) string {
	var dl models.DeadLetter
	if err := f.db.Conn(f.ctx).First(&dl, "id = ?", id).Error; err != nil {
		f.t.Fatal(err)
	}
	return dl.Status
}

func (f *fixture) compensationState(id string) string {
	var c models.CompensationAction
	if err := f.db.Conn(f.ctx).First(&c, "id = ?", id).Error; err != nil {
		f.t.Fatal(err)
	}
	s := fmt.Sprintf("%s/%d", *c.Status, c.Generation)
	if c.ScheduledAt != nil {
		s += " scheduled"
	}
	return s
}

// pick returns lost's value when lost, else win's.
func pick[T any](lost bool, win, lostValue T) T {
	if lost {
		return lostValue
	}
	return win
}

var (
	rollingBack    = models.RollingBack
	rolledBack     = models.RolledBack
	rollbackFailed = models.RollbackFailed
)

// transitionCase runs one transition from the state it expects (lost false) or from another
// (lost true), and returns whether it won and the state of the row it changes afterwards.
type transitionCase struct {
	name string
	// win and lost are the row's state after the winning case and after the lost one.
	win, lost string
	run       func(f *fixture, lost bool) (bool, string, error)
}

// TestTransitions is the conformance test of the store of guarded transitions: every
// transition wins from the state it expects, and loses (reporting it, writing nothing) from
// another: a row in an unexpected state, a generation moved on, already taken. On SQLite and
// PostgreSQL. Breakers and trial slots: TestBreakerTransitions. Execution-error records:
// errorTransitions.
func TestTransitions(t *testing.T) {
	t.Parallel()
	cases := append(attemptTransitions(), deadLetterTransitions()...)
	cases = append(cases, append(compensationTransitions(), errorTransitions()...)...)
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		f := newFixture(t, db)
		for _, c := range cases {
			for _, lost := range []bool{false, true} {
				won, state, err := c.run(f, lost)
				if err != nil {
					t.Fatalf("%s (lost case %v): %v", c.name, lost, err)
				}
				if want := pick(lost, c.win, c.lost); won == lost || state != want {
					t.Errorf("%s (lost case %v): won %v, state %q; want won %v, state %q", c.name, lost, won, state, !lost, want)
				}
			}
		}
	})
}

func attemptTransitions() []transitionCase {
	return []transitionCase{
		{"ClaimAttempt", "RUNNING/1 RUNNING at a", "PENDING/2 PENDING", func(f *fixture, lost bool) (bool, string, error) {
			ex := f.execution(models.ExecPending, nil)
			a := f.attempt(ex, models.StepPending, pick(lost, 1, 2)) // lost: the generation moved on
			won, _, err := f.e.store.ClaimAttempt(f.ctx, ex, a, 1, time.Minute)
			return won, f.attemptState(a.ID) + " " + f.executionState(ex.ID), err
		}},
		{"ClaimAttempt (not due)", "RUNNING/1", "PENDING/1", func(f *fixture, lost bool) (bool, string, error) {
			ex := f.execution(models.ExecRunning, nil)
			a := f.attempt(ex, models.StepPending, 1)
			if lost { // its time has not come by the database clock
				a.ScheduledAt = time.Now().Add(time.Hour)
				f.db.Conn(f.ctx).Model(a).Update("scheduled_at", a.ScheduledAt)
			}
			won, _, err := f.e.store.ClaimAttempt(f.ctx, ex, a, 1, time.Minute)
			return won, f.attemptState(a.ID), err
		}},
		{"AdvanceAttempt", "SUCCEEDED/1 RUNNING", "RUNNING/2 RUNNING", func(f *fixture, lost bool) (bool, string, error) {
			ex := f.execution(models.ExecRunning, nil)
			a := f.attempt(ex, models.StepRunning, pick(lost, 1, 2)) // lost: reclaimed and taken by another worker
			def := &definition.Definition{Steps: []definition.Step{{ID: "a", Type: "noop"}, {ID: "b", Type: "noop"}}}
			next, claimed, err := f.e.store.AdvanceAttempt(f.ctx, &success{ex: ex, def: def, a: a, generation: 1, nextID: models.NewID(),
				in: []byte(`{}`), out: []byte(`{}`), chain: true, lease: time.Minute})
			w, err := won(err)
			if w && (next == nil || !claimed || f.attemptState(next.ID) != "RUNNING/1") {
				return false, "", fmt.Errorf("next %+v claimed %v", next, claimed)
			}
			return w, f.attemptState(a.ID) + " " + f.executionState(ex.ID), err
		}},
		{"AdvanceAttempt (last step, a replay)", "SUCCEEDED/1 SUCCEEDED resolved", "RUNNING/2 PENDING processing", func(f *fixture, lost bool) (bool, string, error) {
			ex := f.execution(models.ExecPending, nil)
			dl := f.deadLetter(ex, models.DLQProcessing)
			f.db.Conn(f.ctx).Model(ex).Update("dead_letter_id", dl.ID)
			ex.DeadLetterID = &dl.ID
			a := f.attempt(ex, models.StepRunning, pick(lost, 1, 2))
			def := &definition.Definition{Steps: []definition.Step{{ID: "a", Type: "noop"}}}
			next, _, err := f.e.store.AdvanceAttempt(f.ctx, &success{ex: ex, def: def, a: a, generation: 1, nextID: models.NewID(), in: []byte(`{}`), out: []byte(`{}`)})
			w, err := won(err)
			if next != nil {
				return false, "", fmt.Errorf("a next attempt after the last step: %+v", next)
			}
			return w, f.attemptState(a.ID) + " " + f.executionState(ex.ID) + " " + f.deadLetterState(dl.ID), err
		}},
		{"FinishAttempt", "FAILED/1", "SUCCEEDED/1", func(f *fixture, lost bool) (bool, string, error) {
			a := f.attempt(f.execution(models.ExecRunning, nil), pick(lost, models.StepRunning, models.StepSucceeded), 1)
			w, err := f.in(func(st stateTx) (bool, error) {
				return won(st.FinishAttempt(a, 1, models.StepFailed, map[string]any{"error_code": "X"}))
			})
			return w, f.attemptState(a.ID), err
		}},
		{"SucceedAttempt", "SUCCEEDED/1 out {\"n\": 1} 250us unleased", "RUNNING/2 out  0us leased", func(f *fixture, lost bool) (bool, string, error) {
			a := f.attempt(f.execution(models.ExecRunning, nil), models.StepRunning, pick(lost, 1, 2)) // lost: taken by another worker
			f.db.Conn(f.ctx).Model(a).Update("lease_expires_at", time.Now().Add(time.Minute))
			w, err := f.in(func(st stateTx) (bool, error) {
				return won(st.SucceedAttempt(a, 1, []byte(`{"in": 1}`), []byte(`{"n": 1}`), 250*time.Microsecond))
			})
			var got models.StepAttempt
			if err := f.db.Conn(f.ctx).First(&got, "id = ?", a.ID).Error; err != nil {
				return false, "", err
			}
			us, lease := int64(0), "unleased"
			if got.DurationUs != nil {
				us = *got.DurationUs
			}
			if got.LeaseExpiresAt != nil {
				lease = "leased"
			}
			if w && (string(got.Input) != `{"in": 1}` || got.FinishedAt == nil) {
				return false, "", fmt.Errorf("stored input %s, finished %v", got.Input, got.FinishedAt)
			}
			return w, fmt.Sprintf("%s out %s %dus %s", f.attemptState(a.ID), got.Output, us, lease), err
		}},
		{"ReleaseAttempt", "PENDING/2", "RUNNING/3", func(f *fixture, lost bool) (bool, string, error) {
			a := f.attempt(f.execution(models.ExecRunning, nil), models.StepRunning, pick(lost, 1, 3))
			w, err := f.in(func(st stateTx) (bool, error) { return won(st.ReleaseAttempt(a, 1, st.now)) })
			return w, f.attemptState(a.ID), err
		}},
		{"ReclaimAttempt", "PENDING/2 reclaims 1", "PENDING/1", func(f *fixture, lost bool) (bool, string, error) {
			a := f.attempt(f.execution(models.ExecRunning, nil), pick(lost, models.StepRunning, models.StepPending), 1)
			w, err := f.in(func(st stateTx) (bool, error) { return won(st.ReclaimAttempt(a)) })
			return w, f.attemptState(a.ID), err
		}},
		{"ParkAttempt", "PENDING/2 waiting", "SUCCEEDED/1", func(f *fixture, lost bool) (bool, string, error) {
			a := f.attempt(f.execution(models.ExecRunning, nil), pick(lost, models.StepRunning, models.StepSucceeded), 1)
			w, err := f.in(func(st stateTx) (bool, error) {
				return won(st.ParkAttempt(a, 1, &waitOnBreaker{until: st.now.Add(time.Minute), id: models.NewID()}))
			})
			return w, f.attemptState(a.ID), err
		}},
		{"FallBack", "FAILED/1 circuit_open_fallback; fb PENDING/1 handles it; RUNNING at fb", "SUCCEEDED/1; no fb; RUNNING at a", func(f *fixture, lost bool) (bool, string, error) {
			ex := f.execution(models.ExecRunning, nil)
			a := f.attempt(ex, pick(lost, models.StepRunning, models.StepSucceeded), 1)
			f.db.Conn(f.ctx).Model(ex).Update("current_step_id", "a")
			fb := newAttempt(ex, definition.Step{ID: "fb"}, 1, 1, f.at)
			fb.HandlesAttemptID = &a.ID
			w, err := f.in(func(st stateTx) (bool, error) {
				return won(st.FallBack(a, 1, fallingBack{input: []byte(`{}`), message: "open", breakerID: models.NewID()}, &fb))
			})
			var got models.StepAttempt
			f.db.Conn(f.ctx).First(&got, "id = ?", a.ID)
			state := f.attemptState(a.ID)
			if code := deref(got.ErrorCode); code != "" {
				state += " " + code
			}
			var fbs []models.StepAttempt
			f.db.Conn(f.ctx).Where("execution_id = ? AND step_id = ?", ex.ID, "fb").Find(&fbs)
			switch {
			case len(fbs) == 0:
				state += "; no fb"
			case len(fbs) == 1 && fbs[0].HandlesAttemptID != nil && *fbs[0].HandlesAttemptID == a.ID:
				state += "; fb " + f.attemptState(fbs[0].ID) + " handles it"
			default:
				state += fmt.Sprintf("; fb %+v", fbs)
			}
			return w, state + "; " + f.executionState(ex.ID), err
		}},
		{"DeferAttempt", "PENDING/2", "RUNNING/1", func(f *fixture, lost bool) (bool, string, error) {
			a := f.attempt(f.execution(models.ExecRunning, nil), pick(lost, models.StepPending, models.StepRunning), 1)
			w, err := f.in(func(st stateTx) (bool, error) { return won(st.DeferAttempt(a, 1)) })
			return w, f.attemptState(a.ID), err
		}},
		{"RequeueAttempt", "PENDING/2", "PENDING/2", func(f *fixture, lost bool) (bool, string, error) {
			a := f.attempt(f.execution(models.ExecRunning, nil), models.StepPending, pick(lost, 1, 2))
			a.Generation = 1 // lost: read at 1, moved on since
			w, err := f.in(func(st stateTx) (bool, error) { return won(st.RequeueAttempt(a)) })
			return w, f.attemptState(a.ID), err
		}},
		{"FailUnrunnable", "FAILED/1 FAILED at a", "RUNNING/1 RUNNING", func(f *fixture, lost bool) (bool, string, error) {
			ex := f.execution(models.ExecRunning, nil)
			a := f.attempt(ex, pick(lost, models.StepPending, models.StepRunning), 1)
			w, err := f.in(func(st stateTx) (bool, error) { return won(st.FailUnrunnable(ex, a, 1, "gone")) })
			return w, f.attemptState(a.ID) + " " + f.executionState(ex.ID), err
		}},
		{"Unwait", "RUNNING/1", "RUNNING/2 waiting", func(f *fixture, lost bool) (bool, string, error) {
			ex := f.execution(models.ExecRunning, nil)
			a := f.attempt(ex, models.StepRunning, pick(lost, 1, 2))
			b := models.NewID()
			f.db.Conn(f.ctx).Model(a).Update("waiting_breaker_id", b)
			a.Generation, a.WaitingBreakerID = 1, &b
			err := f.e.store.Unwait(f.ctx, a)
			state := f.attemptState(a.ID)
			return state == "RUNNING/1", state, err
		}},
		{"ShowRunning", "RUNNING at b", "RUNNING", func(f *fixture, lost bool) (bool, string, error) {
			ex := f.execution(models.ExecRunning, nil)
			a := f.attempt(ex, pick(lost, models.StepRunning, models.StepSucceeded), 1)
			err := f.e.store.ShowRunning(f.ctx, ex.ID, a.ID, "b")
			state := f.executionState(ex.ID)
			return state != "RUNNING", state, err
		}},
		{"DeadLetterExecution (guarded by FinishAttempt in its transaction)", "DLQ_PENDING at a", "RUNNING", func(f *fixture, lost bool) (bool, string, error) {
			ex := f.execution(models.ExecRunning, nil)
			a := f.attempt(ex, pick(lost, models.StepRunning, models.StepSucceeded), 1)
			w, err := f.in(func(st stateTx) (bool, error) {
				if err := st.FinishAttempt(a, 1, models.StepDLQ, nil); err != nil {
					return won(err)
				}
				return won(st.DeadLetterExecution(ex, a.StepID))
			})
			return w, f.executionState(ex.ID), err
		}},
	}
}

func deadLetterTransitions() []transitionCase {
	return []transitionCase{
		{"StartReplay", "PENDING", "DLQ_PENDING ROLLING_BACK", func(f *fixture, lost bool) (bool, string, error) {
			ex := f.execution(models.ExecDLQPending, pick(lost, nil, &rollingBack)) // lost: a rollback started first
			w, err := f.in(func(st stateTx) (bool, error) {
				return won(st.StartReplay(ex, map[string]any{"status": models.ExecPending, "updated_at": st.now}))
			})
			return w, f.executionState(ex.ID), err
		}},
		{"StartReplay (not failed)", "PENDING", "RUNNING", func(f *fixture, lost bool) (bool, string, error) {
			ex := f.execution(pick(lost, models.ExecFailed, models.ExecRunning), nil) // lost: a replay runs it already
			w, err := f.in(func(st stateTx) (bool, error) {
				return won(st.StartReplay(ex, map[string]any{"status": models.ExecPending, "updated_at": st.now}))
			})
			return w, f.executionState(ex.ID), err
		}},
		{"EndReplaced", "FAILED", "RUNNING", func(f *fixture, lost bool) (bool, string, error) {
			ex := f.execution(pick(lost, models.ExecDLQPending, models.ExecRunning), nil)
			w, err := f.in(func(st stateTx) (bool, error) { return won(st.EndReplaced(ex)) })
			return w, f.executionState(ex.ID), err
		}},
		{"StartRollback", "DLQ_PENDING ROLLING_BACK", "DLQ_PENDING ROLLED_BACK", func(f *fixture, lost bool) (bool, string, error) {
			ex := f.execution(models.ExecDLQPending, pick(lost, nil, &rolledBack)) // lost: rolled back already
			w, err := f.in(func(st stateTx) (bool, error) { return won(st.StartRollback(ex)) })
			return w, f.executionState(ex.ID), err
		}},
		{"StartRollback (replaying)", "FAILED ROLLING_BACK", "PENDING", func(f *fixture, lost bool) (bool, string, error) {
			ex := f.execution(pick(lost, models.ExecFailed, models.ExecPending), nil) // lost: a replay started first
			w, err := f.in(func(st stateTx) (bool, error) { return won(st.StartRollback(ex)) })
			return w, f.executionState(ex.ID), err
		}},
		{"FinishRollback", "DLQ_PENDING ROLLED_BACK", "DLQ_PENDING ROLLBACK_FAILED", func(f *fixture, lost bool) (bool, string, error) {
			ex := f.execution(models.ExecDLQPending, pick(lost, &rollingBack, &rollbackFailed))
			w, err := f.in(func(st stateTx) (bool, error) { return st.FinishRollback(ex.ID, models.RolledBack) })
			return w, f.executionState(ex.ID), err
		}},
		{"ResumeRollback", "DLQ_PENDING ROLLING_BACK", "DLQ_PENDING ROLLED_BACK", func(f *fixture, lost bool) (bool, string, error) {
			ex := f.execution(models.ExecDLQPending, pick(lost, &rollbackFailed, &rolledBack))
			w, err := f.in(func(st stateTx) (bool, error) { return st.ResumeRollback(ex.ID) })
			return w, f.executionState(ex.ID), err
		}},
		{"ClaimDeadLetter", models.DLQProcessing, models.DLQResolved, func(f *fixture, lost bool) (bool, string, error) {
			dl := f.deadLetter(f.execution(models.ExecDLQPending, nil), pick(lost, models.DLQPending, models.DLQResolved))
			w, err := f.in(func(st stateTx) (bool, error) {
				return won(st.deadLetters().ClaimDeadLetter(dl, models.DLQProcessing, nil))
			})
			return w, f.deadLetterState(dl.ID), err
		}},
		{"ReturnDeadLetter", models.DLQPending, models.DLQSkipped, func(f *fixture, lost bool) (bool, string, error) {
			dl := f.deadLetter(f.execution(models.ExecDLQPending, nil), pick(lost, models.DLQProcessing, models.DLQSkipped))
			w, err := f.in(func(st stateTx) (bool, error) { return st.deadLetters().ReturnDeadLetter(dl.ID, dl) })
			return w, f.deadLetterState(dl.ID), err
		}},
		{"ResolveReplayed", models.DLQResolved, models.DLQPending, func(f *fixture, lost bool) (bool, string, error) {
			ex := f.execution(models.ExecSucceeded, nil)
			dl := f.deadLetter(ex, pick(lost, models.DLQProcessing, models.DLQPending))
			ex.DeadLetterID = &dl.ID
			_, err := f.in(func(st stateTx) (bool, error) { return true, st.deadLetters().ResolveReplayed(ex) })
			state := f.deadLetterState(dl.ID)
			return state == models.DLQResolved, state, err
		}},
		{"FailDeadLettered", "FAILED", "PENDING", func(f *fixture, lost bool) (bool, string, error) {
			ex := f.execution(pick(lost, models.ExecDLQPending, models.ExecPending), nil)
			w, err := f.in(func(st stateTx) (bool, error) { return st.deadLetters().FailDeadLettered(ex.ID) })
			return w, f.executionState(ex.ID), err
		}},
		{"ExpireDeadLetters", models.DLQExpired, models.DLQProcessing, func(f *fixture, lost bool) (bool, string, error) {
			dl := f.deadLetter(f.execution(models.ExecDLQPending, nil), pick(lost, models.DLQPending, models.DLQProcessing))
			w, err := f.in(func(st stateTx) (bool, error) {
				expired, err := st.deadLetters().ExpireDeadLetters([]string{dl.ID})
				return len(expired) == 1, err
			})
			return w, f.deadLetterState(dl.ID), err
		}},
	}
}

func compensationTransitions() []transitionCase {
	comp := func(run func(f *fixture, c *models.CompensationAction) (bool, error), status string, generation int, lostStatus string, lostGeneration int) func(f *fixture, lost bool) (bool, string, error) {
		return func(f *fixture, lost bool) (bool, string, error) {
			c := f.compensation(f.execution(models.ExecDLQPending, &rollingBack), pick(lost, status, lostStatus), pick(lost, generation, lostGeneration))
			c.Generation = generation // lost: read at generation, moved on since
			w, err := run(f, c)
			return w, f.compensationState(c.ID), err
		}
	}
	now := func(f *fixture) time.Time { n, _ := f.db.Now(f.ctx); return n }
	return []transitionCase{
		{"ClaimCompensation", "running/1", "pending/2", comp(func(f *fixture, c *models.CompensationAction) (bool, error) {
			return f.e.store.ClaimCompensation(f.ctx, c, 1, time.Minute, now(f))
		}, models.CompPending, 1, models.CompPending, 2)},
		{"ReleaseCompensation", "pending/2", "completed/1", comp(func(f *fixture, c *models.CompensationAction) (bool, error) {
			return f.e.store.ReleaseCompensation(f.ctx, c, 1, now(f))
		}, models.CompRunning, 1, models.CompCompleted, 1)},
		{"ReclaimCompensation", "pending/2 scheduled", "running/2", comp(func(f *fixture, c *models.CompensationAction) (bool, error) {
			return f.e.store.ReclaimCompensation(f.ctx, c, now(f))
		}, models.CompRunning, 1, models.CompRunning, 2)},
		{"RequeueCompensation", "pending/2 scheduled", "running/1", comp(func(f *fixture, c *models.CompensationAction) (bool, error) {
			return f.e.store.RequeueCompensation(f.ctx, c, now(f))
		}, models.CompPending, 1, models.CompRunning, 1)},
		{"AwaitConfirmation", "waiting/1", "pending/2", comp(func(f *fixture, c *models.CompensationAction) (bool, error) {
			return f.in(func(st stateTx) (bool, error) { return st.AwaitConfirmation(c, 1) })
		}, models.CompPending, 1, models.CompPending, 2)},
		{"FinishCompensation", "completed/1", "pending/2", comp(func(f *fixture, c *models.CompensationAction) (bool, error) {
			return f.in(func(st stateTx) (bool, error) { return st.FinishCompensation(c, 1, models.CompCompleted, nil) })
		}, models.CompRunning, 1, models.CompPending, 2)},
		{"FinishCompensation (retry)", "pending/2 scheduled", "failed/1", comp(func(f *fixture, c *models.CompensationAction) (bool, error) {
			return f.in(func(st stateTx) (bool, error) {
				return st.FinishCompensation(c, 1, models.CompPending, map[string]any{"scheduled_at": st.now})
			})
		}, models.CompRunning, 1, models.CompFailed, 1)},
		{"ScheduleCompensation", "pending/1 scheduled", "skipped/1", comp(func(f *fixture, c *models.CompensationAction) (bool, error) {
			return f.in(func(st stateTx) (bool, error) { return st.ScheduleCompensation(c) })
		}, models.CompPending, 1, models.CompSkipped, 1)},
		{"ActOnCompensation (retry)", "pending/2 scheduled", "waiting/1", comp(func(f *fixture, c *models.CompensationAction) (bool, error) {
			return f.in(func(st stateTx) (bool, error) { return st.ActOnCompensation(c, "retry", nil) })
		}, models.CompFailed, 1, models.CompWaiting, 1)},
		{"ActOnCompensation (confirm)", "completed/1", "failed/1", comp(func(f *fixture, c *models.CompensationAction) (bool, error) {
			return f.in(func(st stateTx) (bool, error) { return st.ActOnCompensation(c, "confirm", nil) })
		}, models.CompWaiting, 1, models.CompFailed, 1)},
		{"ActOnCompensation (skip)", "skipped/1", "pending/2", comp(func(f *fixture, c *models.CompensationAction) (bool, error) {
			return f.in(func(st stateTx) (bool, error) { return st.ActOnCompensation(c, "skip", nil) })
		}, models.CompPending, 1, models.CompPending, 2)},
	}
}
