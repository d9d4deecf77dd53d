package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"

	"lifeline/models"
	"lifeline/services/audit"
	"lifeline/services/classify"
	"lifeline/services/retry"
)

// ReconcileResult counts what Reconcile repaired.
type ReconcileResult struct {
	// Reclaimed attempts were RUNNING past their lease (their process died); they are
	// PENDING again at a new generation, with the same attempt number and idempotency key.
	Reclaimed int
	// Requeued attempts were due PENDING attempts without a live job.
	Requeued int
	// Exhausted attempts were reclaimed MaxReclaims times without ever finishing; their
	// executions went to the DLQ (LEASE_EXHAUSTED).
	Exhausted int
}

// MaxReclaims: an attempt whose process died while running it this many times goes to the
// DLQ instead of running again (a step that kills its process must not loop forever).
const MaxReclaims = 3

// liveJobStates are River job states in which a job will still run its attempt.
const liveJobStates = "'available', 'scheduled', 'retryable', 'pending'"

// orphans returns due PENDING attempts (due more than pendingGrace ago) that have no live
// job: none waiting in the queue, and none taken by a worker within pendingGrace (a worker
// claims its attempt right after taking the job, so a job taken longer ago whose attempt
// is still PENDING belonged to a process that died).
func (e *maintenance) orphans(ctx context.Context, now time.Time, pendingGrace time.Duration) ([]models.StepAttempt, error) {
	grace := now.Add(-pendingGrace)
	var match, taken string
	if e.db.Dialect == models.Postgres {
		match = "j.args->>'attempt_id' = s.id::text AND (j.args->>'generation')::int = s.generation"
		taken = "j.attempted_at > ?"
	} else {
		match = "json_extract(j.args, '$.attempt_id') = s.id AND json_extract(j.args, '$.generation') = s.generation"
		taken = "j.attempted_at > strftime('%Y-%m-%d %H:%M:%f', ?)"
	}
	var due []models.StepAttempt
	err := e.db.Conn(ctx).Table("step_executions s").Select("s.*").
		Where("s.status = ? AND s.scheduled_at < ?", models.StepPending, grace).Where(models.NotQuarantined("step_executions", "s")).
		Where("NOT EXISTS (SELECT 1 FROM river_job j WHERE j.kind = 'run_attempt' AND "+match+
			" AND (j.state IN ("+liveJobStates+") OR (j.state = 'running' AND "+taken+")))", grace.UTC()).
		Order("s.scheduled_at").Limit(500).Find(&due).Error
	return due, err
}

// Reconcile does what Engine.Reconcile says.
func (e *maintenance) Reconcile(ctx context.Context) (ReconcileResult, error) {
	return e.reconcile(ctx, e.cfg.PendingGrace)
}

// reconcile is Reconcile, taking a due PENDING attempt whose job was taken pendingGrace ago
// and has not claimed it as orphaned.
func (e *maintenance) reconcile(ctx context.Context, pendingGrace time.Duration) (ReconcileResult, error) {
	var res ReconcileResult
	now, err := e.now(ctx)
	if err != nil {
		return res, err
	}
	var stuck []models.StepAttempt
	if err := e.db.Conn(ctx).Table("step_executions s").Select("s.*").Where("s.status = ? AND s.lease_expires_at < ?", models.StepRunning, now).
		Where(models.NotQuarantined("step_executions", "s")).Order("s.lease_expires_at").Limit(500).Find(&stuck).Error; err != nil {
		return res, err
	}
	// settled handles the outcome of settling one row: a lost race is nothing; the row's own
	// fault quarantines it and the pass goes on; the database's ends the pass.
	settled := func(a *models.StepAttempt, err error) (bool, error) {
		switch {
		case err == nil:
			return true, nil
		case errors.Is(err, errLost):
			return false, nil
		case rowFault(ctx, err):
			return false, e.quarantine(ctx, models.QuarantinedRow{Table: tableAttempts, RowID: a.ID, OrganizationID: a.OrganizationID, ExecutionID: &a.ExecutionID}, err)
		}
		return false, err
	}
	for i := range stuck {
		a := &stuck[i]
		if a.Reclaims+1 >= MaxReclaims {
			ok, err := settled(a, e.exhaust(ctx, a))
			if err != nil {
				return res, err
			}
			if ok {
				res.Exhausted++
			}
			continue
		}
		err := e.commit(ctx, func(tx *gorm.DB, _ time.Time) ([]Job, error) {
			if err := (stateTx{tx: tx, now: now}).ReclaimAttempt(a); err != nil {
				return nil, err
			}
			if err := audit.Record(tx, audit.Entry{OrganizationID: a.OrganizationID, Actor: audit.System, Action: "execution.reclaimed",
				EntityType: "workflow_execution", EntityID: a.ExecutionID, At: now,
				Details: map[string]any{"stepId": a.StepID, "attempt": a.Attempt, "idempotencyKey": a.IdempotencyKey, "reclaims": a.Reclaims + 1}}); err != nil {
				return nil, err
			}
			return []Job{{AttemptID: a.ID, Generation: a.Generation + 1, RunAt: now}}, nil
		})
		ok, err := settled(a, err)
		if err != nil {
			return res, err
		}
		if ok {
			res.Reclaimed++
			e.log.WarnContext(ctx, "reclaimed an attempt left running by a dead process", "execution_id", a.ExecutionID,
				"step_id", a.StepID, "attempt", a.Attempt, "reclaims", a.Reclaims+1)
		}
	}

	// A due attempt still PENDING after PendingGrace with no live job lost it: never
	// enqueued (a crash between commit and enqueue), or taken by a process that died before
	// claiming it (River then holds that job as running for a long time). Move it to the
	// next generation and enqueue that: any older job becomes a no-op. An attempt whose job
	// is still waiting in the queue (a backlog) is left alone, keeping its place.
	due, err := e.orphans(ctx, now, pendingGrace)
	if err != nil {
		return res, err
	}
	for i := range due {
		a := &due[i]
		err := e.commit(ctx, func(tx *gorm.DB, now time.Time) ([]Job, error) {
			if err := (stateTx{tx: tx, now: now}).RequeueAttempt(a); err != nil {
				return nil, err
			}
			return []Job{{AttemptID: a.ID, Generation: a.Generation + 1, RunAt: now}}, nil
		})
		ok, err := settled(a, err)
		if err != nil {
			return res, err
		}
		if ok {
			res.Requeued++
		}
	}
	if err := e.reconcileCompensations(ctx, now, pendingGrace); err != nil {
		return res, err
	}
	return res, e.foldOpenWork(ctx)
}

