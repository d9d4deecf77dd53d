package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"gorm.io/gorm"

	"lifeline/models"
	"lifeline/models/apperr"
	"lifeline/services/audit"
	"lifeline/services/notify"
)

// Who may fix what (issue 21): an accountant's edited input on a workflow that moves money
// waits as an input-change request until an admin approves it (the replay then runs, through
// Replay's guarded path) or rejects it; and an admin may reopen an item closed by hand.

// tableChanges is the table whose input column is sealed per request.
const tableChanges = "input_change_requests"

// TransitionDecideInputChange names an approval's transaction, for Hooks (it is held before
// the replay's StartReplay hook).
const TransitionDecideInputChange = "DecideInputChange"

// ChangeRequest asks an admin to approve an edited input before the replay runs.
type ChangeRequest struct {
	OrganizationID string
	DeadLetterID   string
	// Mode is the replay the approval will run: ReplayFromFailed, or ReplayFull for a
	// rolled-back execution.
	Mode  string
	Input json.RawMessage
	Notes string
	Actor audit.Actor
	// ActorName is who asked, as people read it (an email).
	ActorName string
	// Title and Link are what the admins' inbox entry shows and links to (the item's page).
	Title, Link string
}

// Decision is an admin's approval or rejection of an input-change request.
type Decision struct {
	OrganizationID string
	RequestID      string
	Notes          string
	Actor          audit.Actor
	ActorName      string
}

// approval is the request an approved replay decides, in the replay's transaction, and the
// notice that tells its requester.
type approval struct {
	req    *models.InputChangeRequest
	d      Decision
	notice notify.Event
}

// RequestInputChange stores r as a pending input-change request of a pending dead letter
// (its input sealed, a masked copy before and after for the diff), replacing the item's
// pending request if it has one, audited (dlq.change_requested), with an entry in every
// admin's inbox. Errors: ENOTFOUND (not the organization's item), EINVALID with field
// messages (modifiedInput: not an object, or unchanged), ECONFLICT (the item is not pending,
// or was rolled back and the mode is not full).
func (e *recovery) RequestInputChange(ctx context.Context, r ChangeRequest) (*models.InputChangeRequest, error) {
	if r.Mode != ReplayFromFailed && r.Mode != ReplayFull {
		return nil, apperr.Invalid("replay.mode", map[string]string{"retryType": "must be from_failed or full"})
	}
	if utf8.RuneCountInString(r.Notes) > MaxNotes {
		return nil, apperr.Invalid("replay.invalid", map[string]string{"resolutionNotes": fmt.Sprintf("must be at most %d characters", MaxNotes)})
	}
	dl, ex, err := e.deadLetterOf(ctx, r.OrganizationID, r.DeadLetterID)
	if err != nil {
		return nil, err
	}
	if dl.Status != models.DLQPending {
		return nil, &apperr.Error{Code: apperr.ECONFLICT, Message: "dlq.conflict." + dl.Status}
	}
	if ex.RollbackStatus != nil && r.Mode != ReplayFull {
		return nil, errRolledBack
	}
	def, err := e.definitionFor(ctx, ex.OrganizationID, ex.WorkflowID, ex.WorkflowVersion)
	if err != nil {
		return nil, err
	}
	input, changed, err := e.replayInput(ex, r.Input)
	if err != nil {
		return nil, apperr.Invalid("replay.invalid", map[string]string{"modifiedInput": err.Error()})
	}
	if !changed {
		return nil, apperr.Invalid("replay.invalid", map[string]string{"modifiedInput": "inputchange.unchanged"})
	}
	before, err := e.open(ex.Input, tableExecutions, ex.ID, "input")
	if err != nil {
		return nil, err
	}
	var after any
	_ = json.Unmarshal(input, &after)
	mask := e.masker(def, before, after)
	shownBefore, _ := json.Marshal(mask.Value(e.redactor.Value(before)))
	shownAfter, _ := json.Marshal(mask.Value(e.redactor.Value(after)))
	req := &models.InputChangeRequest{ID: models.NewID(), OrganizationID: dl.OrganizationID, DeadLetterID: dl.ID, ExecutionID: ex.ID,
		Mode: r.Mode, InputBefore: shownBefore, InputAfter: shownAfter, Notes: nullable(r.Notes), Status: models.ChangePending,
		RequestedName: r.ActorName}
	if r.Actor.Type == audit.ActorUser && r.Actor.ID != "" {
		req.RequestedBy = &r.Actor.ID
	}
	sealed, err := e.sealFound(input, tableChanges, req.ID, "input", e.inputMasker(def, input))
	if err != nil {
		return nil, err
	}
	req.Input = sealed
	err = e.commit(ctx, func(tx *gorm.DB, now time.Time) ([]Job, error) {
		st := stateTx{tx: tx, now: now}
		var cur models.DeadLetter
		if err := tx.Select("status").Where("id = ?", dl.ID).First(&cur).Error; err != nil {
			return nil, err
		}
		if cur.Status != models.DLQPending {
			return nil, &apperr.Error{Code: apperr.ECONFLICT, Message: "dlq.conflict." + cur.Status}
		}
		if _, err := st.deadLetters().CancelInputChanges(dl.ID); err != nil { // a newer request replaces it
			return nil, err
		}
		req.CreatedAt, req.UpdatedAt = now, now
		if err := tx.Create(req).Error; err != nil {
			return nil, err
		}
		details := map[string]any{"requestId": req.ID, "executionId": ex.ID, "inputBefore": json.RawMessage(shownBefore),
			"inputAfter": json.RawMessage(shownAfter)}
		if r.Notes != "" {
			details["notes"] = mask.Mask(r.Notes)
		}
		if err := audit.Record(tx, audit.Entry{OrganizationID: dl.OrganizationID, Actor: r.Actor, Action: "dlq.change_requested",
			EntityType: "dead_letter_queue", EntityID: dl.ID, At: now, Details: details}); err != nil {
			return nil, err
		}
		_, err := models.InboxAdmins(tx, models.AdminMessage{OrganizationID: dl.OrganizationID, Kind: "input_change", Title: r.Title,
			Body: mask.Mask(r.Notes), Link: r.Link, DedupKey: "change:" + req.ID, At: now})
		return nil, err
	})
	if err != nil {
		return nil, err
	}
	return req, nil
}

