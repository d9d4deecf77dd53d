package engine

import (
	"context"
	"fmt"
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
	// RepairedGroups counts the failure groups whose kept counts differed from their items'
	// and were recounted (repairGroupCounts).
	RepairedGroups int
	// RepairedOpenWork counts the organizations whose counters of open work differed from a
	// recount of their items and were set to it (repairOpenWork).
	RepairedOpenWork int
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
	if res.RepairedGroups, err = e.repairGroupCounts(ctx); err != nil {
		return res, err
	}
	res.RepairedOpenWork, err = e.repairOpenWork(ctx)
	return res, err
}

// repairGroupCounts recounts every failure group whose kept counts differ from its items'
// (models.DB.GroupCountDrift, per organization: it reads every item, which is why it runs
// with retention, hourly, and not with the reconciler), each with RepairGroupCounts in a
// transaction of its own, and logs how many it repaired. A drift means a writer changed an
// item's status or group without its transition: the log names the groups. It returns how
// many it repaired.
func (e *maintenance) repairGroupCounts(ctx context.Context) (int, error) {
	var orgs []string
	if err := e.db.Conn(ctx).Model(&models.Group{}).Distinct("organization_id").Order("organization_id").Pluck("organization_id", &orgs).Error; err != nil {
		return 0, err
	}
	repaired := 0
	for _, org := range orgs {
		drift, err := e.db.GroupCountDrift(ctx, org)
		if err != nil {
			return repaired, err
		}
		for _, d := range drift {
			won := false
			err := e.commit(ctx, func(tx *gorm.DB, now time.Time) ([]Job, error) {
				var err error
				won, err = (stateTx{tx: tx, now: now}).groups().RepairGroupCounts(d.GroupID)
				return nil, err
			})
			if err != nil {
				return repaired, fmt.Errorf("repair the counts of group %s: %w", d.GroupID, err)
			}
			if won {
				repaired++
				e.log.WarnContext(ctx, "failure group's counts repaired: they differed from its items'", "organization_id", org,
					"group_id", d.GroupID, "kept", d.Kept, "kept_open", d.KeptOpen, "items", d.FromItems)
			}
		}
	}
	if repaired > 0 {
		e.log.WarnContext(ctx, "failure groups' counts repaired", "groups", repaired)
	}
	return repaired, nil
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
