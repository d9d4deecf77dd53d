package engine

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"gorm.io/gorm"

	"lifeline/models"
	"lifeline/services/audit"
	"lifeline/services/definition"
	"lifeline/services/redact"
	"lifeline/services/retry"
)

// Replay modes: seed 000's manualRetrySchema retryType, and seed 002's FROM_STEP.
const (
	// ReplayFromFailed runs the failed step again; the outputs of the steps before it are
	// reused (scenario 6).
	ReplayFromFailed = "from_failed"
	// ReplayFromStep runs the steps from FromStepID on again; earlier outputs are reused.
	ReplayFromStep = "from_step"
	// ReplaySkipFailed records the failed step as SKIPPED, with the operator's output, and
	// continues with the next step.
	ReplaySkipFailed = "skip_failed"
	// ReplayFull starts a new execution of the workflow, linked to the original.
	ReplayFull = "full"
)

// ReplayModes lists the modes.
var ReplayModes = []string{ReplayFromFailed, ReplayFromStep, ReplaySkipFailed, ReplayFull}

// MaxNotes bounds resolution notes (seed 000 processDLQSchema).
const MaxNotes = 2000

// ReplayRequest asks to run a dead-lettered execution again.
type ReplayRequest struct {
	OrganizationID string
	DeadLetterID   string
	Mode           string
	// FromStepID names the first step to run again (ReplayFromStep).
	FromStepID string
	// Input, when set, replaces the execution's input (a JSON object). Values given as
	// redact.Placeholder keep the stored value at the same path, so a masked secret is
	// never overwritten by its mask. The original input stays on record.
	Input json.RawMessage
	// Output is the skipped step's output (ReplaySkipFailed); empty: {}.
	Output json.RawMessage
	// RetryPolicy overrides the retry policy of every step while the replay runs.
	RetryPolicy *retry.Spec
	// LatestVersion runs the workflow's latest definition (ReplayFull); else the version the
	// original ran on.
	LatestVersion bool
	Notes         string
	Actor         audit.Actor
	// IdempotencyKey makes the request idempotent for Config.IdempotencyTTL: the same key
	// with the same request returns the first result again.
	IdempotencyKey string
}

// ReplayResult says what a replay started.
type ReplayResult struct {
	DeadLetterID string
	// ExecutionID is the execution that runs: the same one, or a full retry's new one.
	ExecutionID string
	// Replayed: an idempotent repeat of an earlier request; nothing new was started.
	Replayed bool
}

