package engine

import (
	"context"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"gorm.io/gorm"

	"lifeline/models"
	"lifeline/services/classify"
	"lifeline/services/definition"
)

// The store of guarded transitions. Every change of state of an execution, attempt, dead
// letter, compensation, circuit breaker and trial slot is one named function here (and in
// transitions_*.go) that changes its row only from the states it expects (a guard in the
// WHERE clause: status and generation, or status alone where no generation exists), and
// reports when it lost: errLost, false, or an ECONFLICT naming what happened instead, as each
// function says. One function per transition for both databases: where the SQL must differ
// (PostgreSQL's single statements in a group commit), the difference is inside the function.
// Callers never write a state column themselves. TestTransitions runs each one, winning and
// losing, on SQLite and PostgreSQL.
//
// Two kinds: transitions owns its commit (a claim, an advance: one statement on PostgreSQL);
// stateTx changes rows in the caller's transaction, at now (the database clock read before
// it began), so that a state change and everything it implies commit together.

// transitions are the state changes that own their commit.
type transitions struct {
	db *models.DB
	// group commits single statements together (PostgreSQL; nil on SQLite).
	group *group
	// commit runs a transaction and queues the jobs it returns (Engine.commit).
	commit func(ctx context.Context, fn func(tx *gorm.DB, now time.Time) ([]Job, error)) error
}

// stateTx changes state in the transaction tx, at now: attempts, executions, replays and
// rollbacks here; dead letters, error records and failure groups through deadLetters(),
// errors() and groups(), each kind's transitions on a type of its own.
type stateTx struct {
	tx  *gorm.DB
	now time.Time
	// hold is Hooks.InTx when a test set it (nil: nothing happens).
	hold func(transition, id string)
}

// deadLetterTx changes dead letters and their input-change requests (transitions_dlq.go).
type deadLetterTx stateTx

// errorTx changes execution-error records (transitions_errors.go).
type errorTx stateTx

// groupTx changes failure groups (transitions_group.go).
type groupTx stateTx

func (s stateTx) deadLetters() deadLetterTx { return deadLetterTx(s) }
func (s stateTx) errors() errorTx           { return errorTx(s) }
func (s stateTx) groups() groupTx           { return groupTx(s) }

// ClaimAttempt is the claim: the attempt PENDING at generation and due (its scheduled time
// within dueTolerance of the database clock) becomes RUNNING, leased for lease, and its
// execution shows its step, RUNNING from PENDING; in one commit. It returns whether it won
// and the database time it compared the schedule with (the caller defers a job that came
// early). Lost (false, nil) when the attempt is not PENDING at generation or not due.
// PostgreSQL: one statement in a group commit, timed by now(); SQLite: a transaction of two
// statements, timed by the clock read before it.
func (t *transitions) ClaimAttempt(ctx context.Context, ex *models.Execution, a *models.StepAttempt, generation int, lease time.Duration) (bool, time.Time, error) {
	if t.group != nil {
		const q = `WITH cl AS (
  UPDATE step_executions SET status = @running, started_at = now(), lease_expires_at = now() + make_interval(secs => @lease), updated_at = now()
  WHERE id = @id AND status = @pending AND generation = @gen AND scheduled_at <= now() + make_interval(secs => @tolerance)
  RETURNING id),
exu AS (
  UPDATE workflow_executions SET status = CASE WHEN status = @expending THEN @exrunning ELSE status END,
    started_at = COALESCE(started_at, now()), current_step_id = @step, updated_at = now()
  WHERE id = @ex AND organization_id = @org AND EXISTS (SELECT 1 FROM cl))
SELECT now(), (SELECT count(*) FROM cl)`
		var now time.Time
		var n int
		err := t.group.queryRow(ctx, q, pgx.NamedArgs{
			"id": a.ID, "gen": generation, "running": models.StepRunning, "pending": models.StepPending,
			"lease": lease.Seconds(), "tolerance": dueTolerance.Seconds(),
			"expending": models.ExecPending, "exrunning": models.ExecRunning, "step": a.StepID, "ex": ex.ID, "org": ex.OrganizationID,
		}, &now, &n)
		if err != nil || n == 0 {
			return false, now.UTC(), err
		}
		now = now.UTC()
		markClaimed(ex, a, now, lease)
		return true, now, nil
	}
	now, err := t.db.Now(ctx)
	if err != nil {
		return false, now, err
	}
	if a.ScheduledAt.Sub(now) > dueTolerance {
		return false, now, nil
	}
	claimed := false
	err = t.db.Tx(ctx, func(tx *gorm.DB) error {
		res := tx.Exec(`UPDATE step_executions SET status = ?, started_at = ?, lease_expires_at = ?, updated_at = ?
  WHERE id = ? AND status = ? AND generation = ?`,
			models.StepRunning, now, now.Add(lease), now, a.ID, models.StepPending, generation)
		if res.Error != nil || res.RowsAffected == 0 {
			return res.Error
		}
		claimed = true
		err := tx.Exec(`UPDATE workflow_executions SET status = CASE WHEN status = ? THEN ? ELSE status END,
  started_at = COALESCE(started_at, ?), current_step_id = ?, updated_at = ? WHERE id = ? AND organization_id = ?`,
			models.ExecPending, models.ExecRunning, now, a.StepID, now, ex.ID, ex.OrganizationID).Error
		if err != nil {
			return err
		}
		markClaimed(ex, a, now, lease)
		return nil
	})
	return claimed, now, err
}

