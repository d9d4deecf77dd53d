package engine

import (
	"context"
	"fmt"
	"time"
	"unicode/utf8"

	"gorm.io/gorm"

	"lifeline/models"
	"lifeline/models/apperr"
	"lifeline/services/audit"
)

// SettleRequest marks a dead letter resolved or skipped by hand.
type SettleRequest struct {
	OrganizationID string
	DeadLetterID   string
	// Status is models.DLQResolved or models.DLQSkipped.
	Status         string
	Notes          string
	Actor          audit.Actor
	IdempotencyKey string
}

// Settle does what Engine.Settle says.
func (e *recovery) Settle(ctx context.Context, r SettleRequest) (*ReplayResult, error) {
	fields := map[string]string{}
	if r.Status != models.DLQResolved && r.Status != models.DLQSkipped {
		fields["action"] = "must be resolve or skip"
	}
	if utf8.RuneCountInString(r.Notes) > MaxNotes {
		fields["resolutionNotes"] = fmt.Sprintf("must be at most %d characters", MaxNotes)
	}
	if len(fields) > 0 {
		return nil, apperr.Invalid("replay.invalid", fields)
	}
	dl, ex, err := e.deadLetterOf(ctx, r.OrganizationID, r.DeadLetterID)
	if err != nil {
		return nil, err
	}
	reqHash := hashOf(r.Status, r.Notes)
	res := &ReplayResult{DeadLetterID: dl.ID, ExecutionID: ex.ID}
	e.beforeTx(TransitionStartReplay, ex.ID)
	err = e.commit(ctx, func(tx *gorm.DB, now time.Time) ([]Job, error) {
		if done, err := e.idempotent(stateTx{tx: tx, now: now}, dl, r.IdempotencyKey, reqHash, res); done || err != nil {
			return nil, err
		}
		var by *string
		if r.Actor.Type == audit.ActorUser && r.Actor.ID != "" {
			by = &r.Actor.ID
		}
		st := stateTx{tx: tx, now: now}
		if err := st.deadLetters().ClaimDeadLetter(dl, r.Status, map[string]any{"resolution_notes": nullable(r.Notes), "resolved_by": by, "resolved_at": now}); err != nil {
			return nil, err
		}
		if _, err := st.deadLetters().CancelInputChanges(dl.ID); err != nil { // closed: a waiting request is moot
			return nil, err
		}
		kind := "manual"
		if r.Status == models.DLQSkipped {
			kind = "skipped"
		}
		if err := st.errors().SettleError(dl.ErrorID, kind, nullable(r.Notes), by); err != nil {
			return nil, err
		}
		if _, err := st.deadLetters().FailDeadLettered(ex.ID); err != nil {
			return nil, err
		}
		action := "dlq.resolved"
		if r.Status == models.DLQSkipped {
			action = "dlq.skipped"
		}
		details := map[string]any{"executionId": ex.ID}
		if r.Notes != "" {
			details["notes"] = r.Notes
		}
		if err := audit.Record(tx, audit.Entry{OrganizationID: dl.OrganizationID, Actor: r.Actor, Action: action,
			EntityType: "dead_letter_queue", EntityID: dl.ID, At: now, Details: details}); err != nil {
			return nil, err
		}
		return nil, e.rememberKey(st, dl, r.IdempotencyKey, reqHash, ex.ID)
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

// deadLetterOf loads a dead letter of the organization and the execution it is about.
func (e *recovery) deadLetterOf(ctx context.Context, orgID, id string) (*models.DeadLetter, *models.Execution, error) {
	var dl models.DeadLetter
	if err := e.db.Conn(ctx).Where("organization_id = ? AND id = ?", orgID, id).First(&dl).Error; err != nil {
		if models.IsNotFound(err) {
			return nil, nil, apperr.NotFound("dead letter")
		}
		return nil, nil, err
	}
	ex, err := e.db.GetExecution(ctx, orgID, dl.ExecutionID)
	if err != nil {
		return nil, nil, err
	}
	return &dl, ex, nil
}
