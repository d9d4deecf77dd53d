package engine

import (
	"context"
	"time"

	"lifeline/models"
	"lifeline/services/audit"

	"gorm.io/gorm"
)

// RetentionResult counts what Retain changed.
type RetentionResult struct {
	ExpiredDeadLetters int
	IdempotencyKeys    int
}

// Retain applies the retention rules: pending dead letters past expires_at (30 days after
// they were dead-lettered) become "expired" and their payload (the input and the steps'
// states) is purged; the item itself, its error record and the audit trail stay. Items a
// replay is running (processing) wait for it. API idempotency keys past their 24 hours are
// deleted, and failures counted against circuit breakers more than an hour ago.
func (e *Engine) Retain(ctx context.Context) (RetentionResult, error) {
	var res RetentionResult
	now, err := e.now(ctx)
	if err != nil {
		return res, err
	}
	var expired []models.DeadLetter
	if err := e.db.Conn(ctx).Where("status = ? AND expires_at < ?", models.DLQPending, now).
		Limit(1000).Find(&expired).Error; err != nil {
		return res, err
	}
	for _, dl := range expired {
		err := e.db.Tx(ctx, func(tx *gorm.DB) error {
			r := tx.Model(&models.DeadLetter{}).Where("id = ? AND status = ?", dl.ID, dl.Status).
				Updates(map[string]any{"status": models.DLQExpired, "original_input": models.JSON("{}"), "step_states": models.JSON("[]"), "updated_at": now})
			if r.Error != nil || r.RowsAffected == 0 {
				return r.Error
			}
			res.ExpiredDeadLetters++
			return audit.Record(tx, audit.Entry{OrganizationID: dl.OrganizationID, Actor: audit.System, Action: "dlq.expired",
				EntityType: "dead_letter_queue", EntityID: dl.ID, At: now, Details: map[string]any{"executionId": dl.ExecutionID}})
		})
		if err != nil {
			return res, err
		}
	}
	// Failures counted against breakers matter for one window; an hour is plenty.
	if err := e.db.Conn(ctx).Where("at < ?", now.Add(-time.Hour)).Delete(&models.BreakerFailure{}).Error; err != nil {
		return res, err
	}
	r := e.db.Conn(ctx).Where("expires_at < ?", now).Delete(&models.IdempotencyKey{})
	if r.Error != nil {
		return res, r.Error
	}
	res.IdempotencyKeys = int(r.RowsAffected)
	return res, nil
}
