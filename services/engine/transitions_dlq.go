package engine

import (
	"errors"
	"maps"

	"lifeline/models"
	"lifeline/models/apperr"
	"lifeline/services/audit"
)

// Transitions of dead letters and of the executions they are about (replay, settle,
// rollback): see transitions.go.

// replayable are the statuses a replay in place starts from.
var replayable = []string{models.ExecDLQPending, models.ExecFailed}

// rollbackable are the statuses a rollback starts from.
var rollbackable = []string{models.ExecDLQPending, models.ExecFailed}

// errRolledBack: the execution's completed steps were (or are being) undone.
var errRolledBack = apperr.Errorf(apperr.ECONFLICT, "This execution was rolled back: its completed steps were undone and their outputs cannot be reused. Retry the entire workflow instead.")

// StartReplay changes ex (upd) only while it is dead-lettered or failed and no rollback has
// started on it, and is ECONFLICT (errRolledBack, or the status it has now) when it lost to
// another change, a rollback started at the same moment included.
func (s stateTx) StartReplay(ex *models.Execution, upd map[string]any) error {
	r := s.tx.Model(&models.Execution{}).Where("id = ? AND organization_id = ? AND rollback_status IS NULL AND status IN ?",
		ex.ID, ex.OrganizationID, replayable).Updates(upd)
	if r.Error != nil || r.RowsAffected == 1 {
		return r.Error
	}
	var cur models.Execution
	if err := s.tx.Select("status, rollback_status").Where("id = ?", ex.ID).First(&cur).Error; err != nil {
		return err
	}
	if cur.RollbackStatus != nil {
		return errRolledBack
	}
	return apperr.Errorf(apperr.ECONFLICT, "The execution is %s now; it can be replayed only when it has failed.", cur.Status)
}

// EndReplaced ends ex FAILED, dead-lettered or failed, when a full retry replaces it with a
// new execution; ECONFLICT (the status it has now) when it is neither any more.
func (s stateTx) EndReplaced(ex *models.Execution) error {
	r := s.tx.Model(&models.Execution{}).Where("id = ? AND organization_id = ? AND status IN ?", ex.ID, ex.OrganizationID, replayable).
		Updates(map[string]any{"status": models.ExecFailed, "updated_at": s.now})
	if r.Error != nil || r.RowsAffected == 1 {
		return r.Error
	}
	return apperr.Errorf(apperr.ECONFLICT, "The execution is no longer failed; it was not retried.")
}

// StartRollback makes ex ROLLING_BACK only while it is dead-lettered or failed (not
// replaying) and no rollback has started on it; otherwise ECONFLICT
// (rollback.already.<status>, or rollback.notfailed), a replay started at the same moment
// included.
func (s stateTx) StartRollback(ex *models.Execution) error {
	rolling := models.RollingBack
	r := s.tx.Model(&models.Execution{}).Where("id = ? AND organization_id = ? AND rollback_status IS NULL AND status IN ?",
		ex.ID, ex.OrganizationID, rollbackable).Updates(map[string]any{"rollback_status": rolling, "updated_at": s.now})
	if r.Error != nil {
		return r.Error
	}
	if r.RowsAffected == 1 {
		ex.RollbackStatus = &rolling
		return nil
	}
	var cur models.Execution
	if err := s.tx.Select("status, rollback_status").Where("id = ?", ex.ID).First(&cur).Error; err != nil {
		return err
	}
	if cur.RollbackStatus != nil {
		return &apperr.Error{Code: apperr.ECONFLICT, Message: "rollback.already." + *cur.RollbackStatus}
	}
	if cur.Status == models.ExecWaiting {
		return &apperr.Error{Code: apperr.ECONFLICT, Message: "rollback.waiting"}
	}
	return &apperr.Error{Code: apperr.ECONFLICT, Message: "rollback.notfailed"}
}