// success is what AdvanceAttempt records of a step that succeeded.
type success struct {
	ex         *models.Execution
	def        *definition.Definition
	a          *models.StepAttempt // RUNNING at generation, held by this worker
	generation int
	// nextID is the id the next step's attempt gets.
	nextID  string
	in, out []byte // the attempt's input and output, sealed
	// chain: the worker runs the next step itself when it is runnable at once.
	chain bool
	// delay and lease are the next step's (def.After(s.place())), if there is one.
	delay, lease time.Duration
	// took is how long the step's request took (its duration_us).
	took time.Duration
	// stoodFor: a is a fallback's attempt that stood in for this step ("" otherwise): the
	// sequence goes on after that step (place).
	stoodFor string
}

// place is the index of the step whose place in the sequence s's step holds: its own, or
// for a fallback the step it stood in for.
func (s *success) place() int {
	if s.stoodFor != "" {
		if i := s.def.Index(s.stoodFor); i >= 0 {
			return i
		}
	}
	return s.a.StepIndex
}

// oneStatement reports whether AdvanceAttempt records ex's step in one statement
// (PostgreSQL; not for a manual replay, whose end settles a dead letter and whose next
// steps may have run before): its next attempt's job is then queued after the commit.
func (t *transitions) oneStatement(ex *models.Execution) bool {
	return t.group != nil && ex.DeadLetterID == nil
}

