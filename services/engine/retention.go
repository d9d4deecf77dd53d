package engine

import (
	"context"
	"slices"
	"time"

	"lifeline/models"
	"lifeline/services/audit"

	"gorm.io/gorm"
)

// RetentionBatch is how many dead letters one transaction expires; maxRetentionBatches
// bounds one pass (a million items).
const (
	RetentionBatch      = 500
	maxRetentionBatches = 2000
)

// RetentionResult counts what Retain changed.
type RetentionResult struct {
	ExpiredDeadLetters int
	IdempotencyKeys    int
}

// Retain does what Engine.Retain says.
func (e *maintenance) Retain(ctx context.Context) (RetentionResult, error) {
	var res RetentionResult
	now, err := e.now(ctx)
	if err != nil {
		return res, err
	}
	// Batch by batch until none is left (or the pass's time is up): at a million items about
	// 33,000 fall due a day, and one pass an hour has to keep up with them.
	for range maxRetentionBatches {
		n, err := e.expireBatch(ctx, now)
		res.ExpiredDeadLetters += n
		if err != nil {
			return res, err
		}
		if n < RetentionBatch || ctx.Err() != nil {
			break
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

// expireBatch expires up to RetentionBatch pending dead letters past expires_at in one
// transaction, each with its audit entry, and says how many it expired.
func (e *maintenance) expireBatch(ctx context.Context, now time.Time) (int, error) {
	n := 0
	err := e.db.Tx(ctx, func(tx *gorm.DB) error {
		n = 0
		var due []models.DeadLetter
		if err := tx.Select("id", "organization_id", "execution_id").Where("status = ? AND expires_at < ?", models.DLQPending, now).
			Order("expires_at").Limit(RetentionBatch).Find(&due).Error; err != nil || len(due) == 0 {
			return err
		}
		ids := make([]string, len(due))
		for i, dl := range due {
			ids[i] = dl.ID
		}
		// The status is checked again: a replay may have taken an item since it was read.
		expired, err := (stateTx{tx: tx, now: now}).deadLetters().ExpireDeadLetters(ids)
		if err != nil {
			return err
		}
		rows := make([]models.AuditEntry, 0, len(expired))
		for _, dl := range due {
			if slices.Contains(expired, dl.ID) {
				rows = append(rows, audit.Row(audit.Entry{OrganizationID: dl.OrganizationID, Actor: audit.System, Action: "dlq.expired",
					EntityType: "dead_letter_queue", EntityID: dl.ID, At: now, Details: map[string]any{"executionId": dl.ExecutionID}}))
			}
		}
		n = len(rows)
		if n == 0 {
			return nil
		}
		return tx.CreateInBatches(rows, 100).Error
	})
	return n, err
}
