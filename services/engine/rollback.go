package engine

import (
	"context"
	"encoding/json"
	"slices"
	"time"

	"gorm.io/gorm"

	"lifeline/models"
	"lifeline/models/apperr"
	"lifeline/services/audit"
	"lifeline/services/definition"
)

// A rollback undoes the completed steps of a failed execution in reverse order (3, 2, 1): one
// compensation_actions row per completed step that declares a compensation, run one after the
// other, each durably (a River job per try, a lease while it runs, retries on its own policy,
// the idempotency key compensate:{execution}:{step}, sent as Idempotency-Key by api_call and
// committed with a database_operation's statement in the target database, so that statement
// runs once however often its compensation does).
// A compensation that fails for good does not stop the others unless the workflow says
// so (settings.rollbackStopOnFailure); the execution's rollback_status ends ROLLED_BACK or
// ROLLBACK_FAILED. A manual compensation waits for an admin to confirm it was done (or skip it).

// CompensationKey is the idempotency key of a step's compensation.
func CompensationKey(executionID, stepID string) string {
	return "compensate:" + executionID + ":" + stepID
}

// RollbackRequest asks for the rollback of a failed execution.
type RollbackRequest struct {
	OrganizationID string
	ExecutionID    string
	Actor          audit.Actor
}

// StartRollback does what Engine.StartRollback says.
func (e *rollbacks) StartRollback(ctx context.Context, r RollbackRequest) (*models.Execution, error) {
	ex, err := e.db.GetExecution(ctx, r.OrganizationID, r.ExecutionID)
	if err != nil {
		return nil, err
	}
	def, err := e.definitionFor(ctx, ex.OrganizationID, ex.WorkflowID, ex.WorkflowVersion)
	if err != nil {
		return nil, err
	}
	e.beforeTx(TransitionStartRollback, ex.ID)
	err = e.commit(ctx, func(tx *gorm.DB, now time.Time) ([]Job, error) {
		if err := tx.Where("id = ?", ex.ID).First(ex).Error; err != nil {
			return nil, err
		}
		// Said first, as the transition would (StartRollback decides, guarded).
		switch {
		case ex.RollbackStatus != nil:
			return nil, &apperr.Error{Code: apperr.ECONFLICT, Message: "rollback.already." + *ex.RollbackStatus}
		case ex.Status == models.ExecWaiting: // it waits for a person: cancel it first
			return nil, &apperr.Error{Code: apperr.ECONFLICT, Message: "rollback.waiting"}
		case !slices.Contains(rollbackable, ex.Status):
			return nil, &apperr.Error{Code: apperr.ECONFLICT, Message: "rollback.notfailed"}
		}
		return e.startRollbackTx(tx, ex, def, r.Actor, now)
	})
	if err != nil {
		return nil, err
	}
	return ex, nil
}

// errNothingToUndo: no completed step of the execution has a compensation to run.
var errNothingToUndo = &apperr.Error{Code: apperr.ECONFLICT, Message: "rollback.nothing"}

