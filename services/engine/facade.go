package engine

import (
	"context"
	"lifeline/models"
	"lifeline/services/audit"
)

// The engine's public methods: each is done by the part responsible for it (parts.go).

// ActOnBreaker resets (closes) or force-opens a breaker of the organization, with a reason;
// a reset releases the attempts waiting on it. Errors: ENOTFOUND; EINVALID without a reason
// (or one over 2,000 characters).
func (e *Engine) ActOnBreaker(ctx context.Context, r BreakerAction) (*models.CircuitBreaker, error) {
	return e.circuits.ActOnBreaker(ctx, r)
}

// RunCompensation claims a pending compensation at this generation, runs it and records the
// result, then schedules the next one. It returns an error only when the database failed.
func (e *Engine) RunCompensation(ctx context.Context, id string, generation int) error {
	return e.rollbacks.RunCompensation(ctx, id, generation)
}

// ActOnCompensation retries, skips or confirms a compensation, and lets the rollback go on.
// Errors: ENOTFOUND; EINVALID for an unknown action; ECONFLICT when the compensation is not
// in a state the action applies to.
func (e *Engine) ActOnCompensation(ctx context.Context, r CompensationAction) error {
	return e.rollbacks.ActOnCompensation(ctx, r)
}

// Compensations returns an execution's compensations in the order they run.
func (e *Engine) Compensations(ctx context.Context, orgID, executionID string) ([]models.CompensationAction, error) {
	return e.rollbacks.Compensations(ctx, orgID, executionID)
}

// Quarantined lists the organization's quarantined rows, newest first (at most limit).
func (e *Engine) Quarantined(ctx context.Context, orgID string, limit int) ([]models.QuarantinedRow, error) {
	return e.maintenance.Quarantined(ctx, orgID, limit)
}

// ReleaseQuarantined takes the organization's quarantined row id out of quarantine: the
// next reconciler pass tries it again (and quarantines it again if it still cannot be
// settled). Audit quarantine.released. ENOTFOUND for another organization's or an unknown id.
func (e *Engine) ReleaseQuarantined(ctx context.Context, orgID, id string, actor audit.Actor) error {
	return e.maintenance.ReleaseQuarantined(ctx, orgID, id, actor)
}

// Escalate runs one escalation pass (issue 22): every organization's open failure groups
// whose items have waited past a level of its escalation policy are raised to that level,
// their items' error records become escalated, and each level's people are told once, one
// message per level naming every group that reached it. On the database clock; safe to
// run at any time on any number of processes.
func (e *Engine) Escalate(ctx context.Context) (EscalationResult, error) {
	return e.maintenance.Escalate(ctx)
}

// Reconcile repairs executions stuck between the database and the queue (seed 001,
// "workflow reconciliation"), then folds the deltas of the counters of open work
// (models.DB.FoldOpenWork) and of failure groups (models.DB.FoldGroupCounts, PostgreSQL). It is safe to run at any time, on any number of processes.
func (e *Engine) Reconcile(ctx context.Context) (ReconcileResult, error) {
	return e.maintenance.Reconcile(ctx)
}

// Replay runs a dead letter's execution again. The dead letter must be pending; it becomes
// processing until the run settles: resolved when it succeeds, pending again with the new
// error when it fails (the same item, never a second one). Errors: ENOTFOUND when the dead
// letter is not the organization's; EINVALID with field messages for a bad request;
// ECONFLICT when the item is not pending (someone else acted on it first).
func (e *Engine) Replay(ctx context.Context, r ReplayRequest) (*ReplayResult, error) {
	return e.recovery.Replay(ctx, r)
}

// Reseal re-encrypts every sealed value at rest under the Sealer's active key: execution
// inputs (and their originals, kept when an operator edited one), attempt inputs and outputs,
// compensations' configurations (sealing those stored in clear before they were sealed),
// database connections' DSNs, notification webhook URLs (settings and deliveries) (here) and
// workflow definitions (models). Run it after
// putting a new key first in LIFELINE_ENCRYPTION_KEYS; afterwards the old keys can go. It
// returns how many column values it rewrote. Safe to run while Lifeline serves: each value
// is rewritten with a compare-and-set on its old content.
func (e *Engine) Reseal(ctx context.Context) (int, error) {
	return e.maintenance.Reseal(ctx)
}

