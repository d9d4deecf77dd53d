package engine

import (
	"time"

	"lifeline/models"
)

// Transitions of execution-error records (workflow_execution_errors): see transitions.go.
//
// A step's failures share one open record (pending, then retrying while retries are
// scheduled) until the step's run ends: recovered by a retry (resolved, auto_retry), handed to
// an on-failure handler (resolved, handled), or dead-lettered (dead_letter). A dead-lettered
// record is resolved when its dead letter is: by a replay that succeeded (manual_retry) or by
// hand (manual, skipped). Each change below is guarded on the record's status and reports
// when it lost (errLost, or false where losing is an outcome the caller expects).

// openErrors are the statuses of a step's open error record.
var openErrors = []string{models.ErrPending, models.ErrRetrying}

// RecordError records a step's failure on its open error record: the latest failure's
// details (upd) on the step's open record, or, on the step's first failure, fresh (pending,
// its details set) as a new record. It returns the record and whether it created it. errLost
// when the open record it found was closed before it was updated.
func (s errorTx) RecordError(fresh *models.ExecutionError, upd map[string]any) (*models.ExecutionError, bool, error) {
	var open []models.ExecutionError
	if err := s.tx.Where("organization_id = ? AND execution_id = ? AND step_id = ? AND status IN ?",
		fresh.OrganizationID, fresh.ExecutionID, fresh.StepID, openErrors).Order("created_at DESC").Limit(1).Find(&open).Error; err != nil {
		return nil, false, err
	}
	if len(open) == 0 {
		fresh.Status, fresh.CreatedAt, fresh.UpdatedAt = models.ErrPending, s.now, s.now
		return fresh, true, s.tx.Create(fresh).Error
	}
	rec := &open[0]
	upd["updated_at"] = s.now
	if err := fromOpenError(s, rec.ID, upd); err != nil {
		return nil, false, err
	}
	return rec, false, nil
}

// RetryError marks the open error record id retrying: retries retries scheduled so far, the
// next at next. errLost when it is not open.
func (s errorTx) RetryError(id string, retries int, next time.Time) error {
	return fromOpenError(s, id, map[string]any{"status": models.ErrRetrying, "retry_count": retries, "next_retry_at": next,
		"last_retry_at": s.now, "updated_at": s.now})
}

// DeadLetterError moves the open error record id to dead_letter: its step failed for good
// and its execution goes to the DLQ. errLost when it is not open.
func (s errorTx) DeadLetterError(id string) error {
	return fromOpenError(s, id, map[string]any{"status": models.ErrDeadLetter, "next_retry_at": nil, "updated_at": s.now})
}

// HandOverError resolves the open error record id as handled: an on-failure handler step
// takes the failure over. errLost when it is not open.
func (s errorTx) HandOverError(id string) error {
	return fromOpenError(s, id, map[string]any{"status": models.ErrResolved, "resolution_type": "handled", "resolved_at": s.now,
		"next_retry_at": nil, "updated_at": s.now})
}

// ResolveRetried resolves step's open error record in execution ex as auto_retry: a retry of
// the step succeeded. It reports false, writing nothing, when the step has no open record
// (the attempt was not a retry after a failure: a reclaimed or replayed attempt). (On
// PostgreSQL the single-statement advance writes the same inside AdvanceAttempt's statement.)
func (s errorTx) ResolveRetried(ex *models.Execution, step string) (bool, error) {
	r := s.tx.Model(&models.ExecutionError{}).
		Where("organization_id = ? AND execution_id = ? AND step_id = ? AND status IN ?", ex.OrganizationID, ex.ID, step, openErrors).
		Updates(map[string]any{"status": models.ErrResolved, "resolution_type": "auto_retry", "resolved_at": s.now, "next_retry_at": nil, "updated_at": s.now})
	return r.RowsAffected > 0, r.Error
}

// SettleError resolves the dead-lettered (or escalated) error record id as its dead letter
// was settled: kind is manual_retry (a replay succeeded), manual (resolved by hand) or
// skipped; notes and by (nil: none) say who settled it and why. errLost when it is neither.
func (s errorTx) SettleError(id, kind string, notes, by *string) error {
	upd := map[string]any{"status": models.ErrResolved, "resolution_type": kind, "resolved_at": s.now, "updated_at": s.now}
	if notes != nil || by != nil {
		upd["resolution_notes"], upd["resolved_by"] = notes, by
	}
	r := s.tx.Model(&models.ExecutionError{}).Where("id = ? AND status IN ?", id, deadLettered).Updates(upd)
	if r.Error != nil {
		return r.Error
	}
	if r.RowsAffected == 0 {
		return errLost
	}
	return nil
}

// deadLettered are the statuses of a dead letter's error record while it waits: dead_letter,
// and escalated while its failure group is escalated (issue 22).
var deadLettered = []string{models.ErrDeadLetter, models.ErrEscalated}

// EscalateErrors marks escalated the error records of the items waiting (pending or
// processing) in the organization's failure groups groupIDs: dead_letter → escalated (the
// groups reached a level of the escalation policy; an item that joined an escalated group
// later is caught up by the next pass). It returns how many it changed; 0 (lost) when none
// was dead-lettered (closed meanwhile, or escalated already).
func (s errorTx) EscalateErrors(orgID string, groupIDs []string) (int64, error) {
	if len(groupIDs) == 0 {
		return 0, nil
	}
	r := s.tx.Exec(`UPDATE workflow_execution_errors SET status = ?, updated_at = ?
WHERE organization_id = ? AND status = ? AND id IN (
  SELECT error_id FROM dead_letter_queue WHERE organization_id = ? AND group_id IN ? AND status IN ?)`,
		models.ErrEscalated, s.now, orgID, models.ErrDeadLetter, orgID, groupIDs, []string{models.DLQPending, models.DLQProcessing})
	return r.RowsAffected, r.Error
}

// DeEscalateErrors ends the escalation of the error records of the failure group groupID's
// items (the group was resolved: the escalation ended): escalated → dead_letter, for a
// record its item's closing did not resolve (an expired item's). It returns how many it
// changed; 0 (lost) when none was escalated.
func (s errorTx) DeEscalateErrors(groupID string) (int64, error) {
	r := s.tx.Exec(`UPDATE workflow_execution_errors SET status = ?, updated_at = ?
WHERE status = ? AND id IN (SELECT error_id FROM dead_letter_queue WHERE group_id = ?)`,
		models.ErrDeadLetter, s.now, models.ErrEscalated, groupID)
	return r.RowsAffected, r.Error
}

// fromOpenError changes the error record id (upd) only while it is open; errLost otherwise.
func fromOpenError(s errorTx, id string, upd map[string]any) error {
	r := s.tx.Model(&models.ExecutionError{}).Where("id = ? AND status IN ?", id, openErrors).Updates(upd)
	if r.Error != nil {
		return r.Error
	}
	if r.RowsAffected == 0 {
		return errLost
	}
	return nil
}
