package engine

// CONTRACT (issue 25), shared by the engine and UI work: the facade's names and types are
// fixed. The attempt path is asks_run.go, answers and cancels asks_answer.go, the sweep
// asks_sweep.go, who may answer asks_who.go, the notifications asks_notify.go, and the
// state changes transitions_asks.go.

import (
	"context"

	"lifeline/models"
	"lifeline/models/apperr"
	"lifeline/services/audit"
)

// Asks are the requests ask steps make of people (Engine.Asks): listing, answering,
// cancelling, the e-mail link, and the sweep that times them out, escalates and reminds.
type Asks struct{ e *Engine }

// Asks returns the engine's ask actions.
func (e *Engine) Asks() Asks { return Asks{e: e} }

// AnswerRequest is one person's answer to an open request. Exactly one of Answer (approval:
// "approved" | "rejected", with Note), Values (input) or Option (decision,
// error_resolution) is set, as the request's kind says.
type AnswerRequest struct {
	OrganizationID string
	ID             string // the intervention's id
	Actor          audit.Actor
	// ActorName is the answerer as people read it (their email); Role is their role in the
	// organization (admins and owners may answer any request; others only those they hold).
	ActorName string
	Role      string
	Answer    string
	Note      string
	Values    map[string]any
	Option    string
	// IdempotencyKey: the same key from the same user after the answer was recorded gets
	// that answer back (no error), any other later answer ECONFLICT.
	IdempotencyKey string
	// LinkToken is the e-mail link's token when the answer came through it: it is consumed
	// in the answer's commit (single use). Empty when answered from the app or the API.
	LinkToken string
}

// Answer records the first valid answer and moves the waiting attempt on (its job runs the
// step, whose output is the answer), in one commit. Errors (apperr):
//   - ENOTFOUND: no such request in the organization;
//   - ECONFLICT: already answered, timed out or cancelled; the message names who answered
//     and when (or when it timed out);
//   - EFORBIDDEN: the user may not answer it (not a holder, or four-eyes bars them);
//   - EINVALID: the answer does not fit the kind or the schema (field messages, keyed
//     "answer", "note", "option", or "values.<field>").
func (a Asks) Answer(ctx context.Context, r AnswerRequest) (*models.Intervention, error) {
	return a.answer(ctx, r)
}

// Get returns one request of the organization (ENOTFOUND for another's).
func (a Asks) Get(ctx context.Context, orgID, id string) (*models.Intervention, error) {
	var iv models.Intervention
	if err := a.e.db.Conn(ctx).Where("organization_id = ? AND id = ?", orgID, id).Limit(1).Find(&iv).Error; err != nil {
		return nil, err
	}
	if iv.ID == "" {
		return nil, apperr.NotFound("request")
	}
	return &iv, nil
}

// List returns the organization's requests that match f, the soonest to expire first.
func (a Asks) List(ctx context.Context, orgID string, f models.InterventionFilter) ([]models.Intervention, error) {
	return a.list(ctx, orgID, f)
}

// CountOpenFor counts the open requests assigned to the user (of role) that they may answer
// now: the nav's count. An admin's counts those that name admins or them, not every request
// an admin may answer.
func (a Asks) CountOpenFor(ctx context.Context, orgID, userID, role string) (int, error) {
	q, err := a.openFor(ctx, orgID, userID, role)
	if err != nil || q == nil {
		return 0, err
	}
	var n int64
	err = q.Count(&n).Error
	return int(n), err
}

// MayAnswer reports whether the user (of role) may answer the request now, and if not why
// (a sentence for the page: "Four-eyes: you started this execution.").
func (a Asks) MayAnswer(ctx context.Context, iv *models.Intervention, userID, role string) (bool, string) {
	if iv == nil {
		return false, "No such request."
	}
	email, starter, err := a.who(ctx, iv, userID)
	if err != nil {
		return false, "The request cannot be checked now; try again."
	}
	return mayAnswer(iv, userID, email, role, starter)
}

// CancelRequest cancels a waiting execution: its open request becomes cancelled and the
// execution ends FAILED (audited execution.cancelled); ECONFLICT when it is not waiting.
type CancelRequest struct {
	OrganizationID string
	ExecutionID    string
	Note           string
	Actor          audit.Actor
	ActorName      string
}

// Cancel does what CancelRequest says.
func (a Asks) Cancel(ctx context.Context, r CancelRequest) error {
	return a.cancel(ctx, r)
}

// LinkCheck is what an e-mail link's token says for the user who opened it.
type LinkCheck string

const (
	LinkValid        LinkCheck = "valid"
	LinkUsed         LinkCheck = "used"
	LinkExpired      LinkCheck = "expired"
	LinkOtherUser    LinkCheck = "other_user" // sent to someone else
	LinkUnknownToken LinkCheck = "unknown"
)

// CheckLink says whether token (from an e-mail link to request id) may be used by userID now.
// Opening a link never acts: only Answer with the token consumes it.
func (a Asks) CheckLink(ctx context.Context, orgID, id, userID, token string) (LinkCheck, error) {
	return a.checkLink(ctx, orgID, id, userID, token)
}

// SweepResult counts what one sweep did.
type SweepResult struct {
	TimedOut, Escalated, Reminded int
}

// Sweep times out the open requests past ExpiresAt, escalates those past NextEscalationAt
// and reminds those past RemindAt, by the database clock, each in its own guarded commit.
// A River job runs it every few seconds; tests call it after moving the rows' times.
func (a Asks) Sweep(ctx context.Context) (SweepResult, error) {
	return a.sweep(ctx)
}
