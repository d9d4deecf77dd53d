package engine

import (
	"context"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"lifeline/models"
	"lifeline/services/definition"
)

// advance records a succeeded attempt and moves its execution on, in one statement and one
// commit on PostgreSQL: the attempt becomes SUCCEEDED with its input and output; the step's
// open error record, after a retry, is resolved; the next step's first attempt is created,
// claimed for this worker (RUNNING, leased by the database clock) when chain is true and the
// step is runnable now (then it is shown as the execution's current step only if it runs
// long: see showAfter), else shown at once; after the last step the execution ends
// (endStatus). It writes exactly what the
// transaction of succeed writes on SQLite, with the database clock (now()) for every time.
//
// It returns the next attempt (nil after the last step) and whether it was claimed, or
// errLost when the attempt was no longer RUNNING at generation.
func (e *Engine) advance(ctx context.Context, ex *models.Execution, def *definition.Definition, a *models.StepAttempt, generation int,
	nextID string, sealedIn, sealedOut []byte, chain bool) (next *models.StepAttempt, claimed bool, err error) {
	args := pgx.NamedArgs{
		"id": a.ID, "gen": generation, "running": models.StepRunning, "succeeded": models.StepSucceeded,
		"in": models.JSON(sealedIn), "out": models.JSON(sealedOut), "org": ex.OrganizationID, "ex": ex.ID,
	}
	var q strings.Builder
	q.WriteString(`WITH fin AS (
  UPDATE step_executions SET status = @succeeded, input = @in, output = @out, finished_at = now(), lease_expires_at = NULL, updated_at = now()
  WHERE id = @id AND status = @running AND generation = @gen
  RETURNING id)`)
	if a.Attempt > 1 {
		// A step that recovers by retrying resolves its error record (a first attempt has none).
		args["step"], args["open"], args["resolved"] = a.StepID, []string{models.ErrPending, models.ErrRetrying}, models.ErrResolved
		q.WriteString(`,
res AS (
  UPDATE workflow_execution_errors SET status = @resolved, resolution_type = 'auto_retry', resolved_at = now(), next_retry_at = NULL, updated_at = now()
  WHERE organization_id = @org AND execution_id = @ex AND step_id = @step AND status = ANY(@open) AND EXISTS (SELECT 1 FROM fin))`)
	}
	if i := def.After(a.StepIndex); i >= 0 {
		step := def.Steps[i]
		delay := e.delayOf(step)
		claimed = chain && delay == 0
		na := newAttempt(ex, step, i, 1, time.Time{})
		na.ID = nextID
		next = &na
		status := models.StepPending
		if claimed {
			status = models.StepRunning
		}
		args["nid"], args["nstep"], args["nidx"], args["nstatus"], args["nkey"] = na.ID, na.StepID, na.StepIndex, status, na.IdempotencyKey
		args["delay"] = delay.Seconds()
		args["lease"] = e.leaseOf(step).Seconds()
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
		args["done"] = endStatus(def, a.StepIndex)
		q.WriteString(`,
exu AS (
  UPDATE workflow_executions SET status = @done, current_step_id = NULL, finished_at = now(), updated_at = now()
  WHERE id = @ex AND organization_id = @org AND EXISTS (SELECT 1 FROM fin))`)
	}
	q.WriteString(`
SELECT now() AS now, (SELECT count(*) FROM fin) AS done`)
	var now time.Time
	var done int
	if err := e.group.queryRow(ctx, q.String(), args, &now, &done); err != nil {
		return nil, false, err
	}
	if done == 0 {
		return nil, false, errLost
	}
	now = now.UTC()
	if next != nil {
		next.ScheduledAt = e.scheduleFor(def.Steps[next.StepIndex], now)
		next.CreatedAt, next.UpdatedAt = now, now
		if claimed {
			markClaimed(nil, next, now, e.leaseOf(def.Steps[next.StepIndex]))
		}
	}
	return next, claimed, nil
}

// claim is claimTx in one statement and one commit (PostgreSQL).
func (e *Engine) claim(ctx context.Context, ex *models.Execution, a *models.StepAttempt, generation int, lease time.Duration) (bool, time.Time, error) {
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
	err := e.group.queryRow(ctx, q, pgx.NamedArgs{
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

// endStatus is the status of an execution whose step i succeeded with no step after it:
// SUCCEEDED, or PARTIAL after a handler that names no next step (a failure was handled and
// the rest of the sequence did not run).
func endStatus(def *definition.Definition, i int) string {
	if def.Steps[i].Handler {
		return models.ExecPartial
	}
	return models.ExecSucceeded
}
