package engine

import (
	"context"
	"time"

	"gorm.io/gorm"

	"lifeline/models"
	"lifeline/models/apperr"
	"lifeline/services/audit"
	"lifeline/services/redact"
)

// Failure groups (issue 22): every dead letter joins the group of its fingerprint in the
// transaction that makes it (deadLetter → JoinGroup); a group resolves when its last item to
// handle closes (ClaimDeadLetter, ResolveReplayed, ExpireDeadLetters → ResolveGroupOf).
// Here: what people do to groups (mute, split an item out), and the backfill of the dead
// letters made before groups.

// Groups is what people and the process do to failure groups (Engine.Groups): kept apart
// from the Engine façade, which would otherwise grow past what one type should carry.
type Groups struct{ e *Engine }

// Groups returns the engine's failure-group actions.
func (e *Engine) Groups() Groups { return Groups{e: e} }

// Redactor says which input keys are secrets (the engine's).
func (g Groups) Redactor() *redact.Redactor { return g.e.redactor }

// MaxMute bounds how far ahead a group can be muted.
const MaxMute = 90 * 24 * time.Hour

// Mute mutes the organization's group until until (after the database clock's now, at
// most MaxMute ahead): its new items join it silently until then. Audit dlq.group_muted.
// Errors: EINVALID on muteUntil; ENOTFOUND for another organization's or an unknown group;
// ECONFLICT (group.conflict.resolved) for a resolved group.
func (g Groups) Mute(ctx context.Context, orgID, groupID string, until time.Time, actor audit.Actor) error {
	return g.e.recovery.commit(ctx, func(tx *gorm.DB, now time.Time) ([]Job, error) {
		switch {
		case !until.After(now):
			return nil, apperr.Invalid("group.invalid", map[string]string{"muteUntil": "must be in the future"})
		case until.Sub(now) > MaxMute:
			return nil, apperr.Invalid("group.invalid", map[string]string{"muteUntil": "must be at most 90 days ahead"})
		}
		st := stateTx{tx: tx, now: now}
		if err := st.groups().MuteGroup(orgID, groupID, until); err != nil {
			return nil, err
		}
		return nil, audit.Record(tx, audit.Entry{OrganizationID: orgID, Actor: actor, Action: "dlq.group_muted", EntityType: "dlq_group",
			EntityID: groupID, At: now, Details: map[string]any{"muteUntil": until.UTC().Format(time.RFC3339)}})
	})
}

// Split moves the organization's dead letter id out of its group into a group of
// its own, and returns the new group's id. Audit dlq.split. Errors: ENOTFOUND for another
// organization's or an unknown item; ECONFLICT (group.split.alone, group.split.moved,
// group.split.ungrouped) as SplitOut says.
func (g Groups) Split(ctx context.Context, orgID, id string, actor audit.Actor) (string, error) {
	var groupID string
	g.e.beforeTx(TransitionSplitOut, id)
	hold := g.e.hooked().InTx
	err := g.e.recovery.commit(ctx, func(tx *gorm.DB, now time.Time) ([]Job, error) {
		var dl models.DeadLetter
		if err := tx.Omit("original_input", "step_states").Where("organization_id = ? AND id = ?", orgID, id).First(&dl).Error; err != nil {
			if models.IsNotFound(err) {
				return nil, apperr.NotFound("dead letter")
			}
			return nil, err
		}
		from := dl.GroupID
		var err error
		if groupID, err = (stateTx{tx: tx, now: now, hold: hold}).groups().SplitOut(&dl); err != nil {
			return nil, err
		}
		return nil, audit.Record(tx, audit.Entry{OrganizationID: orgID, Actor: actor, Action: "dlq.split", EntityType: "dead_letter_queue",
			EntityID: dl.ID, At: now, Details: map[string]any{"fromGroupId": *from, "groupId": groupID}})
	})
	return groupID, err
}

// Backfill gives the dead letters made before failure groups (group_id NULL) their
// groups, batch by batch, oldest first: the same JoinGroup a new failure takes, at the
// time the item failed; then each group it touched is resolved if it has nothing left to
// handle. Idempotent and safe to run on several processes at once (an item is grouped only
// while it has no group: a compare-and-set). It returns how many items it read without a
// group. serve runs it at start.
func (g Groups) Backfill(ctx context.Context, batch int) (int, error) {
	if batch <= 0 {
		batch = 500
	}
	total := 0
	touched := map[string]bool{}
	for {
		n, err := g.backfillBatch(ctx, batch, touched)
		total += n
		if err != nil {
			return total, err
		}
		if n < batch {
			break
		}
	}
	ids := make([]string, 0, len(touched))
	for id := range touched {
		ids = append(ids, id)
	}
	for start := 0; start < len(ids); start += batch {
		chunk := ids[start:min(start+batch, len(ids))]
		if err := g.e.recovery.commit(ctx, func(tx *gorm.DB, now time.Time) ([]Job, error) {
			for _, id := range chunk {
				if _, err := (stateTx{tx: tx, now: now}).groups().ResolveGroupIfDone(id); err != nil {
					return nil, err
				}
			}
			return nil, nil
		}); err != nil {
			return total, err
		}
	}
	return total, nil
}

func (g Groups) backfillBatch(ctx context.Context, batch int, touched map[string]bool) (int, error) {
	var rows []struct {
		models.DeadLetter
		ErrorCode *string
	}
	if err := g.e.db.Conn(ctx).Table("dead_letter_queue").
		Select("dead_letter_queue.id, dead_letter_queue.organization_id, dead_letter_queue.workflow_id, dead_letter_queue.failed_step_id, " +
			"dead_letter_queue.error_type, dead_letter_queue.reason, dead_letter_queue.status, dead_letter_queue.amount_minor, dead_letter_queue.created_at, " +
			"workflow_execution_errors.error_code").
		Joins("LEFT JOIN workflow_execution_errors ON workflow_execution_errors.id = dead_letter_queue.error_id").
		Where("dead_letter_queue.group_id IS NULL").Order("dead_letter_queue.created_at, dead_letter_queue.id").Limit(batch).
		Scan(&rows).Error; err != nil {
		return 0, err
	}
	if len(rows) == 0 {
		return 0, nil
	}
	joined := map[string]bool{}
	err := g.e.recovery.commit(ctx, func(tx *gorm.DB, _ time.Time) ([]Job, error) {
		clear(joined)
		for i := range rows {
			dl := &rows[i].DeadLetter
			// The group's times are the item's: it was seen when it failed, not now.
			won, err := (stateTx{tx: tx, now: dl.CreatedAt}).groups().BackfillGroup(dl, deref(rows[i].ErrorCode))
			if err != nil {
				return nil, err
			}
			if won {
				joined[*dl.GroupID] = true
			}
		}
		return nil, nil
	})
	if err != nil {
		return 0, err
	}
	for id := range joined {
		touched[id] = true
	}
	return len(rows), nil
}