// Replay runs a dead letter's execution again. The dead letter must be pending; it becomes
// processing until the run settles: resolved when it succeeds, pending again with the new
// error when it fails (the same item, never a second one). Errors: ENOTFOUND when the dead
// letter is not the organization's; EINVALID with field messages for a bad request;
// ECONFLICT when the item is not pending (someone else acted on it first).
func (e *Engine) Replay(ctx context.Context, r ReplayRequest) (*ReplayResult, error) {
	if !slices.Contains(ReplayModes, r.Mode) {
		return nil, models.Invalid("replay.mode", map[string]string{"retryType": "must be one of " + strings.Join(ReplayModes, ", ")})
	}
	fields := map[string]string{}
	if utf8.RuneCountInString(r.Notes) > MaxNotes {
		fields["resolutionNotes"] = fmt.Sprintf("must be at most %d characters", MaxNotes)
	}
	if r.RetryPolicy != nil {
		for k, v := range r.RetryPolicy.Validate() {
			fields["retryPolicy."+k] = v
		}
	}
	if len(r.IdempotencyKey) > 255 {
		fields["Idempotency-Key"] = "must be at most 255 characters"
	}
	var output []byte
	if r.Mode == ReplaySkipFailed {
		var err error
		if output, err = normalizeValue(r.Output); err != nil {
			fields["output"] = err.Error()
		}
	}
	dl, ex, err := e.deadLetterOf(ctx, r.OrganizationID, r.DeadLetterID)
	if err != nil {
		return nil, err
	}
	// The definition the replay runs, read before the transaction (SQLite has one connection).
	version := ex.WorkflowVersion
	var wf *models.Workflow
	if r.Mode == ReplayFull {
		if wf, err = e.db.GetWorkflow(ctx, ex.OrganizationID, ex.WorkflowID); err != nil {
			return nil, err
		}
		if r.LatestVersion {
			version = wf.Version
		}
		wf.Version = version
	}
	def, err := e.definitionFor(ctx, ex.OrganizationID, ex.WorkflowID, version)
	if err != nil {
		return nil, err
	}
	failedIdx := def.Index(dl.FailedStepID)
	index := failedIdx
	switch r.Mode {
	case ReplayFromStep:
		index = def.Index(r.FromStepID)
		switch {
		case r.FromStepID == "":
			fields["fromStepId"] = "is required to resume from a step"
		case index < 0:
			fields["fromStepId"] = fmt.Sprintf("names no step of this workflow (version %d)", version)
		case failedIdx >= 0 && index > failedIdx:
			fields["fromStepId"] = "must be the failed step or one before it"
		case def.Steps[index].Handler && index != failedIdx:
			fields["fromStepId"] = "is a handler step, which runs only when a failure is handed to it; resume from a step of the normal sequence"
		}
	case ReplayFull:
		index = def.First()
	}
	if index < 0 && fields["fromStepId"] == "" {
		return nil, models.Errorf(models.ECONFLICT, "The failed step %q is no longer in the workflow's version %d; retry the entire workflow instead.", dl.FailedStepID, version)
	}
	if ex.RollbackStatus != nil && r.Mode != ReplayFull {
		// Its completed steps were undone: their outputs must not feed the steps after them.
		// (Checked again, guarded, when the replay starts: startReplay.)
		return nil, errRolledBack
	}
	input, inputChanged, err := e.replayInput(ex, r.Input)
	if err != nil {
		fields["modifiedInput"] = err.Error()
	}
	if len(fields) > 0 {
		return nil, models.Invalid("replay.invalid", fields)
	}
	reqHash := hashOf(r.Mode, r.FromStepID, string(r.Input), string(r.Output), fmt.Sprint(r.LatestVersion), specJSON(r.RetryPolicy), r.Notes)

	res := &ReplayResult{DeadLetterID: dl.ID, ExecutionID: ex.ID}
	e.beforeTx(TransitionStartReplay, ex.ID)
	err = e.commit(ctx, func(tx *gorm.DB, now time.Time) ([]Job, error) {
		if done, err := e.idempotent(tx, dl, r.IdempotencyKey, reqHash, now, res); done || err != nil {
			return nil, err
		}
		if err := claimDeadLetter(tx, dl, models.DLQProcessing, now, map[string]any{
			"manual_retry_count": gorm.Expr("manual_retry_count + 1"), "last_manual_retry_at": now}); err != nil {
			return nil, err
		}
		var override models.JSON
		if r.RetryPolicy != nil {
			override = models.JSON(specJSON(r.RetryPolicy))
		}
		var jobs []Job
		var err error
		if r.Mode == ReplayFull {
			jobs, err = e.replayFull(tx, dl, ex, wf, def, input, override, r.Actor, now, res)
		} else {
			jobs, err = e.replayInPlace(tx, dl, ex, def, index, r.Mode, input, inputChanged, output, override, now)
		}
		if err != nil {
			return nil, err
		}
		if err := tx.Model(&models.DeadLetter{}).Where("id = ?", dl.ID).Update("replay_execution_id", res.ExecutionID).Error; err != nil {
			return nil, err
		}
		details := map[string]any{"mode": r.Mode, "executionId": res.ExecutionID, "originalExecutionId": ex.ID, "stepId": def.Steps[index].ID}
		if r.Notes != "" {
			details["notes"] = r.Notes
		}
		if r.RetryPolicy != nil {
			details["retryPolicy"] = r.RetryPolicy
		}
		if r.Mode == ReplayFull {
			details["version"] = version
		}
		before, _ := e.open(ex.Input, tableExecutions, ex.ID, "input")
		var after any
		_ = json.Unmarshal(input, &after)
		mask := e.masker(def, before, after)
		if inputChanged {
			details["inputBefore"], details["inputAfter"] = mask.Value(e.redactor.Value(before)), mask.Value(e.redactor.Value(after))
		}
		if r.Mode == ReplaySkipFailed {
			var out any
			_ = json.Unmarshal(output, &out)
			details["output"] = mask.Value(e.redactor.Value(out))
		}
		if notes, ok := details["notes"].(string); ok {
			details["notes"] = mask.Mask(notes)
		}
		if err := audit.Record(tx, audit.Entry{OrganizationID: dl.OrganizationID, Actor: r.Actor, Action: "dlq.retry",
			EntityType: "dead_letter_queue", EntityID: dl.ID, At: now, Details: details}); err != nil {
			return nil, err
		}
		if err := e.rememberKey(tx, dl, r.IdempotencyKey, reqHash, res.ExecutionID, now); err != nil {
			return nil, err
		}
		return jobs, nil
	})
	if err != nil {
		return nil, err
	}
	if !res.Replayed {
		e.log.InfoContext(ctx, "dead letter replayed", "dead_letter_id", dl.ID, "mode", r.Mode, "execution_id", res.ExecutionID)
	}
	return res, nil
}