// exhaust sends an attempt that was reclaimed MaxReclaims times to the DLQ: its process
// died every time it ran it, so running it again would likely kill the next one too.
func (e *maintenance) exhaust(ctx context.Context, a *models.StepAttempt) error {
	var ex models.Execution
	if err := e.db.Conn(ctx).Where("organization_id = ? AND id = ?", a.OrganizationID, a.ExecutionID).First(&ex).Error; err != nil {
		return err
	}
	def, err := e.definitionFor(ctx, ex.OrganizationID, ex.WorkflowID, ex.WorkflowVersion)
	if err != nil {
		return err
	}
	if a.StepIndex >= len(def.Steps) {
		return fmt.Errorf("attempt %s: step %d is not in workflow %s v%d", a.ID, a.StepIndex, ex.WorkflowID, ex.WorkflowVersion)
	}
	c := classify.Result{Type: classify.Internal, Code: "LEASE_EXHAUSTED",
		Message: fmt.Sprintf("The process running this step stopped %d times before the step finished (its lease ran out each time); it was not run again.", MaxReclaims)}
	r := &attemptRun{ex: &ex, def: def, a: a, generation: a.Generation}
	var outcome Outcome
	err = e.commit(ctx, func(tx *gorm.DB, now time.Time) ([]Job, error) {
		policy, err := e.policyFor(tx, &ex, def, a.StepIndex)
		if err != nil {
			return nil, err
		}
		rec, created, err := e.errorRecord(tx, r, stepFailure{c: c, input: json.RawMessage(a.Input)}, policy, now)
		if err != nil {
			return nil, err
		}
		if created {
			if err := audit.Record(tx, audit.Entry{OrganizationID: ex.OrganizationID, Actor: audit.System, Action: "error.recorded",
				EntityType: "workflow_execution_error", EntityID: rec.ID, At: now,
				Details: map[string]any{"executionId": ex.ID, "stepId": a.StepID, "errorType": c.Type, "errorCode": c.Code, "message": c.Message}}); err != nil {
				return nil, err
			}
		}
		decision := retry.Decision{Retry: false, Reason: "lease exhausted"}
		upd := map[string]any{"reclaims": a.Reclaims + 1, "error_type": string(c.Type), "error_code": c.Code, "error_message": c.Message,
			"lease_expires_at": nil}
		var jobs []Job
		outcome, jobs, err = e.failures.failedForGood(stateTx{tx: tx, now: now}, r, upd, failure{rec, c, policy, decision, a.Attempt - 1, nil, models.NewID(), nil})
		return jobs, err
	})
	if err == nil && outcome == OutcomeDLQ {
		e.observer.DeadLettered(ex.WorkflowID, a.StepID, string(c.Type))
	}
	if err == nil {
		e.log.ErrorContext(ctx, "an attempt's process died too often; execution moved to the dead-letter queue",
			"execution_id", a.ExecutionID, "step_id", a.StepID, "attempt", a.Attempt, "reclaims", a.Reclaims+1)
	}
	return err
}