// Retain applies the retention rules: pending dead letters past expires_at (30 days after
// they were dead-lettered) become "expired" and their payload (the input and the steps'
// states) is purged; the item itself, its error record and the audit trail stay. Items a
// replay is running (processing) wait for it. API idempotency keys past their 24 hours are
// deleted, and failures counted against circuit breakers more than an hour ago. Then every
// failure group whose kept counts differ from its items' is recounted (logged, with how many:
// RetentionResult.RepairedGroups), and every organization whose counters of open work differ
// from a recount of its items is repaired (RetentionResult.RepairedOpenWork).
func (e *Engine) Retain(ctx context.Context) (RetentionResult, error) {
	return e.maintenance.Retain(ctx)
}

// StartRollback starts the rollback of a failed execution (DLQ_PENDING or FAILED). Errors:
// ENOTFOUND; ECONFLICT when it is not failed, or was rolled back (or is being) already.
func (e *Engine) StartRollback(ctx context.Context, r RollbackRequest) (*models.Execution, error) {
	return e.rollbacks.StartRollback(ctx, r)
}

// RunAttempt claims the attempt at this generation, runs its step and records the result.
// It returns an error only when the database failed; the job should then be retried. A job
// that comes before its attempt's time by the database clock (the application's clock may
// be off) does not run it: the attempt is re-queued for its time (OutcomeDeferred).
func (e *Engine) RunAttempt(ctx context.Context, attemptID string, generation int) (Outcome, error) {
	return e.attempts.RunAttempt(ctx, attemptID, generation)
}

// Settle marks a pending dead letter resolved or skipped, with notes: its error record is
// resolved and its execution ends FAILED. Errors as Replay's.
func (e *Engine) Settle(ctx context.Context, r SettleRequest) (*ReplayResult, error) {
	return e.recovery.Settle(ctx, r)
}

// Start creates an execution and schedules its first step. It returns the execution and
// whether it was an idempotent replay of an earlier request. Errors: ENOTFOUND when the
// workflow is not in the organization; EINVALID for bad input or a reused key.
func (e *Engine) Start(ctx context.Context, r StartRequest) (*models.Execution, bool, error) {
	return e.starts.Start(ctx, r)
}

// Approvals are a dead letter's input-change requests (an accountant's edit an admin
// approves or rejects) and the reopening of an item closed by hand (Engine.Approvals).
type Approvals struct{ e *Engine }

// Approvals returns the engine's approval actions.
func (e *Engine) Approvals() Approvals { return Approvals{e: e} }

// RequestInputChange stores an accountant's edited input of a workflow that moves money as
// a request for an admin's approval, instead of running the replay (recovery.RequestInputChange).
func (a Approvals) RequestInputChange(ctx context.Context, r ChangeRequest) (*models.InputChangeRequest, error) {
	return a.e.recovery.RequestInputChange(ctx, r)
}

// ApproveInputChange approves a pending input-change request and runs its replay, or
// neither (recovery.ApproveInputChange); a second approval is ECONFLICT.
func (a Approvals) ApproveInputChange(ctx context.Context, d Decision) (*ReplayResult, error) {
	return a.e.recovery.ApproveInputChange(ctx, d)
}

// RejectInputChange rejects a pending input-change request with a note.
func (a Approvals) RejectInputChange(ctx context.Context, d Decision) (*models.InputChangeRequest, error) {
	return a.e.recovery.RejectInputChange(ctx, d)
}

// InputChanges lists a dead letter's input-change requests, newest first.
func (a Approvals) InputChanges(ctx context.Context, orgID, deadLetterID string) ([]models.InputChangeRequest, error) {
	return a.e.recovery.InputChanges(ctx, orgID, deadLetterID)
}

// Reopen makes an item closed by hand pending again (recovery.Reopen).
func (a Approvals) Reopen(ctx context.Context, r ReopenRequest) error {
	return a.e.recovery.Reopen(ctx, r)
}