// replayInPlace runs the execution again from step index (the failed step, or an earlier one),
// or records the failed step SKIPPED and goes on with the next.
func (e *Engine) replayInPlace(tx *gorm.DB, dl *models.DeadLetter, ex *models.Execution, def *definition.Definition, index int, mode string,
	input []byte, inputChanged bool, output []byte, override models.JSON, now time.Time) ([]Job, error) {
	upd := map[string]any{"status": models.ExecPending, "finished_at": nil, "dead_letter_id": dl.ID, "replayed_at": now,
		"retry_override": override, "current_step_id": def.Steps[index].ID, "updated_at": now}
	mask := e.inputMasker(def, input)
	if inputChanged {
		sealed, err := e.sealFound(input, tableExecutions, ex.ID, "input", mask)
		if err != nil {
			return nil, err
		}
		upd["input"] = models.JSON(sealed)
		if len(ex.OriginalInput) == 0 { // the first edit keeps what the execution started with
			orig, err := e.open(ex.Input, tableExecutions, ex.ID, "input")
			if err != nil {
				return nil, err
			}
			raw, _ := json.Marshal(orig)
			if raw, err = e.sealFound(raw, tableExecutions, ex.ID, "original_input", e.masker(def, orig)); err != nil {
				return nil, err
			}
			upd["original_input"] = models.JSON(raw)
		}
	}
	ex.DeadLetterID, ex.ReplayedAt, ex.RetryOverride = &dl.ID, &now, override
	if mode == ReplaySkipFailed {
		step := def.Steps[index]
		number, err := nextAttemptNumber(tx, ex, step.ID)
		if err != nil {
			return nil, err
		}
		sk := newAttempt(ex, step, index, number, now)
		sealed, err := e.sealFound(output, tableAttempts, sk.ID, "output", mask)
		if err != nil {
			return nil, err
		}
		sk.Status, sk.Output, sk.StartedAt, sk.FinishedAt = models.StepSkipped, models.JSON(sealed), &now, &now
		if err := tx.Create(&sk).Error; err != nil {
			return nil, err
		}
		skipped := index
		if index = def.After(index); index < 0 { // the skipped step was the last: the execution is done
			upd["status"], upd["current_step_id"], upd["finished_at"] = endStatus(def, skipped), nil, now
			if err := startReplay(tx, ex, upd); err != nil {
				return nil, err
			}
			return nil, e.replaySucceeded(tx, ex, now)
		}
		upd["current_step_id"] = def.Steps[index].ID
	}
	if err := startReplay(tx, ex, upd); err != nil {
		return nil, err
	}
	step := def.Steps[index]
	number, err := nextAttemptNumber(tx, ex, step.ID)
	if err != nil {
		return nil, err
	}
	a := newAttempt(ex, step, index, number, now)
	if mode == ReplaySkipFailed {
		a.ScheduledAt = e.scheduleFor(step, now)
	}
	if step.Handler { // the handler runs again for the failure it was handed
		var last models.StepAttempt
		if err := tx.Where("execution_id = ? AND step_id = ?", ex.ID, step.ID).Order("attempt DESC").First(&last).Error; err != nil {
			return nil, err
		}
		a.HandlesAttemptID = last.HandlesAttemptID
	}
	if err := tx.Create(&a).Error; err != nil {
		return nil, err
	}
	return []Job{{AttemptID: a.ID, Generation: a.Generation, RunAt: a.ScheduledAt}}, nil
}

// replayable are the statuses a replay in place starts from.
var replayable = []string{models.ExecDLQPending, models.ExecFailed}

// errRolledBack: the execution's completed steps were (or are being) undone.
var errRolledBack = models.Errorf(models.ECONFLICT, "This execution was rolled back: its completed steps were undone and their outputs cannot be reused. Retry the entire workflow instead.")