// reconcileCompensations repairs rollbacks stuck between the database and the queue:
// compensations RUNNING past their lease (their process died) run again at the next
// generation, with the same key; compensations due for longer than grace with no live job
// (never queued, or taken by a process that died) are queued again. One whose job still
// waits in the queue (a backlog) keeps its place: moving it to the back would starve the
// rollback. A row that cannot be settled is quarantined and the pass goes on.
func (e *maintenance) reconcileCompensations(ctx context.Context, now time.Time, grace time.Duration) error {
	var jobs []Job
	requeue := func(c *models.CompensationAction, transition func(context.Context, *models.CompensationAction, time.Time) (bool, error)) error {
		won, err := transition(ctx, c, now)
		switch {
		case err == nil && won:
			jobs = append(jobs, Job{CompensationID: c.ID, Generation: c.Generation + 1, RunAt: now})
		case rowFault(ctx, err):
			return e.quarantine(ctx, models.QuarantinedRow{Table: tableCompensations, RowID: c.ID, OrganizationID: c.OrganizationID, ExecutionID: c.ExecutionID}, err)
		case err != nil:
			return err
		}
		return nil
	}
	var stuck []models.CompensationAction
	if err := e.db.Conn(ctx).Table("compensation_actions c").Select("c.*").Where("c.status = ? AND c.lease_expires_at < ?", models.CompRunning, now).
		Where(models.NotQuarantined(tableCompensations, "c")).Limit(500).Find(&stuck).Error; err != nil {
		return err
	}
	for i := range stuck {
		if err := requeue(&stuck[i], e.store.ReclaimCompensation); err != nil {
			return err
		}
	}
	taken := now.Add(-grace)
	var match, takenSince string
	if e.db.Dialect == models.Postgres {
		match = "j.args->>'compensation_id' = c.id::text AND (j.args->>'generation')::int = c.generation"
		takenSince = "j.attempted_at > ?"
	} else {
		match = "json_extract(j.args, '$.compensation_id') = c.id AND json_extract(j.args, '$.generation') = c.generation"
		takenSince = "j.attempted_at > strftime('%Y-%m-%d %H:%M:%f', ?)"
	}
	var due []models.CompensationAction
	if err := e.db.Conn(ctx).Table("compensation_actions c").Select("c.*").Where("c.status = ? AND c.scheduled_at < ?", models.CompPending, taken).
		Where(models.NotQuarantined(tableCompensations, "c")).
		Where("NOT EXISTS (SELECT 1 FROM river_job j WHERE j.kind = 'compensate' AND "+match+
			" AND (j.state IN ("+liveJobStates+") OR (j.state = 'running' AND "+takenSince+")))", taken.UTC()).
		Order("c.scheduled_at").Limit(500).Find(&due).Error; err != nil {
		return err
	}
	for i := range due {
		if err := requeue(&due[i], e.store.RequeueCompensation); err != nil {
			return err
		}
	}
	return e.enq.Enqueue(ctx, jobs)
}

// recover runs when the database answers again after being unreachable: it releases the
// attempts this process abandoned (their results were lost with the outage; they run again
// with the same idempotency key), and runs the reconciler at once, taking every due PENDING
// attempt without a waiting job as orphaned: the jobs that workers took during the outage
// failed without River being able to record it.
func (e *maintenance) recover(ctx context.Context) {
	ctx = context.WithoutCancel(ctx)
	released := 0
	e.abandoned.Range(func(k, v any) bool {
		a := &models.StepAttempt{ID: k.(string)}
		if err := e.db.Conn(ctx).Where("id = ?", a.ID).First(a).Error; err != nil {
			if models.IsNotFound(err) {
				e.abandoned.Delete(k)
			}
			return true
		}
		outcome, err := e.attempts.release(ctx, &attemptRun{a: a, generation: v.(int)}, 0) // counted in the line below
		if err == nil {
			e.abandoned.Delete(k)
			if outcome == OutcomeReleased {
				released++
			}
		}
		return true
	})
	res, err := e.reconcile(ctx, 0)
	if err != nil && !errors.Is(err, context.Canceled) {
		e.log.WarnContext(ctx, "reconciling after the database came back failed; the periodic reconciler will repair it", "err", err)
		return
	}
	if released+res.Reclaimed+res.Requeued+res.Exhausted > 0 {
		e.log.InfoContext(ctx, "resumed the work the database outage interrupted", "released", released,
			"requeued", res.Requeued, "reclaimed", res.Reclaimed, "exhausted", res.Exhausted)
	}
}