// FinishRollback ends the rollback of the execution: ROLLING_BACK → status (ROLLED_BACK or
// ROLLBACK_FAILED). Lost (false) when it is not rolling back (another commit ended it first).
func (s stateTx) FinishRollback(executionID, status string) (bool, error) {
	r := s.tx.Model(&models.Execution{}).Where("id = ? AND rollback_status = ?", executionID, models.RollingBack).
		Updates(map[string]any{"rollback_status": status, "updated_at": s.now})
	return r.RowsAffected == 1, r.Error
}

// ResumeRollback lets a rollback that failed go on after an admin acted on a compensation:
// ROLLBACK_FAILED → ROLLING_BACK. Lost (false) when it had not failed (it is still running).
func (s stateTx) ResumeRollback(executionID string) (bool, error) {
	r := s.tx.Model(&models.Execution{}).Where("id = ? AND rollback_status = ?", executionID, models.RollbackFailed).
		Updates(map[string]any{"rollback_status": models.RollingBack, "updated_at": s.now})
	return r.RowsAffected == 1, r.Error
}

// ClaimDeadLetter moves a pending dead letter to status (processing for a replay, resolved or
// skipped by hand), with the fields given: of two people acting at once, one wins; the other
// gets ECONFLICT naming what happened (dlq.conflict.<status>).
func (s deadLetterTx) ClaimDeadLetter(dl *models.DeadLetter, status string, fields map[string]any) error {
	upd := map[string]any{"status": status, "updated_at": s.now}
	for k, v := range fields {
		upd[k] = v
	}
	r := s.tx.Model(&models.DeadLetter{}).Where("id = ? AND status = ?", dl.ID, models.DLQPending).Updates(upd)
	if r.Error != nil {
		return r.Error
	}
	if r.RowsAffected == 1 {
		return stateTx(s).groups().movedInGroup(dl.ID, models.DLQPending, status)
	}
	var cur models.DeadLetter
	if err := s.tx.Select("status").Where("id = ?", dl.ID).First(&cur).Error; err != nil {
		return err
	}
	return &apperr.Error{Code: apperr.ECONFLICT, Message: "dlq.conflict." + cur.Status}
}

// ReturnDeadLetter makes the dead letter id a failed manual replay served pending again, with
// the new failure (dl's fields): processing → pending. Lost (false) when it is not processing.
// Its group's counts are ReturnToGroup's, which calls it.
func (s deadLetterTx) ReturnDeadLetter(id string, dl *models.DeadLetter) (bool, error) {
	upd := map[string]any{
		"error_id": dl.ErrorID, "execution_id": dl.ExecutionID, "original_input": dl.OriginalInput, "step_states": dl.StepStates,
		"failed_step_id": dl.FailedStepID, "status": models.DLQPending, "expires_at": dl.ExpiresAt, "subject": dl.Subject,
		"error_type": dl.ErrorType, "reason": dl.Reason, "retry_count": dl.RetryCount, "search_text": dl.SearchText, "group_id": dl.GroupID,
		"updated_at": s.now}
	maps.Copy(upd, dl.About.Columns()) // an edited input may have moved it to another period
	r := s.tx.Model(&models.DeadLetter{}).Where("id = ? AND status = ?", id, models.DLQProcessing).Updates(upd)
	return r.RowsAffected == 1, r.Error
}

// RecordReplay names the execution a replay of the dead letter runs. Not a state: written in
// the transaction whose ClaimDeadLetter won.
func (s deadLetterTx) RecordReplay(dl *models.DeadLetter, executionID string) error {
	return s.tx.Model(&models.DeadLetter{}).Where("id = ?", dl.ID).Update("replay_execution_id", executionID).Error
}