// startReplay is the transition StartReplay: it changes ex (upd) only while it is
// dead-lettered or failed and no rollback has started on it, and is ECONFLICT (errRolledBack,
// or the status it has now) when it lost to another change, a rollback started at the same
// moment included.
func startReplay(tx *gorm.DB, ex *models.Execution, upd map[string]any) error {
	r := tx.Model(&models.Execution{}).Where("id = ? AND organization_id = ? AND rollback_status IS NULL AND status IN ?",
		ex.ID, ex.OrganizationID, replayable).Updates(upd)
	if r.Error != nil || r.RowsAffected == 1 {
		return r.Error
	}
	var cur models.Execution
	if err := tx.Select("status, rollback_status").Where("id = ?", ex.ID).First(&cur).Error; err != nil {
		return err
	}
	if cur.RollbackStatus != nil {
		return errRolledBack
	}
	return models.Errorf(models.ECONFLICT, "The execution is %s now; it can be replayed only when it has failed.", cur.Status)
}

// replayFull starts a new execution of the workflow (at wf.Version) with the original's input
// (or the edited one), linked to the original, which ends FAILED: its dead letter now follows
// the new execution.
func (e *Engine) replayFull(tx *gorm.DB, dl *models.DeadLetter, ex *models.Execution, wf *models.Workflow, def *definition.Definition,
	input []byte, override models.JSON, actor audit.Actor, now time.Time, res *ReplayResult) ([]Job, error) {
	nx, err := e.newExecution(wf, def, StartRequest{Trigger: TriggerRetry, Actor: actor}, input)
	if err != nil {
		return nil, err
	}
	nx.RetryOf, nx.DeadLetterID, nx.ReplayedAt, nx.RetryOverride = &ex.ID, &dl.ID, &now, override
	nx.CreatedAt, nx.UpdatedAt = now, now
	if err := tx.Create(&nx).Error; err != nil {
		return nil, err
	}
	fi := def.First()
	first := def.Steps[fi]
	a := newAttempt(&nx, first, fi, 1, e.scheduleFor(first, now))
	if err := tx.Create(&a).Error; err != nil {
		return nil, err
	}
	if err := tx.Model(&models.Execution{}).Where("id = ?", ex.ID).
		Updates(map[string]any{"status": models.ExecFailed, "updated_at": now}).Error; err != nil {
		return nil, err
	}
	if err := audit.Record(tx, startedEntry(&nx, actor, now)); err != nil {
		return nil, err
	}
	res.ExecutionID = nx.ID
	return []Job{{AttemptID: a.ID, Generation: a.Generation, RunAt: a.ScheduledAt}}, nil
}

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

