package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"gorm.io/gorm"

	"lifeline/models"
	"lifeline/services/audit"
	"lifeline/services/classify"
	"lifeline/services/definition"
	"lifeline/services/notify"
	"lifeline/services/retry"
)

// failMissingStep ends an attempt that names a step its execution's definition does not
// have (at its index): the attempt FAILED (internal / STEP_MISSING) and the execution
// FAILED, guarded on the attempt being PENDING at generation (OutcomeSkipped when it is not
// any more), audited and logged once.
func (e *attempts) failMissingStep(ctx context.Context, ex *models.Execution, a *models.StepAttempt, generation int) (Outcome, error) {
	msg := fmt.Sprintf("Step %q (position %d) is not in version %d of the workflow: the attempt cannot run.", a.StepID, a.StepIndex+1, ex.WorkflowVersion)
	err := e.commit(ctx, func(tx *gorm.DB, now time.Time) ([]Job, error) {
		if err := (stateTx{tx: tx, now: now}).FailUnrunnable(ex, a, generation, msg); err != nil {
			return nil, err
		}
		return nil, audit.Record(tx, audit.Entry{OrganizationID: ex.OrganizationID, Actor: audit.System, Action: "execution.failed",
			EntityType: "workflow_execution", EntityID: ex.ID, At: now, Details: map[string]any{"stepId": a.StepID, "errorCode": "STEP_MISSING", "message": msg}})
	})
	if errors.Is(err, errLost) {
		return OutcomeSkipped, nil
	}
	if err != nil {
		return "", err
	}
	e.log.ErrorContext(ctx, "an attempt names a step its definition does not have; the execution ended FAILED",
		"execution_id", ex.ID, "attempt_id", a.ID, "step_id", a.StepID, "step_index", a.StepIndex, "workflow_version", ex.WorkflowVersion)
	return OutcomeFailed, nil
}

// LastAttempt is the number of the last attempt a step of the execution may make in its
// current run (a replay starts a new one): its run's first attempt's number plus the
// retries its policy (policyFor) allows. attempts are the execution's, a the step's latest.
// "Attempt 2 of 5" is a.Attempt of LastAttempt.
func (e *Engine) LastAttempt(tx *gorm.DB, ex *models.Execution, def *definition.Definition, attempts []models.StepAttempt, a *models.StepAttempt) (int, error) {
	policy, err := e.policyFor(tx, ex, def, a.StepIndex)
	if err != nil {
		return 0, err
	}
	return firstOfRun(ex, attempts, a).Attempt + policy.MaxRetries, nil
}

// PolicyFor returns the retry policy an execution's step retries under: the step's and the
// workflow's policies as written in the definition version the execution started on (a
// later save does not change them), over the organization default, over the built-in one.
// A manual replay's retry-policy override (the execution's RetryOverride) is applied last.
func (e *core) policyFor(tx *gorm.DB, ex *models.Execution, def *definition.Definition, stepIndex int) (retry.Policy, error) {
	var rows []models.RetryPolicy
	if err := tx.Where("organization_id = ? AND workflow_id IS NULL AND step_id IS NULL", ex.OrganizationID).Limit(1).Find(&rows).Error; err != nil {
		return retry.Policy{}, err
	}
	var org *retry.Spec
	if len(rows) == 1 {
		var s retry.Spec
		if err := json.Unmarshal(rows[0].Spec, &s); err != nil {
			return retry.Policy{}, fmt.Errorf("retry policy %s: %w", rows[0].ID, err)
		}
		org = &s
	}
	var st *retry.Spec
	if stepIndex >= 0 && stepIndex < len(def.Steps) {
		st = def.Steps[stepIndex].RetryPolicy
	}
	var override *retry.Spec
	if len(ex.RetryOverride) > 0 {
		override = &retry.Spec{}
		if err := json.Unmarshal(ex.RetryOverride, override); err != nil {
			return retry.Policy{}, fmt.Errorf("execution %s retry override: %w", ex.ID, err)
		}
	}
	return retry.ResolveLevels(org, def.Settings.RetryPolicy, st, override), nil
}

