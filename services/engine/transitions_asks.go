package engine

import (
	"time"

	"gorm.io/gorm/clause"

	"lifeline/models"
	"lifeline/models/apperr"
	"lifeline/services/classify"
)

// Transitions of ask steps' requests (asks_*.go), in the caller's transaction at now. An
// execution at an ask step, its attempt and its request move together: parked (attempt
// RUNNING → WAITING, execution → WAITING, request made open), answered or timed out (request
// open → answered | timed_out, attempt WAITING → PENDING at the next generation, execution
// WAITING → RUNNING), or cancelled (request → cancelled, attempt and execution → FAILED).

// askTx changes requests and the attempts and executions waiting on them.
type askTx stateTx

// Names of the ask transitions, for Hooks.BeforeTx (with the execution's id).
const (
	TransitionAnswer = "Answer"
	TransitionCancel = "Cancel"
)

// ParkAsk parks the attempt RUNNING at generation (held by this worker) on its new request
// iv: the attempt WAITING (lease cleared, its rendered input kept), the execution WAITING
// at the step, and iv inserted open. errLost when the attempt is no longer held, the
// execution is not RUNNING or PENDING, or the attempt has a request already: nothing is
// written.
func (s askTx) ParkAsk(ex *models.Execution, a *models.StepAttempt, generation int, input []byte, iv *models.Intervention) error {
	if err := fromRunning(stateTx(s), a, generation, map[string]any{"status": models.StepWaiting, "lease_expires_at": nil,
		"input": models.JSON(input), "updated_at": s.now}); err != nil {
		return err
	}
	res := s.tx.Model(&models.Execution{}).Where("id = ? AND organization_id = ? AND status IN ?", ex.ID, ex.OrganizationID,
		[]string{models.ExecRunning, models.ExecPending}).
		Updates(map[string]any{"status": models.ExecWaiting, "current_step_id": a.StepID, "updated_at": s.now})
	if res.Error != nil {
		return res.Error
	}
	if res.RowsAffected == 0 {
		return errLost
	}
	iv.CreatedAt, iv.UpdatedAt = s.now, s.now
	res = s.tx.Clauses(clause.OnConflict{DoNothing: true}).Create(iv)
	if res.Error != nil {
		return res.Error
	}
	if res.RowsAffected == 0 {
		return errLost
	}
	return nil
}

// Repark parks the attempt RUNNING at generation again on its request, still open (the
// attempt was run again without its request having moved: it waits again). errLost as
// ParkAsk.
func (s askTx) Repark(ex *models.Execution, a *models.StepAttempt, generation int) error {
	if err := fromRunning(stateTx(s), a, generation, map[string]any{"status": models.StepWaiting, "lease_expires_at": nil, "updated_at": s.now}); err != nil {
		return err
	}
	return s.tx.Model(&models.Execution{}).Where("id = ? AND organization_id = ?", ex.ID, ex.OrganizationID).
		Updates(map[string]any{"status": models.ExecWaiting, "current_step_id": a.StepID, "updated_at": s.now}).Error
}

// AnswerAsk records answer as the open request iv's: open → answered, by (a user's id) and
// byName, with the answer's idempotency key, its escalation and reminder ended. It reports
// whether it won: false when the request is no longer open (nothing is written).
func (s askTx) AnswerAsk(iv *models.Intervention, answer models.JSON, by, byName, key string) (bool, error) {
	res := s.tx.Model(&models.Intervention{}).Where("id = ? AND organization_id = ? AND status = ?", iv.ID, iv.OrganizationID, models.InterventionOpen).
		Updates(map[string]any{"status": models.InterventionAnswered, "answer": answer, "answered_by": by, "answered_by_name": byName,
			"answered_at": s.now, "idempotency_key": nullable(key), "next_escalation_at": nil, "remind_at": nil, "updated_at": s.now})
	return res.RowsAffected == 1, res.Error
}

// TimeOutAsk records what the open request iv's timeout decided (answer): open →
// timed_out, once its ExpiresAt has passed by now. It reports whether it won: false when the
// request is no longer open or not yet expired (nothing is written).
func (s askTx) TimeOutAsk(iv *models.Intervention, answer models.JSON) (bool, error) {
	res := s.tx.Model(&models.Intervention{}).Where("id = ? AND status = ? AND expires_at <= ?", iv.ID, models.InterventionOpen, s.now).
		Updates(map[string]any{"status": models.InterventionTimedOut, "answer": answer, "answered_at": s.now,
			"next_escalation_at": nil, "remind_at": nil, "updated_at": s.now})
	return res.RowsAffected == 1, res.Error
}

// escalationStep is an escalation of a request from one level (and round) to the next.
type escalationStep struct {
	fromLevel, fromRound int
	toLevel, toRound     int
	holders              []string
	// next is when the level after it is due (nil: it was the last).
	next *time.Time
}