// inputChange loads a request of the organization; ENOTFOUND otherwise.
func (e *recovery) inputChange(ctx context.Context, orgID, id string) (*models.InputChangeRequest, error) {
	var req models.InputChangeRequest
	if err := e.db.Conn(ctx).Where("organization_id = ? AND id = ?", orgID, id).First(&req).Error; err != nil {
		if models.IsNotFound(err) {
			return nil, apperr.NotFound("input change request")
		}
		return nil, err
	}
	return &req, nil
}

// ApproveInputChange approves a pending request and runs its replay with the requested
// input, in one transaction: the request becomes approved (DecideInputChange) and the item
// is claimed for the replay (Replay), or neither. Errors: ENOTFOUND; ECONFLICT
// (inputchange.conflict.<status>: decided or cancelled already, another admin's approval
// at the same moment included; or the replay's own conflicts); Replay's EINVALID.
func (e *recovery) ApproveInputChange(ctx context.Context, d Decision) (*ReplayResult, error) {
	if utf8.RuneCountInString(d.Notes) > MaxNotes {
		return nil, apperr.Invalid("replay.invalid", map[string]string{"notes": fmt.Sprintf("must be at most %d characters", MaxNotes)})
	}
	req, err := e.inputChange(ctx, d.OrganizationID, d.RequestID)
	if err != nil {
		return nil, err
	}
	if req.Status != models.ChangePending {
		return nil, &apperr.Error{Code: apperr.ECONFLICT, Message: "inputchange.conflict." + req.Status}
	}
	input, err := e.openRaw(req.Input, tableChanges, req.ID, "input")
	if err != nil {
		return nil, err
	}
	notice, err := e.decisionNotice(ctx, req)
	if err != nil {
		return nil, err
	}
	e.beforeTx(TransitionDecideInputChange, req.ExecutionID)
	return e.Replay(ctx, ReplayRequest{OrganizationID: d.OrganizationID, DeadLetterID: req.DeadLetterID, Mode: req.Mode, Input: input,
		Notes: d.Notes, Actor: d.Actor, approval: &approval{req: req, d: d, notice: notice}})
}

// decisionNotice is what tells the requester of req of a decision on it (decide fills in
// the kind, the admin, the note and the time): the item, its execution's subject and
// workflow, and the workflow's notification settings. ENOTFOUND when the item is gone.
func (e *recovery) decisionNotice(ctx context.Context, req *models.InputChangeRequest) (notify.Event, error) {
	_, ex, err := e.deadLetterOf(ctx, req.OrganizationID, req.DeadLetterID)
	if err != nil {
		return notify.Event{}, err
	}
	def, err := e.definitionFor(ctx, ex.OrganizationID, ex.WorkflowID, ex.WorkflowVersion)
	if err != nil {
		return notify.Event{}, err
	}
	return notify.Event{OrganizationID: req.OrganizationID, WorkflowID: ex.WorkflowID, WorkflowName: def.Name, ExecutionID: ex.ID,
		Subject: deref(ex.Subject), DeadLetterID: req.DeadLetterID, To: deref(req.RequestedBy), Settings: def.Settings.ErrorNotifications}, nil
}