// ResolveReplayed settles the dead letter a manual replay of ex served when ex succeeds:
// processing → resolved, its error record (dead_letter) resolved (manual_retry), audited.
// Nothing when ex is no replay, or its dead letter is not processing (nil error).
func (s deadLetterTx) ResolveReplayed(ex *models.Execution) error {
	if ex.DeadLetterID == nil {
		return nil
	}
	var dl models.DeadLetter
	err := s.tx.Where("id = ? AND status = ?", *ex.DeadLetterID, models.DLQProcessing).First(&dl).Error
	if models.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	r := s.tx.Model(&models.DeadLetter{}).Where("id = ? AND status = ?", dl.ID, models.DLQProcessing).
		Updates(map[string]any{"status": models.DLQResolved, "resolved_at": s.now, "updated_at": s.now})
	if r.Error != nil || r.RowsAffected == 0 {
		return r.Error
	}
	if err := stateTx(s).groups().movedInGroup(dl.ID, models.DLQProcessing, models.DLQResolved); err != nil {
		return err
	}
	// The record is dead-lettered with its dead letter; one already resolved is left as it is.
	if err := stateTx(s).errors().SettleError(dl.ErrorID, "manual_retry", nil, nil); err != nil && !errors.Is(err, errLost) {
		return err
	}
	return audit.Record(s.tx, audit.Entry{OrganizationID: dl.OrganizationID, Actor: audit.System, Action: "dlq.resolved",
		EntityType: "dead_letter_queue", EntityID: dl.ID, At: s.now,
		Details: map[string]any{"executionId": ex.ID, "resolution": "replay_succeeded"}})
}

// FailDeadLettered ends a dead-lettered execution FAILED when its dead letter is settled by
// hand: DLQ_PENDING → FAILED. Lost (false) when it is not dead-lettered.
func (s deadLetterTx) FailDeadLettered(executionID string) (bool, error) {
	r := s.tx.Model(&models.Execution{}).Where("id = ? AND status = ?", executionID, models.ExecDLQPending).
		Updates(map[string]any{"status": models.ExecFailed, "updated_at": s.now})
	return r.RowsAffected == 1, r.Error
}

// ExpireDeadLetters expires those of the dead letters ids that are still pending (a replay
// may have taken one since they were read): pending → expired, their payload purged. It
// returns the ids it expired.
func (s deadLetterTx) ExpireDeadLetters(ids []string) ([]string, error) {
	if err := s.tx.Model(&models.DeadLetter{}).Where("id IN ? AND status = ?", ids, models.DLQPending).
		Updates(map[string]any{"status": models.DLQExpired, "original_input": models.JSON("{}"), "step_states": models.JSON("[]"), "updated_at": s.now}).Error; err != nil {
		return nil, err
	}
	var expired []string
	err := s.tx.Model(&models.DeadLetter{}).Where("id IN ? AND status = ? AND updated_at = ?", ids, models.DLQExpired, s.now).
		Pluck("id", &expired).Error
	if err != nil {
		return nil, err
	}
	return expired, stateTx(s).groups().closedInGroups(expired, models.DLQPending, models.DLQExpired)
}

// DecideInputChange decides a pending input-change request: pending → status (approved or
// rejected), with the fields given (who, when, the note). Of two admins deciding at once one
// wins; the other, and a decision on a request decided or cancelled already, gets ECONFLICT
// naming what happened (inputchange.conflict.<status>).
func (s deadLetterTx) DecideInputChange(req *models.InputChangeRequest, status string, fields map[string]any) error {
	upd := map[string]any{"status": status, "updated_at": s.now}
	for k, v := range fields {
		upd[k] = v
	}
	r := s.tx.Model(&models.InputChangeRequest{}).Where("id = ? AND organization_id = ? AND status = ?",
		req.ID, req.OrganizationID, models.ChangePending).Updates(upd)
	if r.Error != nil {
		return r.Error
	}
	if r.RowsAffected == 1 {
		req.Status = status
		return nil
	}
	var cur models.InputChangeRequest
	if err := s.tx.Select("status").Where("id = ?", req.ID).First(&cur).Error; err != nil {
		return err
	}
	return &apperr.Error{Code: apperr.ECONFLICT, Message: "inputchange.conflict." + cur.Status}
}