// AdvanceAttempt records a succeeded attempt and moves its execution on, in one commit: the
// attempt RUNNING at generation becomes SUCCEEDED with its input and output; the step's open
// error record, after a retry, is resolved; the next step's attempt is created, claimed for
// this worker (RUNNING, leased by the database clock) when s.chain and the step is runnable
// now (then it is shown as the execution's current step only if it runs long: showAfter),
// else shown at once with its job; after the last step the execution ends (endStatus), and a
// manual replay's dead letter is resolved. It returns the next attempt (nil after the last
// step) and whether it was claimed, or errLost when the attempt was no longer RUNNING at
// generation (nothing is written).
//
// PostgreSQL writes it in one statement (oneStatement: its caller queues the next job after
// the commit); otherwise a transaction of several, with the jobs queued in it (SQLite) or
// right after it.
func (t *transitions) AdvanceAttempt(ctx context.Context, s *success) (next *models.StepAttempt, claimed bool, err error) {
	if t.oneStatement(s.ex) {
		return t.advanceOne(ctx, s)
	}
	ex, def, a := s.ex, s.def, s.a
	err = t.commit(ctx, func(tx *gorm.DB, now time.Time) ([]Job, error) {
		st := stateTx{tx: tx, now: now}
		if err := st.SucceedAttempt(a, s.generation, s.in, s.out, s.took); err != nil {
			return nil, err
		}
		// A step that recovers by retrying resolves its error record (a first attempt has none).
		if a.Attempt > 1 {
			if _, err := st.errors().ResolveRetried(ex, a.StepID); err != nil {
				return nil, err
			}
		}
		i := def.After(s.place())
		if i < 0 {
			if err := endExecution(st, ex, endStatus(def, s.place())); err != nil {
				return nil, err
			}
			return nil, st.deadLetters().ResolveReplayed(ex)
		}
		step := def.Steps[i]
		number, err := nextAttemptNumber(tx, ex, step.ID)
		if err != nil {
			return nil, err
		}
		na := newAttempt(ex, step, i, number, now.Add(s.delay))
		na.ID, na.CreatedAt, na.UpdatedAt = s.nextID, now, now
		// The next step is runnable now: claim it in this commit (RUNNING, leased by the
		// database clock) and run it in this worker, with no queue round trip. A crash
		// leaves a leased row the reconciler reclaims with the same idempotency key.
		claimed = s.chain && !na.ScheduledAt.After(now)
		if claimed {
			markClaimed(nil, &na, now, s.lease)
		}
		if err := models.CreateAttempt(tx, &na); err != nil {
			return nil, err
		}
		next = &na
		if claimed { // a claimed step is shown by showRunning
			return nil, nil
		}
		if err := st.ShowStep(ex.ID, step.ID); err != nil {
			return nil, err
		}
		return []Job{{AttemptID: na.ID, Generation: na.Generation, RunAt: na.ScheduledAt}}, nil
	})
	if err != nil {
		return nil, false, err
	}
	return next, claimed, nil
}