// EscalateAsk raises the open request iv, due for escalation by now, from es's level and
// round to the next, held by es.holders from now. It reports whether it won: false when
// the request is no longer open, another sweep raised it, or it is not due (nothing is
// written). That guard is what makes each level happen once per round.
func (s askTx) EscalateAsk(iv *models.Intervention, es escalationStep) (bool, error) {
	res := s.tx.Model(&models.Intervention{}).
		Where("id = ? AND status = ? AND escalation_level = ? AND escalation_round = ? AND next_escalation_at <= ?",
			iv.ID, models.InterventionOpen, es.fromLevel, es.fromRound, s.now).
		Updates(map[string]any{"escalation_level": es.toLevel, "escalation_round": es.toRound, "holders": models.StringList(es.holders),
			"next_escalation_at": es.next, "updated_at": s.now})
	return res.RowsAffected == 1, res.Error
}

// RemindAsk takes the open request iv's reminder, due by now (remind_at cleared: there is
// one). It reports whether it won: false when the request is no longer open, has no
// reminder due, or another sweep took it.
func (s askTx) RemindAsk(iv *models.Intervention) (bool, error) {
	res := s.tx.Model(&models.Intervention{}).Where("id = ? AND status = ? AND remind_at <= ?", iv.ID, models.InterventionOpen, s.now).
		Updates(map[string]any{"remind_at": nil, "updated_at": s.now})
	return res.RowsAffected == 1, res.Error
}

// ResumeAsk moves on the attempt waiting on request iv, which was just answered or timed
// out in this transaction: WAITING → PENDING at the next generation, due now, and its
// execution WAITING → RUNNING. It returns the attempt's job. errLost when the attempt is
// not WAITING (nothing it writes is kept: the caller rolls back).
func (s askTx) ResumeAsk(iv *models.Intervention) (Job, error) {
	var a models.StepAttempt
	if err := s.tx.Select("id, generation").Where("id = ? AND status = ?", iv.AttemptID, models.StepWaiting).Limit(1).Find(&a).Error; err != nil {
		return Job{}, err
	}
	if a.ID == "" {
		return Job{}, errLost
	}
	res := s.tx.Model(&models.StepAttempt{}).Where("id = ? AND status = ? AND generation = ?", a.ID, models.StepWaiting, a.Generation).
		Updates(map[string]any{"status": models.StepPending, "generation": a.Generation + 1, "scheduled_at": s.now, "started_at": nil, "updated_at": s.now})
	if res.Error != nil {
		return Job{}, res.Error
	}
	if res.RowsAffected == 0 {
		return Job{}, errLost
	}
	if err := s.tx.Model(&models.Execution{}).Where("id = ? AND organization_id = ? AND status = ?", iv.ExecutionID, iv.OrganizationID, models.ExecWaiting).
		Updates(map[string]any{"status": models.ExecRunning, "updated_at": s.now}).Error; err != nil {
		return Job{}, err
	}
	return Job{AttemptID: a.ID, Generation: a.Generation + 1, RunAt: s.now}, nil
}

// UseLink consumes the e-mail link of hash for user on request ivID: used now, once, while
// it has not expired. Lost (EFORBIDDEN) when it is not that user's link to that request, was
// used, or expired: nothing is written.
func (s askTx) UseLink(orgID, ivID, userID, hash string) error {
	res := s.tx.Model(&models.InterventionLink{}).
		Where("token_hash = ? AND organization_id = ? AND intervention_id = ? AND user_id = ? AND used_at IS NULL AND expires_at > ?", hash, orgID, ivID, userID, s.now).
		Update("used_at", s.now)
	if res.Error != nil {
		return res.Error
	}
	if res.RowsAffected == 0 {
		return apperr.Errorf(apperr.EFORBIDDEN, "This link was used already, has expired, or was sent to someone else.")
	}
	return nil
}

// CancelAsk cancels the WAITING execution ex: its open request cancelled, its waiting
// attempt FAILED (permanent, code cancelled, msg), the execution FAILED. ECONFLICT when the
// execution is not WAITING: nothing is written.
func (s askTx) CancelAsk(ex *models.Execution, msg string) error {
	res := s.tx.Model(&models.Execution{}).Where("id = ? AND organization_id = ? AND status = ?", ex.ID, ex.OrganizationID, models.ExecWaiting).
		Updates(map[string]any{"status": models.ExecFailed, "finished_at": s.now, "updated_at": s.now})
	if res.Error != nil {
		return res.Error
	}
	if res.RowsAffected == 0 {
		return apperr.Errorf(apperr.ECONFLICT, "Only a waiting execution can be cancelled: this one is not waiting for anyone.")
	}
	if err := s.tx.Model(&models.Intervention{}).Where("execution_id = ? AND organization_id = ? AND status = ?", ex.ID, ex.OrganizationID, models.InterventionOpen).
		Updates(map[string]any{"status": models.InterventionCancelled, "next_escalation_at": nil, "remind_at": nil, "updated_at": s.now}).Error; err != nil {
		return err
	}
	return s.tx.Model(&models.StepAttempt{}).Where("execution_id = ? AND organization_id = ? AND status = ?", ex.ID, ex.OrganizationID, models.StepWaiting).
		Updates(map[string]any{"status": models.StepFailed, "error_type": string(classify.Permanent), "error_code": CodeCancelled,
			"error_message": msg, "finished_at": s.now, "updated_at": s.now}).Error
}