// fail records a failed attempt and schedules its retry or dead-letters the execution. What
// it stores is made storable first; if the database still refuses it for good, the failure
// is recorded again with a plain internal error, so the attempt never loops.
func (e *attempts) fail(ctx context.Context, r *attemptRun, runErr error) (Outcome, error) {
	ex, a, mask, log := r.ex, r.a, r.mask, r.log
	c := classify.Classify(runErr)
	var he *classify.HTTPError
	if errors.As(runErr, &he) { // the service's own words and the status; the URL is in the trace
		c.Message = he.Reason()
	}
	c.Code = cleanText(c.Code, maxErrorCode)
	if o := stoodFor(a, r.attempts); o != nil { // a fallback's failure names the step it stood in for
		c.Message = fallbackFailed(r.def, o, a, c.Message)
	}
	c.Message = cleanText(e.maskText(c.Message, mask), maxErrorMessage)
	trace := cleanText(e.maskText(traceOf(runErr), mask), maxTrace)
	input, err := e.sealFound(cleanJSON(r.input), tableAttempts, a.ID, "input", mask)
	if err != nil {
		return "", err
	}
	if r.attempts == nil && a.Attempt > 1 { // not read before it ran (see RunAttempt)
		if r.attempts, err = e.db.Attempts(ctx, ex.OrganizationID, ex.ID); err != nil {
			return "", err
		}
	}
	out, err := e.failWith(ctx, r, stepFailure{err: runErr, c: c, trace: trace, input: input})
	if permanentStoreError(err) {
		log.ErrorContext(ctx, "the step's failure could not be stored as it was; storing a plain internal error", "err", err)
		c = classify.Result{Type: classify.Internal, Code: "STORE_ERROR",
			Message: cleanText(e.maskText("The step failed and the database refused to store its error: "+err.Error(), mask), maxErrorMessage)}
		return e.failWith(ctx, r, stepFailure{err: runErr, c: c})
	}
	return out, err
}

func (e *attempts) failWith(ctx context.Context, r *attemptRun, sf stepFailure) (Outcome, error) {
	ex, def, a, generation, h, attempts, log := r.ex, r.def, r.a, r.generation, r.h, r.attempts, r.log
	runErr, c, input, trace := sf.err, sf.c, sf.input, sf.trace
	r.errorType = string(c.Type)
	outcome := OutcomeRetrying
	var delay time.Duration
	var decision retry.Decision
	retryID := models.NewID()
	// The fingerprint the failure's dead letter would be grouped by, should it come to that.
	print := printOf(&models.DeadLetter{WorkflowID: ex.WorkflowID, FailedStepID: a.StepID, ErrorType: string(c.Type), Reason: c.Message}, c.Code)
	landed, err := e.persist(ctx, r, func(ctx context.Context) error {
		if err := e.circuits.ensureBreaker(ctx, h.gate, string(c.Type)); err != nil {
			return err
		}
		return e.commit(ctx, func(tx *gorm.DB, now time.Time) ([]Job, error) {
			policy, err := e.policyFor(tx, ex, def, a.StepIndex)
			if err != nil {
				return nil, err
			}
			first := firstOfRun(ex, attempts, a)
			retriesDone := a.Attempt - first.Attempt
			elapsed := time.Duration(0)
			if first.StartedAt != nil {
				elapsed = now.Sub(*first.StartedAt)
			}
			decision = policy.Decide(c.Type, retriesDone, def.UnknownRetry(), elapsed)
			if neverRetried[c.Code] {
				decision = retry.Decision{Retry: false, Reason: "error code " + c.Code + " is never retried"}
			}
			upd := map[string]any{"input": models.JSON(input), "error_type": string(c.Type), "error_code": nullable(c.Code),
				"error_message": c.Message, "stack_trace": nullable(trace), "lease_expires_at": nil, "duration_us": durationUs(r.took)}

			errRec, created, err := e.errorRecord(tx, r, sf, policy, now)
			if err != nil {
				return nil, err
			}
			released, err := e.circuits.breakerFailed(tx, r, string(c.Type), now)
			if err != nil {
				return nil, err
			}
			if created {
				if err := audit.Record(tx, audit.Entry{OrganizationID: ex.OrganizationID, Actor: audit.System, Action: "error.recorded",
					EntityType: "workflow_execution_error", EntityID: errRec.ID, At: now,
					Details: map[string]any{"executionId": ex.ID, "stepId": a.StepID, "errorType": c.Type, "errorCode": c.Code, "message": c.Message}}); err != nil {
					return nil, err
				}
			}

			if decision.Retry {
				delay = policy.Delay(retriesDone+1, e.Rand)
				if ra, ok := classify.RetryAfter(runErr); ok {
					delay = policy.WithRetryAfter(delay, ra)
				}
				next := now.Add(delay)
				upd["next_retry_at"] = next
				st := stateTx{tx: tx, now: now}
				if err := st.FinishAttempt(a, generation, models.StepRetrying, upd); err != nil {
					return nil, err
				}
				if err := st.errors().RetryError(errRec.ID, retriesDone+1, next); err != nil {
					return nil, err
				}
				if err := st.ShowStep(ex.ID, a.StepID); err != nil {
					return nil, err
				}
				step := def.Steps[a.StepIndex]
				na := newAttempt(ex, step, a.StepIndex, a.Attempt+1, next)
				// A handler's (or fallback's) retry handles the same failure.
				na.ID, na.HandlesAttemptID = retryID, a.HandlesAttemptID
				if err := tx.Create(&na).Error; err != nil {
					return nil, err
				}
				if err := audit.Record(tx, audit.Entry{OrganizationID: ex.OrganizationID, Actor: audit.System, Action: "error.retry_scheduled",
					EntityType: "workflow_execution_error", EntityID: errRec.ID, At: now,
					Details: map[string]any{"executionId": ex.ID, "stepId": a.StepID, "retry": retriesDone + 1, "maxRetries": policy.MaxRetries,
						"delayMs": delay.Milliseconds(), "nextRetryAt": next.Format(time.RFC3339Nano), "errorType": c.Type, "reason": decision.Reason}}); err != nil {
					return nil, err
				}
				if retriesDone == 0 {
					if err := e.emit(tx, stepEvent(notify.FirstFailure, r, c, now)); err != nil {
						return nil, err
					}
				}
				return append(released, Job{AttemptID: na.ID, Generation: na.Generation, RunAt: next}), nil
			}

			var jobs []Job
			outcome, jobs, err = e.failures.failedForGood(stateTx{tx: tx, now: now}, r, upd, failure{errRec, c, policy, decision, retriesDone, h.gate, retryID, &print})
			return append(released, jobs...), err
		})
	})
	if landed { // a try committed though it seemed to fail: see what it left
		var retry *models.StepAttempt
		retry, _, err = e.landedNext(ctx, retryID, false) // a retry is never claimed by its commit
		outcome = OutcomeDLQ
		if retry != nil {
			outcome = OutcomeRetrying
			if retry.StepID != a.StepID {
				outcome = OutcomeHandled
			}
			err = e.enq.Enqueue(ctx, []Job{{AttemptID: retry.ID, Generation: retry.Generation, RunAt: retry.ScheduledAt}})
		}
	}
	if errors.Is(err, errLost) {
		return OutcomeLost, nil
	}
	if err != nil {
		return "", err
	}
	e.circuits.breakerAfter(ctx, r)
	switch outcome {
	case OutcomeRetrying:
		log.InfoContext(ctx, "step failed; retry scheduled", "error_type", c.Type, "error", c.Message, "delay", delay.String(), "reason", decision.Reason)
	case OutcomeHandled:
		log.InfoContext(ctx, "step failed; its failure was handed to its handler step", "error_type", c.Type, "error", c.Message, "reason", decision.Reason)
	default:
		log.WarnContext(ctx, "step failed; execution moved to the dead-letter queue", "error_type", c.Type, "error", c.Message, "reason", decision.Reason)
	}
	return outcome, nil
}