// advanceOne is AdvanceAttempt in one statement and one commit (PostgreSQL), with the
// database clock (now()) for every time: it writes what AdvanceAttempt's transaction writes
// for an execution that is not a manual replay (the next attempt is its step's first).
func (t *transitions) advanceOne(ctx context.Context, s *success) (next *models.StepAttempt, claimed bool, err error) {
	ex, def, a := s.ex, s.def, s.a
	args := pgx.NamedArgs{
		"id": a.ID, "gen": s.generation, "running": models.StepRunning, "succeeded": models.StepSucceeded,
		"in": models.JSON(s.in), "out": models.JSON(s.out), "org": ex.OrganizationID, "ex": ex.ID, "took": durationUs(s.took),
	}
	var q strings.Builder
	q.WriteString(`WITH fin AS (
  UPDATE step_executions SET status = @succeeded, input = @in, output = @out, finished_at = now(), lease_expires_at = NULL, updated_at = now(),
    duration_us = @took
  WHERE id = @id AND status = @running AND generation = @gen
  RETURNING id)`)
	if a.Attempt > 1 {
		// A step that recovers by retrying resolves its error record (a first attempt has none).
		args["step"], args["open"], args["resolved"] = a.StepID, openErrors, models.ErrResolved
		q.WriteString(`,
res AS (
  UPDATE workflow_execution_errors SET status = @resolved, resolution_type = 'auto_retry', resolved_at = now(), next_retry_at = NULL, updated_at = now()
  WHERE organization_id = @org AND execution_id = @ex AND step_id = @step AND status = ANY(@open) AND EXISTS (SELECT 1 FROM fin))`)
	}
	if i := def.After(s.place()); i >= 0 {
		step := def.Steps[i]
		claimed = s.chain && s.delay == 0
		na := newAttempt(ex, step, i, 1, time.Time{})
		na.ID = s.nextID
		next = &na
		status := models.StepPending
		if claimed {
			status = models.StepRunning
		}
		args["nid"], args["nstep"], args["nidx"], args["nstatus"], args["nkey"] = na.ID, na.StepID, na.StepIndex, status, na.IdempotencyKey
		args["delay"] = s.delay.Seconds()
		args["lease"] = s.lease.Seconds()
		args["claimed"] = claimed
		q.WriteString(`,
nxt AS (
  INSERT INTO step_executions (id, organization_id, execution_id, step_id, step_index, attempt, status, generation, reclaims,
    idempotency_key, scheduled_at, started_at, lease_expires_at, created_at, updated_at)
  SELECT @nid, @org, @ex, @nstep, @nidx, 1, @nstatus, 1, 0, @nkey, now() + make_interval(secs => @delay),
    CASE WHEN @claimed THEN now() END, CASE WHEN @claimed THEN now() + make_interval(secs => @lease) END, now(), now()
  FROM fin)`)
		if !claimed { // a claimed step is shown by showRunning
			q.WriteString(`,
exu AS (
  UPDATE workflow_executions SET current_step_id = @nstep, updated_at = now()
  WHERE id = @ex AND organization_id = @org AND EXISTS (SELECT 1 FROM fin))`)
		}
	} else {
		args["done"] = endStatus(def, s.place())
		q.WriteString(`,
exu AS (
  UPDATE workflow_executions SET status = @done, current_step_id = NULL, finished_at = now(), updated_at = now()
  WHERE id = @ex AND organization_id = @org AND EXISTS (SELECT 1 FROM fin))`)
	}
	q.WriteString(`
SELECT now() AS now, (SELECT count(*) FROM fin) AS done`)
	var now time.Time
	var done int
	if err := t.group.queryRow(ctx, q.String(), args, &now, &done); err != nil {
		return nil, false, err
	}
	if done == 0 {
		return nil, false, errLost
	}
	now = now.UTC()
	if next != nil {
		next.ScheduledAt = now.Add(s.delay)
		next.CreatedAt, next.UpdatedAt = now, now
		if claimed {
			markClaimed(nil, next, now, s.lease)
		}
	}
	return next, claimed, nil
}

// ShowRunning shows a step as its execution's current step while its attempt is RUNNING
// (a chained step that runs long: showAfter). Nothing when the attempt has ended.
func (t *transitions) ShowRunning(ctx context.Context, executionID, attemptID, stepID string) error {
	now, err := t.db.Now(ctx)
	if err != nil {
		return err
	}
	return t.db.Conn(ctx).Model(&models.Execution{}).
		Where("id = ? AND EXISTS (SELECT 1 FROM step_executions WHERE id = ? AND status = ?)", executionID, attemptID, models.StepRunning).
		Updates(map[string]any{"current_step_id": stepID, "updated_at": now}).Error
}

// Unwait clears what waiting on a breaker left on attempt a (RUNNING at a.Generation, held by
// this worker), which now runs. Lost (nothing written, nil) when it is no longer held.
func (t *transitions) Unwait(ctx context.Context, a *models.StepAttempt) error {
	a.WaitingBreakerID, a.ErrorType, a.ErrorCode, a.ErrorMessage = nil, nil, nil, nil
	return t.db.Conn(ctx).Model(&models.StepAttempt{}).Where("id = ? AND status = ? AND generation = ?", a.ID, models.StepRunning, a.Generation).
		Updates(map[string]any{"waiting_breaker_id": nil, "error_type": nil, "error_code": nil, "error_message": nil}).Error
}

// ShowStep writes the execution's current step (see showAfter). Not a state: it is written
// in the transaction of the attempt's transition, which is guarded.
func (s stateTx) ShowStep(executionID, stepID string) error {
	return s.tx.Model(&models.Execution{}).Where("id = ?", executionID).
		Updates(map[string]any{"current_step_id": stepID, "updated_at": s.now}).Error
}

