package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"lifeline/models"
	"lifeline/services/audit"
	"lifeline/services/classify"
	"lifeline/services/fingerprint"
	"lifeline/services/notify"
	"lifeline/services/retry"
	"lifeline/services/tmpl"
)

// On-failure handlers (issue 13). A step that fails for good is handed to the handler step
// its on-failure rule names for the error's type, instead of the dead-letter queue: the
// failed attempt ends FAILED, its error record is resolved as "handled", and the handler's
// first attempt is created in the same transaction, naming the attempt it handles. The
// handler runs like any step (its own retry policy, idempotency key, lease). When it
// succeeds the execution goes on at the step its next names, or ends PARTIAL. A handler that
// fails for good sends the execution to the DLQ: a handler never triggers another handler.

// failure is what failWith (and the reconciler's exhaust) know about a step that failed for good.
type failure struct {
	rec         *models.ExecutionError
	c           classify.Result
	policy      retry.Policy
	decision    retry.Decision
	retriesDone int
	gate        *gate
	// handlerID is the id the handler's attempt gets, if the step has one for the error.
	handlerID string
	// print, when not nil, is the failure's fingerprint, worked out before its
	// transaction (so that SQLite's one writer does not wait for it); nil: deadLetter works
	// it out.
	print *fingerprint.Print
}

// failedForGood settles a step that failed for good, in tx: its handler runs when its
// on-failure rule names one for the error's type (the handler attempt gets id handlerID);
// else the execution goes to the DLQ, and is rolled back when the workflow says so. upd is
// what the failed attempt is finished with (its status is set here).
func (e *failures) failedForGood(st stateTx, r *attemptRun, upd map[string]any, f failure) (Outcome, []Job, error) {
	tx, now, ex, def, a, generation := st.tx, st.now, r.ex, r.def, r.a, r.generation
	// Retries ran out (rather than the error being one that is never retried).
	exhausted := f.policy.Decide(f.c.Type, 0, def.UnknownRetry(), 0).Retry
	// A held value's execution calls nothing: no handler, no rollback (held.go).
	held := f.c.Code == CodeQuarantined
	if hi, _ := def.HandlerFor(a.StepIndex, string(f.c.Type)); hi >= 0 && !held {
		if err := st.FinishAttempt(a, generation, models.StepFailed, upd); err != nil {
			return "", nil, err
		}
		jobs, err := e.handOver(st, r, f, hi)
		if err == nil && exhausted {
			err = e.emit(tx, stepEvent(notify.RetryExhausted, r, f.c, now))
		}
		return OutcomeHandled, jobs, err
	}
	if err := st.FinishAttempt(a, generation, models.StepDLQ, upd); err != nil {
		return "", nil, err
	}
	var join GroupJoin
	if err := e.deadLetter(st, r, f, &join); err != nil {
		return "", nil, err
	}
	ev := stepEvent(notify.DLQ, r, f.c, now)
	ev.RetriesExhausted = exhausted
	groupEvent(&ev, join)
	if err := e.emit(tx, ev); err != nil {
		return "", nil, err
	}
	if def.Settings.RollbackOnFailure && !held {
		jobs, err := e.rollbacks.startRollbackTx(tx, ex, def, audit.System, now)
		if errors.Is(err, errNothingToUndo) {
			return OutcomeDLQ, nil, nil
		}
		return OutcomeDLQ, jobs, err
	}
	return OutcomeDLQ, nil, nil
}

// handOver resolves the failed step's error record as handled and creates the first attempt
// of handler step hi, naming the failed attempt; it returns the attempt's job.
func (e *failures) handOver(st stateTx, r *attemptRun, f failure, hi int) ([]Job, error) {
	tx, now, ex, def, failed, id := st.tx, st.now, r.ex, r.def, r.a, f.handlerID
	if err := st.errors().HandOverError(f.rec.ID); err != nil {
		return nil, err
	}
	if err := retriesExhausted(st, r, f); err != nil {
		return nil, err
	}
	step := def.Steps[hi]
	number, err := nextAttemptNumber(tx, ex, step.ID)
	if err != nil {
		return nil, err
	}
	h := newAttempt(ex, step, hi, number, e.scheduleFor(step, now))
	h.ID, h.HandlesAttemptID = id, &failed.ID
	if err := tx.Create(&h).Error; err != nil {
		return nil, err
	}
	if err := st.ShowStep(ex.ID, step.ID); err != nil {
		return nil, err
	}
	if err := audit.Record(tx, audit.Entry{OrganizationID: ex.OrganizationID, Actor: audit.System, Action: "error.handled",
		EntityType: "workflow_execution_error", EntityID: f.rec.ID, At: now,
		Details: map[string]any{"executionId": ex.ID, "stepId": failed.StepID, "handlerStepId": step.ID, "errorType": f.c.Type,
			"errorCode": f.c.Code, "message": f.c.Message}}); err != nil {
		return nil, err
	}
	return []Job{{AttemptID: h.ID, Generation: h.Generation, RunAt: h.ScheduledAt}}, nil
}

// handlerEnv returns a copy of env with what a handler attempt's templates read besides it:
// error (type, code, message: the failed attempt's, masked when it was stored), failedStep
// (id, input: what the failed attempt sent) and mapped (the rule's input mapping, rendered
// over the rest). mapped is also returned as JSON (nil without a mapping): it is recorded as
// the handler attempt's input. Errors are classified (the step fails with them).
func (e *failures) handlerEnv(ctx context.Context, r *attemptRun, env map[string]any) (map[string]any, json.RawMessage, error) {
	ex, def, a, attempts := r.ex, r.def, r.a, r.attempts
	var failed *models.StepAttempt
	for i := range attempts {
		if attempts[i].ID == *a.HandlesAttemptID {
			failed = &attempts[i]
		}
	}
	if failed == nil {
		var f models.StepAttempt
		if err := e.db.Conn(ctx).Where("organization_id = ? AND id = ?", ex.OrganizationID, *a.HandlesAttemptID).First(&f).Error; err != nil {
			if models.IsNotFound(err) {
				return nil, nil, classify.New(classify.Internal, "HANDLED_ATTEMPT", "the failed attempt this handler handles is gone")
			}
			return nil, nil, err
		}
		failed = &f
	}
	in, err := e.open(failed.Input, tableAttempts, failed.ID, "input")
	if err != nil {
		return nil, nil, classify.New(classify.Internal, "DECRYPT", err.Error())
	}
	errType := deref(failed.ErrorType)
	out := make(map[string]any, len(env)+3)
	for k, v := range env {
		out[k] = v
	}
	out["error"] = map[string]any{"type": errType, "code": deref(failed.ErrorCode), "message": deref(failed.ErrorMessage)}
	out["failedStep"] = map[string]any{"id": failed.StepID, "input": in}
	out["mapped"] = map[string]any{}
	if deref(failed.ErrorCode) == CodeFallback { // a fallback: no on-failure rule chose it, none maps its input
		return out, nil, nil
	}
	_, rule := def.HandlerFor(failed.StepIndex, errType)
	if rule == nil || len(rule.InputMapping) == 0 {
		return out, nil, nil
	}
	mapped, err := tmpl.Render(rule.InputMapping, out)
	if err != nil {
		return nil, nil, classify.New(classify.Validation, "TEMPLATE", fmt.Sprintf("inputMapping: %v", err))
	}
	out["mapped"] = mapped
	raw, _ := json.Marshal(mapped)
	return out, raw, nil
}