// Settle marks a pending dead letter resolved or skipped, with notes: its error record is
// resolved and its execution ends FAILED. Errors as Replay's.
func (e *Engine) Settle(ctx context.Context, r SettleRequest) (*ReplayResult, error) {
	fields := map[string]string{}
	if r.Status != models.DLQResolved && r.Status != models.DLQSkipped {
		fields["action"] = "must be resolve or skip"
	}
	if utf8.RuneCountInString(r.Notes) > MaxNotes {
		fields["resolutionNotes"] = fmt.Sprintf("must be at most %d characters", MaxNotes)
	}
	if len(fields) > 0 {
		return nil, models.Invalid("replay.invalid", fields)
	}
	dl, ex, err := e.deadLetterOf(ctx, r.OrganizationID, r.DeadLetterID)
	if err != nil {
		return nil, err
	}
	reqHash := hashOf(r.Status, r.Notes)
	res := &ReplayResult{DeadLetterID: dl.ID, ExecutionID: ex.ID}
	e.beforeTx(TransitionStartReplay, ex.ID)
	err = e.commit(ctx, func(tx *gorm.DB, now time.Time) ([]Job, error) {
		if done, err := e.idempotent(tx, dl, r.IdempotencyKey, reqHash, now, res); done || err != nil {
			return nil, err
		}
		var by *string
		if r.Actor.Type == audit.ActorUser && r.Actor.ID != "" {
			by = &r.Actor.ID
		}
		if err := claimDeadLetter(tx, dl, r.Status, now, map[string]any{"resolution_notes": nullable(r.Notes), "resolved_by": by, "resolved_at": now}); err != nil {
			return nil, err
		}
		kind := "manual"
		if r.Status == models.DLQSkipped {
			kind = "skipped"
		}
		if err := tx.Model(&models.ExecutionError{}).Where("id = ?", dl.ErrorID).Updates(map[string]any{"status": models.ErrResolved,
			"resolution_type": kind, "resolution_notes": nullable(r.Notes), "resolved_by": by, "resolved_at": now, "updated_at": now}).Error; err != nil {
			return nil, err
		}
		if err := tx.Model(&models.Execution{}).Where("id = ? AND status = ?", ex.ID, models.ExecDLQPending).
			Updates(map[string]any{"status": models.ExecFailed, "updated_at": now}).Error; err != nil {
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
		return nil, e.rememberKey(tx, dl, r.IdempotencyKey, reqHash, ex.ID, now)
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

// deadLetterOf loads a dead letter of the organization and the execution it is about.
func (e *Engine) deadLetterOf(ctx context.Context, orgID, id string) (*models.DeadLetter, *models.Execution, error) {
	var dl models.DeadLetter
	if err := e.db.Conn(ctx).Where("organization_id = ? AND id = ?", orgID, id).First(&dl).Error; err != nil {
		if models.IsNotFound(err) {
			return nil, nil, models.NotFound("dead letter")
		}
		return nil, nil, err
	}
	ex, err := e.db.GetExecution(ctx, orgID, dl.ExecutionID)
	if err != nil {
		return nil, nil, err
	}
	return &dl, ex, nil
}

// claimDeadLetter moves a pending dead letter to status (compare-and-set): of two people
// acting at once, one wins; the other gets ECONFLICT naming what happened.
func claimDeadLetter(tx *gorm.DB, dl *models.DeadLetter, status string, now time.Time, extra map[string]any) error {
	upd := map[string]any{"status": status, "updated_at": now}
	for k, v := range extra {
		upd[k] = v
	}
	r := tx.Model(&models.DeadLetter{}).Where("id = ? AND status = ?", dl.ID, models.DLQPending).Updates(upd)
	if r.Error != nil {
		return r.Error
	}
	if r.RowsAffected == 1 {
		return nil
	}
	var cur models.DeadLetter
	if err := tx.Select("status").Where("id = ?", dl.ID).First(&cur).Error; err != nil {
		return err
	}
	return &models.Error{Code: models.ECONFLICT, Message: "dlq.conflict." + cur.Status}
}

// replaySucceeded settles the dead letter a replay served when its execution succeeds: the
// item resolved, its error record resolved (manual_retry).
func (e *Engine) replaySucceeded(tx *gorm.DB, ex *models.Execution, now time.Time) error {
	if ex.DeadLetterID == nil {
		return nil
	}
	var dl models.DeadLetter
	err := tx.Where("id = ? AND status = ?", *ex.DeadLetterID, models.DLQProcessing).First(&dl).Error
	if models.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if err := tx.Model(&models.DeadLetter{}).Where("id = ?", dl.ID).
		Updates(map[string]any{"status": models.DLQResolved, "resolved_at": now, "updated_at": now}).Error; err != nil {
		return err
	}
	if err := tx.Model(&models.ExecutionError{}).Where("id = ? AND status = ?", dl.ErrorID, models.ErrDeadLetter).
		Updates(map[string]any{"status": models.ErrResolved, "resolution_type": "manual_retry", "resolved_at": now, "updated_at": now}).Error; err != nil {
		return err
	}
	return audit.Record(tx, audit.Entry{OrganizationID: dl.OrganizationID, Actor: audit.System, Action: "dlq.resolved",
		EntityType: "dead_letter_queue", EntityID: dl.ID, At: now,
		Details: map[string]any{"executionId": ex.ID, "resolution": "replay_succeeded"}})
}

// nextAttemptNumber is the number of a step's next attempt: 1, or one more than the last
// when the step ran before (a replay).
func nextAttemptNumber(tx *gorm.DB, ex *models.Execution, stepID string) (int, error) {
	if ex.ReplayedAt == nil {
		return 1, nil
	}
	var n int
	err := tx.Model(&models.StepAttempt{}).Select("COALESCE(MAX(attempt), 0)").
		Where("execution_id = ? AND step_id = ?", ex.ID, stepID).Scan(&n).Error
	return n + 1, err
}

// firstOfRun is the first attempt of a's step in the current run: retries are counted from
// it, so a manual replay starts with the full retry budget.
func firstOfRun(ex *models.Execution, attempts []models.StepAttempt, a *models.StepAttempt) *models.StepAttempt {
	first := a
	for i := range attempts {
		at := &attempts[i]
		if at.StepID != a.StepID || at.Attempt >= first.Attempt {
			continue
		}
		if ex.ReplayedAt != nil && at.CreatedAt.Before(*ex.ReplayedAt) {
			continue
		}
		first = at
	}
	return first
}

// replayInput returns the input a replay runs with: the execution's own (opened), or the edited
// one with masked values restored from the stored input; and whether it differs.
func (e *Engine) replayInput(ex *models.Execution, edited json.RawMessage) ([]byte, bool, error) {
	stored, err := e.open(ex.Input, tableExecutions, ex.ID, "input")
	if err != nil {
		return nil, false, err
	}
	storedRaw, _ := json.Marshal(stored)
	if len(bytes.TrimSpace(edited)) == 0 {
		return storedRaw, false, nil
	}
	norm, err := normalizeInput(edited)
	if err != nil {
		if me, ok := err.(*models.Error); ok && len(me.Fields) > 0 {
			return nil, false, fmt.Errorf("%s", me.Fields["input"])
		}
		return nil, false, err
	}
	var v, shown any
	_ = json.Unmarshal(norm, &v)
	_ = json.Unmarshal(e.redactor.JSON(ex.Input), &shown) // as the editor was filled
	restored, _ := json.Marshal(redact.RestoreAsShown(v, stored, shown))
	var cmp any
	_ = json.Unmarshal(storedRaw, &cmp)
	canon, _ := json.Marshal(cmp)
	return restored, !bytes.Equal(restored, canon), nil
}

// normalizeValue checks an operator's JSON value (empty: {}) and returns it compacted.
func normalizeValue(raw json.RawMessage) ([]byte, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return []byte("{}"), nil
	}
	var v any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil || dec.More() {
		return nil, fmt.Errorf("is not valid JSON")
	}
	if p := unstorable(v, "output"); p != "" {
		return nil, fmt.Errorf("%s", p)
	}
	if len(raw) > 1<<20 {
		return nil, fmt.Errorf("must be at most 1 MiB")
	}
	return json.Marshal(v)
}

// idempotent answers a repeated request: when key was used for this dead letter with the
// same request, res becomes the first result (Replayed) and done is true; with a different
// request it is EINVALID.
func (e *Engine) idempotent(tx *gorm.DB, dl *models.DeadLetter, key, reqHash string, now time.Time, res *ReplayResult) (bool, error) {
	if key == "" {
		return false, nil
	}
	var k models.IdempotencyKey
	err := tx.Where("organization_id = ? AND workflow_id = ? AND idem_key = ?", dl.OrganizationID, dl.WorkflowID, dlqKey(dl.ID, key)).First(&k).Error
	switch {
	case err == nil && k.ExpiresAt.After(now):
		if k.RequestHash != reqHash {
			return false, models.Invalid("This Idempotency-Key was already used with a different request body.",
				map[string]string{"Idempotency-Key": "was already used with a different request body; use a new key"})
		}
		res.ExecutionID, res.Replayed = k.ExecutionID, true
		return true, nil
	case err == nil:
		return false, tx.Delete(&k).Error
	case models.IsNotFound(err):
		return false, nil
	}
	return false, err
}

func (e *Engine) rememberKey(tx *gorm.DB, dl *models.DeadLetter, key, reqHash, executionID string, now time.Time) error {
	if key == "" {
		return nil
	}
	return tx.Create(&models.IdempotencyKey{OrganizationID: dl.OrganizationID, WorkflowID: dl.WorkflowID, IdemKey: dlqKey(dl.ID, key),
		RequestHash: reqHash, ExecutionID: executionID, CreatedAt: now, ExpiresAt: now.Add(e.cfg.IdempotencyTTL)}).Error
}

// dlqKey keeps a dead letter's action keys apart from start keys of the same workflow.
func dlqKey(dlqID, key string) string { return "dlq:" + hashOf(dlqID, key)[:48] }

func hashOf(parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))
}

func specJSON(s *retry.Spec) string {
	if s == nil {
		return ""
	}
	b, _ := json.Marshal(s)
	return string(b)
}