// FinishAttempt ends the attempt RUNNING at generation in status (SUCCEEDED, RETRYING,
// FAILED, DLQ), finished now, with the fields given (input, output, error…; not its status).
// errLost when it is no longer RUNNING at generation: nothing is written.
func (s stateTx) FinishAttempt(a *models.StepAttempt, generation int, status string, fields map[string]any) error {
	upd := map[string]any{"status": status, "finished_at": s.now, "updated_at": s.now}
	for k, v := range fields {
		upd[k] = v
	}
	return fromRunning(s, a, generation, upd)
}

// SucceedAttempt is FinishAttempt in SUCCEEDED with the attempt's (sealed) input and output
// and how long its request took, its lease cleared: one fixed statement, for the step path.
// errLost when the attempt is no longer RUNNING at generation: nothing is written.
func (s stateTx) SucceedAttempt(a *models.StepAttempt, generation int, in, out []byte, took time.Duration) error {
	const q = `UPDATE step_executions SET status = ?, input = ?, output = ?, finished_at = ?, lease_expires_at = NULL,
  duration_us = ?, updated_at = ? WHERE id = ? AND status = ? AND generation = ?`
	res := s.tx.Exec(q, models.StepSucceeded, models.JSON(in), models.JSON(out), s.now, durationUs(took), s.now,
		a.ID, models.StepRunning, generation)
	if res.Error != nil {
		return res.Error
	}
	if res.RowsAffected == 0 {
		return errLost
	}
	return nil
}

// fromRunning writes upd to the attempt if it is RUNNING at generation; errLost if not.
func fromRunning(s stateTx, a *models.StepAttempt, generation int, upd map[string]any) error {
	res := s.tx.Model(&models.StepAttempt{}).
		Where("id = ? AND status = ? AND generation = ?", a.ID, models.StepRunning, generation).
		Updates(upd)
	if res.Error != nil {
		return res.Error
	}
	if res.RowsAffected == 0 {
		return errLost
	}
	return nil
}

// fromPending writes upd to the attempt if it is PENDING at generation; errLost if not.
func fromPending(s stateTx, id string, generation int, upd map[string]any) error {
	r := s.tx.Model(&models.StepAttempt{}).Where("id = ? AND status = ? AND generation = ?", id, models.StepPending, generation).Updates(upd)
	if r.Error != nil {
		return r.Error
	}
	if r.RowsAffected == 0 {
		return errLost
	}
	return nil
}

// ReleaseAttempt hands back the attempt RUNNING at generation (held by this worker): PENDING
// at the next generation, unsent, due at due, its step shown. errLost when it is no longer held.
func (s stateTx) ReleaseAttempt(a *models.StepAttempt, generation int, due time.Time) error {
	if err := fromRunning(s, a, generation, map[string]any{"status": models.StepPending, "generation": generation + 1,
		"started_at": nil, "lease_expires_at": nil, "scheduled_at": due, "updated_at": s.now}); err != nil {
		return err
	}
	return s.ShowStep(a.ExecutionID, a.StepID)
}

// ReclaimAttempt takes back attempt a, left RUNNING at a.Generation by a process that died:
// PENDING at the next generation, due now, one more reclaim, its step shown. errLost when it
// is no longer RUNNING at that generation (it finished, or another reconciler took it).
func (s stateTx) ReclaimAttempt(a *models.StepAttempt) error {
	if err := fromRunning(s, a, a.Generation, map[string]any{"status": models.StepPending, "generation": a.Generation + 1,
		"reclaims": a.Reclaims + 1, "started_at": nil, "lease_expires_at": nil, "scheduled_at": s.now, "updated_at": s.now}); err != nil {
		return err
	}
	return s.ShowStep(a.ExecutionID, a.StepID)
}

