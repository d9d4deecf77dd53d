package engine

import (
	"context"
	"errors"
	"time"

	"gorm.io/gorm"

	"lifeline/models"
	"lifeline/services/audit"
)

// ReconcileResult counts what Reconcile repaired.
type ReconcileResult struct {
	// Reclaimed attempts were RUNNING past their lease (their process died); they are
	// PENDING again at a new generation, with the same attempt number and idempotency key.
	Reclaimed int
	// Requeued attempts were due PENDING attempts whose job may be missing.
	Requeued int
}

// Reconcile repairs executions stuck between the database and the queue (seed 001,
// "workflow reconciliation"). It is safe to run at any time, on any number of processes.
func (e *Engine) Reconcile(ctx context.Context) (ReconcileResult, error) {
	var res ReconcileResult
	now, err := e.now(ctx)
	if err != nil {
		return res, err
	}
	var stuck []models.StepAttempt
	if err := e.db.Conn(ctx).Where("status = ? AND lease_expires_at < ?", models.StepRunning, now).
		Order("lease_expires_at").Limit(500).Find(&stuck).Error; err != nil {
		return res, err
	}
	for i := range stuck {
		a := &stuck[i]
		err := e.commit(ctx, func(tx *gorm.DB, _ time.Time) ([]Job, error) {
			err := finishAttempt(tx, a, a.Generation, map[string]any{"status": models.StepPending, "generation": a.Generation + 1,
				"started_at": nil, "lease_expires_at": nil, "scheduled_at": now, "updated_at": now})
			if err != nil {
				return nil, err
			}
			if err := audit.Record(tx, audit.Entry{OrganizationID: a.OrganizationID, Actor: audit.System, Action: "execution.reclaimed",
				EntityType: "workflow_execution", EntityID: a.ExecutionID, At: now,
				Details: map[string]any{"stepId": a.StepID, "attempt": a.Attempt, "idempotencyKey": a.IdempotencyKey}}); err != nil {
				return nil, err
			}
			return []Job{{AttemptID: a.ID, Generation: a.Generation + 1, RunAt: now}}, nil
		})
		switch {
		case errors.Is(err, errLost):
		case err != nil:
			return res, err
		default:
			res.Reclaimed++
			e.log.WarnContext(ctx, "reclaimed an attempt left running by a dead process", "execution_id", a.ExecutionID,
				"step_id", a.StepID, "attempt", a.Attempt)
		}
	}

	// A due attempt still PENDING after PendingGrace has lost its job: never enqueued (a
	// crash between commit and enqueue), or taken by a process that died before claiming it
	// (River then holds that job as running for a long time). Move it to the next generation
	// and enqueue that: any older job becomes a no-op, and the new job is unique.
	var due []models.StepAttempt
	if err := e.db.Conn(ctx).Where("status = ? AND scheduled_at < ?", models.StepPending, now.Add(-e.cfg.PendingGrace)).
		Order("scheduled_at").Limit(500).Find(&due).Error; err != nil {
		return res, err
	}
	for i := range due {
		a := &due[i]
		err := e.commit(ctx, func(tx *gorm.DB, now time.Time) ([]Job, error) {
			r := tx.Model(&models.StepAttempt{}).Where("id = ? AND status = ? AND generation = ?", a.ID, models.StepPending, a.Generation).
				Updates(map[string]any{"generation": a.Generation + 1, "scheduled_at": now, "updated_at": now})
			if r.Error != nil {
				return nil, r.Error
			}
			if r.RowsAffected == 0 {
				return nil, errLost
			}
			return []Job{{AttemptID: a.ID, Generation: a.Generation + 1, RunAt: now}}, nil
		})
		switch {
		case errors.Is(err, errLost):
		case err != nil:
			return res, err
		default:
			res.Requeued++
		}
	}
	return res, nil
}