// CancelInputChanges cancels the dead letter's pending input-change request, if any
// (pending → cancelled): the item was replayed, closed, or given a newer request. It
// returns how many it cancelled (0 or 1).
func (s deadLetterTx) CancelInputChanges(deadLetterID string) (int64, error) {
	r := s.tx.Model(&models.InputChangeRequest{}).Where("dead_letter_id = ? AND status = ?", deadLetterID, models.ChangePending).
		Updates(map[string]any{"status": models.ChangeCancelled, "updated_at": s.now})
	return r.RowsAffected, r.Error
}

// closedByHand are the error records' resolution types of an item someone closed by hand
// (Settle), as opposed to one a successful replay closed (manual_retry).
var closedByHand = []string{"manual", "skipped"}

// ReopenDeadLetter makes a dead letter closed by hand (resolved or skipped, its error record
// resolved "manual" or "skipped") and still within its retention pending again: its
// resolution is cleared (the audit log keeps it), and it counts as pending in its group,
// which is open again if it was resolved (ReopenGroupOf).
// Otherwise ECONFLICT: dlq.reopen.open (it
// is pending or being replayed: reopened already), dlq.reopen.expired (expired, or past its
// retention), dlq.reopen.replayed (a successful replay closed it).
func (s deadLetterTx) ReopenDeadLetter(dl *models.DeadLetter) error {
	r := s.tx.Model(&models.DeadLetter{}).
		Where("id = ? AND organization_id = ? AND status IN ? AND expires_at > ?", dl.ID, dl.OrganizationID,
			[]string{models.DLQResolved, models.DLQSkipped}, s.now).
		Where("EXISTS (SELECT 1 FROM workflow_execution_errors ee WHERE ee.id = dead_letter_queue.error_id AND ee.resolution_type IN ?)", closedByHand).
		Updates(map[string]any{"status": models.DLQPending, "resolution_notes": nil, "resolved_by": nil, "resolved_at": nil, "updated_at": s.now})
	if r.Error != nil {
		return r.Error
	}
	if r.RowsAffected == 1 {
		// Counted pending in its group instead of closed; a resolved group is open again.
		_, err := stateTx(s).groups().ReopenGroupOf(dl.ID)
		return err
	}
	var cur models.DeadLetter
	if err := s.tx.Select("status, expires_at").Where("id = ?", dl.ID).First(&cur).Error; err != nil {
		return err
	}
	why := "replayed"
	switch {
	case cur.Status == models.DLQPending || cur.Status == models.DLQProcessing:
		why = "open"
	case cur.Status == models.DLQExpired || !cur.ExpiresAt.After(s.now):
		why = "expired"
	}
	return &apperr.Error{Code: apperr.ECONFLICT, Message: "dlq.reopen." + why}
}

// ReopenError makes a dead letter's error record, resolved by hand, dead-lettered again:
// resolved → dead_letter, its resolution cleared. Lost (false) when it is not resolved.
func (s errorTx) ReopenError(errorID string) (bool, error) {
	r := s.tx.Model(&models.ExecutionError{}).Where("id = ? AND status = ?", errorID, models.ErrResolved).
		Updates(map[string]any{"status": models.ErrDeadLetter, "resolution_type": nil, "resolution_notes": nil, "resolved_by": nil,
			"resolved_at": nil, "updated_at": s.now})
	return r.RowsAffected == 1, r.Error
}

// ReturnDeadLettered makes an execution that ended FAILED when its dead letter was settled
// by hand dead-lettered again (the item was reopened): FAILED → DLQ_PENDING. Lost (false)
// when it is not FAILED.
func (s deadLetterTx) ReturnDeadLettered(executionID string) (bool, error) {
	r := s.tx.Model(&models.Execution{}).Where("id = ? AND status = ?", executionID, models.ExecFailed).
		Updates(map[string]any{"status": models.ExecDLQPending, "updated_at": s.now})
	return r.RowsAffected == 1, r.Error
}