// decide records d on the request in tx: DecideInputChange to status, audited
// (dlq.change_approved or dlq.change_rejected); the accountant who asked is told (notice,
// in the app and, as the workflow's notification settings say, by email).
func (e *recovery) decide(st stateTx, req *models.InputChangeRequest, d Decision, status string, notice notify.Event) error {
	fields := map[string]any{"decided_name": d.ActorName, "decision_notes": nullable(d.Notes), "decided_at": st.now}
	if d.Actor.Type == audit.ActorUser && d.Actor.ID != "" {
		fields["decided_by"] = d.Actor.ID
	}
	if err := st.deadLetters().DecideInputChange(req, status, fields); err != nil {
		return err
	}
	action := "dlq.change_approved"
	if status == models.ChangeRejected {
		action = "dlq.change_rejected"
	}
	details := map[string]any{"requestId": req.ID, "executionId": req.ExecutionID}
	if d.Notes != "" {
		details["notes"] = d.Notes
	}
	if err := audit.Record(st.tx, audit.Entry{OrganizationID: req.OrganizationID, Actor: d.Actor, Action: action,
		EntityType: "dead_letter_queue", EntityID: req.DeadLetterID, At: st.now, Details: details}); err != nil {
		return err
	}
	if notice.To == "" {
		return nil // asked by a token, or by no one who can read an inbox
	}
	notice.Kind = notify.ChangeApproved
	if status == models.ChangeRejected {
		notice.Kind = notify.ChangeRejected
	}
	notice.DecidedBy, notice.Notes, notice.At = d.ActorName, d.Notes, st.now
	notice.DedupKey = string(notice.Kind) + ":" + req.ID
	return e.emit(st.tx, notice)
}

// RejectInputChange rejects a pending request with a note (required): the item stays
// pending, as it was. Errors: ENOTFOUND; EINVALID (notes); ECONFLICT as ApproveInputChange's.
func (e *recovery) RejectInputChange(ctx context.Context, d Decision) (*models.InputChangeRequest, error) {
	switch {
	case strings.TrimSpace(d.Notes) == "":
		return nil, apperr.Invalid("inputchange.reject.invalid", map[string]string{"notes": "inputchange.reject.note"})
	case utf8.RuneCountInString(d.Notes) > MaxNotes:
		return nil, apperr.Invalid("replay.invalid", map[string]string{"notes": fmt.Sprintf("must be at most %d characters", MaxNotes)})
	}
	req, err := e.inputChange(ctx, d.OrganizationID, d.RequestID)
	if err != nil {
		return nil, err
	}
	notice, err := e.decisionNotice(ctx, req)
	if err != nil {
		return nil, err
	}
	e.beforeTx(TransitionDecideInputChange, req.ExecutionID)
	err = e.commit(ctx, func(tx *gorm.DB, now time.Time) ([]Job, error) {
		return nil, e.decide(stateTx{tx: tx, now: now}, req, d, models.ChangeRejected, notice)
	})
	if err != nil {
		return nil, err
	}
	return req, nil
}

// InputChanges returns the dead letter's input-change requests, newest first (ENOTFOUND
// when the item is not the organization's).
func (e *recovery) InputChanges(ctx context.Context, orgID, deadLetterID string) ([]models.InputChangeRequest, error) {
	var n int64
	if err := e.db.Conn(ctx).Model(&models.DeadLetter{}).Where("organization_id = ? AND id = ?", orgID, deadLetterID).Count(&n).Error; err != nil {
		return nil, err
	}
	if n == 0 {
		return nil, apperr.NotFound("dead letter")
	}
	var out []models.InputChangeRequest
	err := e.db.Conn(ctx).Where("organization_id = ? AND dead_letter_id = ?", orgID, deadLetterID).
		Order("created_at DESC, id DESC").Limit(50).Find(&out).Error
	return out, err
}

// ReopenRequest reopens an item closed by hand.
type ReopenRequest struct {
	OrganizationID string
	DeadLetterID   string
	Notes          string
	Actor          audit.Actor
}

// Reopen makes a dead letter closed by hand (resolved or skipped) pending again, within its
// retention: its error record is dead-lettered again and its execution DLQ_PENDING; the
// closure stays in its history, the reopening is audited (dlq.reopened). Errors: ENOTFOUND;
// EINVALID (notes required); ECONFLICT (ReopenDeadLetter's reasons: open already, expired,
// or closed by a successful replay, which a new run would repeat: start one instead).
func (e *recovery) Reopen(ctx context.Context, r ReopenRequest) error {
	switch {
	case strings.TrimSpace(r.Notes) == "":
		return apperr.Invalid("dlq.reopen.invalid", map[string]string{"notes": "dlq.reopen.note"})
	case utf8.RuneCountInString(r.Notes) > MaxNotes:
		return apperr.Invalid("replay.invalid", map[string]string{"notes": fmt.Sprintf("must be at most %d characters", MaxNotes)})
	}
	dl, ex, err := e.deadLetterOf(ctx, r.OrganizationID, r.DeadLetterID)
	if err != nil {
		return err
	}
	return e.commit(ctx, func(tx *gorm.DB, now time.Time) ([]Job, error) {
		st := stateTx{tx: tx, now: now}
		if err := st.deadLetters().ReopenDeadLetter(dl); err != nil {
			return nil, err
		}
		if _, err := st.errors().ReopenError(dl.ErrorID); err != nil {
			return nil, err
		}
		if _, err := st.deadLetters().ReturnDeadLettered(ex.ID); err != nil {
			return nil, err
		}
		return nil, audit.Record(tx, audit.Entry{OrganizationID: dl.OrganizationID, Actor: r.Actor, Action: "dlq.reopened",
			EntityType: "dead_letter_queue", EntityID: dl.ID, At: now,
			Details: map[string]any{"executionId": ex.ID, "notes": r.Notes, "was": dl.Status}})
	})
}