// startRollbackTx records the rollback of ex in tx (errNothingToUndo when no completed
// step has a compensation other than none): a row per completed step with a
// compensation, last step first, and the job of the first to run.
func (e *rollbacks) startRollbackTx(tx *gorm.DB, ex *models.Execution, def *definition.Definition, actor audit.Actor, now time.Time) ([]Job, error) {
	var attempts []models.StepAttempt
	if err := tx.Select("step_id, step_index, attempt, status").Where("execution_id = ?", ex.ID).Order("step_index, attempt").Find(&attempts).Error; err != nil {
		return nil, err
	}
	last := map[string]string{} // step → status of its latest attempt
	for _, a := range attempts {
		last[a.StepID] = a.Status
	}
	var rows []models.CompensationAction
	mask := e.masker(def)
	for i := len(def.Steps) - 1; i >= 0; i-- {
		st := def.Steps[i]
		if last[st.ID] != models.StepSucceeded || st.Compensation == nil {
			continue
		}
		id := models.NewID()
		cfg, _ := json.Marshal(st.Compensation)
		cfg, err := e.sealFound(cfg, tableCompensations, id, "compensation_config", mask)
		if err != nil {
			return nil, err
		}
		status, key := models.CompPending, CompensationKey(ex.ID, st.ID)
		if st.Compensation.CompensationType == definition.CompNone {
			status = models.CompSkipped
		}
		rows = append(rows, models.CompensationAction{ID: id, OrganizationID: ex.OrganizationID, WorkflowID: ex.WorkflowID,
			StepID: st.ID, StepIndex: i, Position: len(rows), CompensationType: st.Compensation.CompensationType,
			CompensationConfig: models.JSON(cfg), ExecutionID: &ex.ID, Status: &status, Generation: 1, IdempotencyKey: &key,
			CreatedAt: now, UpdatedAt: now})
	}
	undo := false
	for _, r := range rows {
		undo = undo || *r.Status == models.CompPending
	}
	if !undo {
		// No completed step has anything to undo: no rollback is recorded, so the execution's
		// outputs stay usable by a retry from the failed step.
		return nil, errNothingToUndo
	}
	if err := (stateTx{tx: tx, now: now}).StartRollback(ex); err != nil {
		return nil, err
	}
	if len(rows) > 0 {
		if err := tx.Create(&rows).Error; err != nil {
			return nil, err
		}
	}
	for i := range rows {
		// Every compensation has its audit entry: one of type none is skipped at once.
		if *rows[i].Status == models.CompSkipped {
			if err := compensationEntry(stateTx{tx: tx, now: now}, &rows[i], "compensation.skipped", audit.System, map[string]any{"reason": "none"}); err != nil {
				return nil, err
			}
		}
	}
	if err := audit.Record(tx, audit.Entry{OrganizationID: ex.OrganizationID, Actor: actor, Action: "execution.rollback",
		EntityType: "workflow_execution", EntityID: ex.ID, At: now, Details: map[string]any{"phase": "started", "compensations": len(rows)}}); err != nil {
		return nil, err
	}
	return e.nextCompensation(tx, ex.OrganizationID, ex.ID, -1, now)
}

// nextCompensation schedules the first compensation after position that has not run yet and
// returns its job; when none is left the rollback ends (or waits for a manual confirmation).
func (e *rollbacks) nextCompensation(tx *gorm.DB, orgID, executionID string, position int, now time.Time) ([]Job, error) {
	var next []models.CompensationAction
	if err := tx.Where("execution_id = ? AND position > ? AND status = ? AND scheduled_at IS NULL", executionID, position, models.CompPending).
		Order("position").Limit(1).Find(&next).Error; err != nil {
		return nil, err
	}
	if len(next) == 1 {
		c := next[0]
		if won, err := (stateTx{tx: tx, now: now}).ScheduleCompensation(&c); err != nil || !won {
			return nil, err
		}
		return []Job{{CompensationID: c.ID, Generation: c.Generation, RunAt: now}}, nil
	}
	return nil, e.finishRollback(tx, orgID, executionID, now)
}

// finishRollback ends the rollback when no compensation is left to run: ROLLED_BACK, or
// ROLLBACK_FAILED when one failed for good (or is still pending behind one that stopped it).
func (e *rollbacks) finishRollback(tx *gorm.DB, orgID, executionID string, now time.Time) error {
	var open, failed int64
	if err := tx.Model(&models.CompensationAction{}).Where("execution_id = ? AND status IN ?", executionID,
		[]string{models.CompRunning, models.CompWaiting}).Count(&open).Error; err != nil {
		return err
	}
	if open > 0 {
		return nil
	}
	if err := tx.Model(&models.CompensationAction{}).Where("execution_id = ? AND (status = ? OR (status = ? AND scheduled_at IS NULL))", executionID,
		models.CompFailed, models.CompPending).Count(&failed).Error; err != nil {
		return err
	}
	status := models.RolledBack
	if failed > 0 {
		status = models.RollbackFailed
	}
	if won, err := (stateTx{tx: tx, now: now}).FinishRollback(executionID, status); err != nil || !won {
		return err
	}
	return audit.Record(tx, audit.Entry{OrganizationID: orgID, Actor: audit.System, Action: "execution.rollback",
		EntityType: "workflow_execution", EntityID: executionID, At: now, Details: map[string]any{"phase": "finished", "status": status}})
}