// errorRecord records the failure sf of r's attempt on the step's open error record
// (RecordError), creating it on the first failure; it reports whether it created it.
func (e *core) errorRecord(tx *gorm.DB, r *attemptRun, sf stepFailure, policy retry.Policy, now time.Time) (*models.ExecutionError, bool, error) {
	ex, a, c, trace, input := r.ex, r.a, sf.c, sf.trace, sf.input
	state := models.MustJSON(map[string]any{"attempt": a.Attempt, "status": a.Status, "idempotencyKey": a.IdempotencyKey,
		"startedAt": a.StartedAt, "finishedAt": now})
	in := models.JSON(e.redactor.JSON(input))
	fresh := &models.ExecutionError{
		ID: models.NewID(), OrganizationID: ex.OrganizationID, ExecutionID: ex.ID, StepID: a.StepID,
		ErrorType: string(c.Type), ErrorCode: nullable(c.Code), ErrorMessage: nonEmpty(c.Message), StackTrace: nullable(trace),
		InputData: in, StepState: state, MaxRetries: policy.MaxRetries,
	}
	return stateTx{tx: tx, now: now}.errors().RecordError(fresh, map[string]any{"error_type": string(c.Type), "error_code": nullable(c.Code),
		"error_message": c.Message, "stack_trace": nullable(trace), "input_data": in, "step_state": state})
}

func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func nonEmpty(s string) string {
	if strings.TrimSpace(s) == "" {
		return "(no message)"
	}
	return s
}

// traceOf returns what the UI shows as the stack or trace of a failure.
func traceOf(err error) string {
	var p *panicError
	if errors.As(err, &p) {
		return p.stack
	}
	var he *classify.HTTPError
	if errors.As(err, &he) {
		var b strings.Builder
		fmt.Fprintf(&b, "%s %s\n→ HTTP %d", he.Method, he.URL, he.StatusCode)
		if he.RetryAfter > 0 {
			fmt.Fprintf(&b, "\nRetry-After: %s", he.RetryAfter)
		}
		if he.Body != "" {
			fmt.Fprintf(&b, "\n\n%s", he.Body)
		}
		return b.String()
	}
	var lines []string
	for e := err; e != nil; e = errors.Unwrap(e) {
		lines = append(lines, fmt.Sprintf("%T: %v", e, e))
		if len(lines) > 10 {
			break
		}
	}
	if len(lines) <= 1 {
		return ""
	}
	return strings.Join(lines, "\n")
}