// ParkAttempt puts the attempt RUNNING at generation, which an open breaker refused, back to
// PENDING at the next generation for w.until, unsent (same attempt number and idempotency
// key), saying why, its step shown. errLost when it is no longer held.
func (s stateTx) ParkAttempt(a *models.StepAttempt, generation int, w *waitOnBreaker) error {
	if err := fromRunning(s, a, generation, map[string]any{"status": models.StepPending, "generation": generation + 1, "scheduled_at": w.until,
		"started_at": nil, "lease_expires_at": nil, "next_retry_at": w.until, "waiting_breaker_id": nullable(w.id),
		"error_type": string(classify.ExternalService), "error_code": CodeCircuitOpen, "error_message": w.Error(), "updated_at": s.now}); err != nil {
		return err
	}
	return s.ShowStep(a.ExecutionID, a.StepID)
}

// DeferAttempt moves the attempt PENDING at generation to the next generation, keeping its
// schedule (its job came early; a new one is queued for its time). errLost when it is not
// PENDING at generation.
func (s stateTx) DeferAttempt(a *models.StepAttempt, generation int) error {
	return fromPending(s, a.ID, generation, map[string]any{"generation": generation + 1, "updated_at": s.now})
}

// RequeueAttempt moves attempt a, PENDING at a.Generation without a live job, to the next
// generation, due now (any older job becomes a no-op). errLost when it is not PENDING at
// that generation.
func (s stateTx) RequeueAttempt(a *models.StepAttempt) error {
	return fromPending(s, a.ID, a.Generation, map[string]any{"generation": a.Generation + 1, "scheduled_at": s.now, "updated_at": s.now})
}

// FailUnrunnable ends the attempt PENDING at generation that can never run (its step is not
// in its execution's definition) FAILED (internal, STEP_MISSING, msg), and its execution
// FAILED at that step. errLost when it is not PENDING at generation: nothing is written.
func (s stateTx) FailUnrunnable(ex *models.Execution, a *models.StepAttempt, generation int, msg string) error {
	if err := fromPending(s, a.ID, generation, map[string]any{"status": models.StepFailed, "error_type": string(classify.Internal),
		"error_code": "STEP_MISSING", "error_message": msg, "finished_at": s.now, "updated_at": s.now}); err != nil {
		return err
	}
	return s.tx.Model(&models.Execution{}).Where("id = ? AND organization_id = ?", ex.ID, ex.OrganizationID).
		Updates(map[string]any{"status": models.ExecFailed, "current_step_id": a.StepID, "finished_at": s.now, "updated_at": s.now}).Error
}

// endExecution ends ex in status (SUCCEEDED, PARTIAL: endStatus) after its last step,
// finished now, in s. Written only in the transaction whose SucceedAttempt of that step won:
// that is its guard. (A function, not a method: stateTx keeps within 25 methods.)
func endExecution(s stateTx, ex *models.Execution, status string) error {
	return s.tx.Exec(`UPDATE workflow_executions SET status = ?, current_step_id = NULL, finished_at = ?, updated_at = ?
  WHERE id = ? AND organization_id = ?`, status, s.now, s.now, ex.ID, ex.OrganizationID).Error
}

// DeadLetterExecution moves ex to DLQ_PENDING at its failed step. Written only in the
// transaction whose FinishAttempt (DLQ) of that step won: that is its guard.
func (s stateTx) DeadLetterExecution(ex *models.Execution, stepID string) error {
	return s.tx.Model(&models.Execution{}).Where("id = ? AND organization_id = ?", ex.ID, ex.OrganizationID).
		Updates(map[string]any{"status": models.ExecDLQPending, "current_step_id": stepID, "finished_at": s.now, "updated_at": s.now}).Error
}

// endStatus is the status of an execution whose step i succeeded with no step after it:
// SUCCEEDED, or PARTIAL after a handler that names no next step (a failure was handled and
// the rest of the sequence did not run).
func endStatus(def *definition.Definition, i int) string {
	if def.Steps[i].Handler {
		return models.ExecPartial
	}
	return models.ExecSucceeded
}
