package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"gorm.io/gorm"

	"lifeline/models"
	"lifeline/models/apperr"
	"lifeline/services/audit"
	"lifeline/services/definition"
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
	// approval, when set, is the input-change request this replay runs: decided approved
	// in the replay's transaction (ApproveInputChange).
	approval *approval
}

// ReplayResult says what a replay started.
type ReplayResult struct {
	DeadLetterID string
	// ExecutionID is the execution that runs: the same one, or a full retry's new one.
	ExecutionID string
	// Replayed: an idempotent repeat of an earlier request; nothing new was started.
	Replayed bool
}

// Replay does what Engine.Replay says.
func (e *recovery) Replay(ctx context.Context, r ReplayRequest) (*ReplayResult, error) {
	if !slices.Contains(ReplayModes, r.Mode) {
		return nil, apperr.Invalid("replay.mode", map[string]string{"retryType": "must be one of " + strings.Join(ReplayModes, ", ")})
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
		return nil, apperr.Errorf(apperr.ECONFLICT, "The failed step %q is no longer in the workflow's version %d; retry the entire workflow instead.", dl.FailedStepID, version)
	}
	if ex.RollbackStatus != nil && r.Mode != ReplayFull {
		// Its completed steps were undone: their outputs must not feed the steps after them.
		// (Checked again, guarded, when the replay starts: StartReplay.)
		return nil, errRolledBack
	}
	input, inputChanged, err := e.replayInput(ex, r.Input)
	if err != nil {
		fields["modifiedInput"] = err.Error()
	}
	// What the execution is about once it runs again: an edited input may move it to another
	// period (issue 23: out of a closed one).
	var about models.About
	if err == nil {
		var aboutFields map[string]string
		if about, aboutFields, err = e.replayAbout(ctx, ex, def, input, inputChanged || r.Mode == ReplayFull); err != nil {
			return nil, err
		}
		maps.Copy(fields, aboutFields)
	}
	// The first step the replay runs: a skip goes on with the step after the skipped one.
	runsFrom := index
	if r.Mode == ReplaySkipFailed {
		runsFrom = def.After(index)
	}
	if len(fields) > 0 {
		return nil, apperr.Invalid("replay.invalid", fields)
	}
	reqHash := hashOf(r.Mode, r.FromStepID, string(r.Input), string(r.Output), fmt.Sprint(r.LatestVersion), specJSON(r.RetryPolicy), r.Notes)

	res := &ReplayResult{DeadLetterID: dl.ID, ExecutionID: ex.ID}
	e.beforeTx(TransitionStartReplay, ex.ID)
	err = e.commit(ctx, func(tx *gorm.DB, now time.Time) ([]Job, error) {
		if done, err := e.idempotent(stateTx{tx: tx, now: now}, dl, r.IdempotencyKey, reqHash, res); done || err != nil {
			return nil, err
		}
		st := stateTx{tx: tx, now: now}
		if err := refuseClosedPeriod(tx, ex.OrganizationID, def, runsFrom, about); err != nil {
			return nil, err
		}
		if r.approval != nil { // the request first: of two approvals, the second is told so
			if err := e.decide(st, r.approval.req, r.approval.d, models.ChangeApproved, r.approval.notice); err != nil {
				return nil, err
			}
		}
		if err := st.deadLetters().ClaimDeadLetter(dl, models.DLQProcessing, map[string]any{
			"manual_retry_count": gorm.Expr("manual_retry_count + 1"), "last_manual_retry_at": now}); err != nil {
			return nil, err
		}
		if _, err := st.deadLetters().CancelInputChanges(dl.ID); err != nil { // replayed otherwise: a waiting request is moot
			return nil, err
		}
		var override models.JSON
		if r.RetryPolicy != nil {
			override = models.JSON(specJSON(r.RetryPolicy))
		}
		plan := &replayPlan{dl: dl, ex: ex, wf: wf, def: def, index: index, mode: r.Mode, input: input, inputChanged: inputChanged,
			output: output, override: override, actor: r.Actor, res: res}
		if inputChanged {
			plan.about = &about
			if err := st.deadLetters().RecordAbout(dl, about); err != nil {
				return nil, err
			}
		}
		var jobs []Job
		var err error
		if r.Mode == ReplayFull {
			jobs, err = e.replayFull(st, plan)
		} else {
			jobs, err = e.replayInPlace(st, plan)
		}
		if err != nil {
			return nil, err
		}
		if err := st.deadLetters().RecordReplay(dl, res.ExecutionID); err != nil {
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
		if err := e.rememberKey(st, dl, r.IdempotencyKey, reqHash, res.ExecutionID); err != nil {
			return nil, err
		}
		return jobs, nil
	})
	if err != nil {
		return nil, err
	}
	if !res.Replayed {
		e.observer.Replayed(ex.WorkflowID, r.Mode)
		e.log.InfoContext(ctx, "dead letter replayed", "dead_letter_id", dl.ID, "mode", r.Mode, "execution_id", res.ExecutionID)
	}
	return res, nil
}

// replayPlan is what a replay's transaction does: on which dead letter and execution, from
// which step of which definition, with what input (and a skipped step's output).
type replayPlan struct {
	dl           *models.DeadLetter
	ex           *models.Execution
	wf           *models.Workflow // a full retry's workflow, at the version it runs
	def          *definition.Definition
	index        int
	mode         string
	input        []byte
	inputChanged bool
	output       []byte
	override     models.JSON
	actor        audit.Actor
	res          *ReplayResult
	// about is what the execution is about after an edited input (nil: unchanged).
	about *models.About
}

// replayInPlace runs the execution again from step index (the failed step, or an earlier one),
// or records the failed step SKIPPED and goes on with the next.
func (e *recovery) replayInPlace(st stateTx, p *replayPlan) ([]Job, error) {
	tx, now, dl, ex, def, index, mode := st.tx, st.now, p.dl, p.ex, p.def, p.index, p.mode
	input, inputChanged, output, override := p.input, p.inputChanged, p.output, p.override
	upd := map[string]any{"status": models.ExecPending, "finished_at": nil, "dead_letter_id": dl.ID, "replayed_at": now,
		"retry_override": override, "current_step_id": def.Steps[index].ID, "updated_at": now}
	mask := e.inputMasker(def, input)
	if inputChanged {
		sealed, err := e.sealFound(input, tableExecutions, ex.ID, "input", mask)
		if err != nil {
			return nil, err
		}
		upd["input"] = models.JSON(sealed)
		if p.about != nil {
			maps.Copy(upd, p.about.Columns())
		}
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
		skipped := index
		if step.Handler { // a skipped fallback stands in for its step as it would have: the sequence goes on after that step
			stood, handles, err := stoodForStep(tx, ex, def, step.ID)
			if err != nil {
				return nil, err
			}
			if stood >= 0 {
				skipped, sk.HandlesAttemptID = stood, handles
			}
		}
		if err := tx.Create(&sk).Error; err != nil {
			return nil, err
		}
		if index = def.After(skipped); index < 0 { // the skipped step was the last: the execution is done
			upd["status"], upd["current_step_id"], upd["finished_at"] = endStatus(def, skipped), nil, now
			st := stateTx{tx: tx, now: now}
			if err := st.StartReplay(ex, upd); err != nil {
				return nil, err
			}
			return nil, st.deadLetters().ResolveReplayed(ex)
		}
		upd["current_step_id"] = def.Steps[index].ID
	}
	if err := (stateTx{tx: tx, now: now}).StartReplay(ex, upd); err != nil {
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

// replayFull starts a new execution of the workflow (at wf.Version) with the original's input
// (or the edited one), linked to the original, which ends FAILED: its dead letter now follows
// the new execution.
func (e *recovery) replayFull(st stateTx, p *replayPlan) ([]Job, error) {
	tx, now, dl, ex, wf, def, input, override, actor, res := st.tx, st.now, p.dl, p.ex, p.wf, p.def, p.input, p.override, p.actor, p.res
	rules, err := deadlineSettings(tx, def, wf.OrganizationID)
	if err != nil {
		return nil, err
	}
	nx, err := e.starts.newExecution(wf, def, StartRequest{Trigger: TriggerRetry, Actor: actor}, input, rules)
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
	if err := (stateTx{tx: tx, now: now}).EndReplaced(ex); err != nil {
		return nil, err
	}
	if err := audit.Record(tx, startedEntry(&nx, actor, now)); err != nil {
		return nil, err
	}
	res.ExecutionID = nx.ID
	return []Job{{AttemptID: a.ID, Generation: a.Generation, RunAt: a.ScheduledAt}}, nil
}
