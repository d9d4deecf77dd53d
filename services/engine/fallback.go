package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"

	"lifeline/models"
	"lifeline/services/audit"
	"lifeline/services/definition"
)

// Fallbacks (issue 22; the definition's contract is in services/definition/fallback.go). An
// attempt whose circuit breaker is open, of a step that names a fallback step, does not wait
// for the breaker: FallBack ends it FAILED without a request (CodeFallback; no error record,
// nothing counted against the breaker: it is not a failure of the step) and creates the
// fallback's attempt, naming it, in the same commit. The fallback runs as any handler does
// (its templates read error and failedStep; its own retry policy, breaker and idempotency
// key, derived from the execution and the fallback step); its success stands in for the
// step's (success.stoodFor: the sequence goes on after the step, whose output later steps
// read as the fallback's: standIn); its failure for good goes to the DLQ, the reason naming
// both steps (fallbackFailed). A crash before the commit leaves the step's attempt RUNNING:
// the reconciler hands it back and it is refused again, while the breaker stays open.

// CodeFallback is the error code of an attempt an open breaker refused and whose step's
// fallback ran instead.
const CodeFallback = models.ErrCodeFallback

// fallBack records that step a's breaker refused it (w) and starts the step's fallback, step
// fi: FallBack in one commit, then the fallback's job.
func (e *attempts) fallBack(ctx context.Context, r *attemptRun, w *waitOnBreaker, fi int) (Outcome, error) {
	ex, def, a, generation, log := r.ex, r.def, r.a, r.generation, r.log
	input, err := e.sealFound(cleanJSON(r.input), tableAttempts, a.ID, "input", r.mask)
	if err != nil {
		return "", err
	}
	fb := def.Steps[fi]
	msg := fmt.Sprintf("The circuit breaker is open (the service is unavailable): the step was not run; its fallback step %q ran instead.", fb.Title())
	id := models.NewID()
	var job Job
	landed, err := e.persist(ctx, r, func(ctx context.Context) error {
		return e.commit(ctx, func(tx *gorm.DB, now time.Time) ([]Job, error) {
			var n int
			// Its own count, replay or not: two steps may share one fallback.
			if err := tx.Model(&models.StepAttempt{}).Select("COALESCE(MAX(attempt), 0)").
				Where("execution_id = ? AND step_id = ?", ex.ID, fb.ID).Scan(&n).Error; err != nil {
				return nil, err
			}
			f := newAttempt(ex, fb, fi, n+1, e.scheduleFor(fb, now))
			f.ID, f.HandlesAttemptID = id, &a.ID
			st := stateTx{tx: tx, now: now}
			if err := st.FallBack(a, generation, fallingBack{input: input, message: msg, breakerID: w.id}, &f); err != nil {
				return nil, err
			}
			if err := audit.Record(tx, audit.Entry{OrganizationID: ex.OrganizationID, Actor: audit.System, Action: "circuit.fallback",
				EntityType: "workflow_execution", EntityID: ex.ID, At: now,
				Details: map[string]any{"stepId": a.StepID, "attempt": a.Attempt, "fallbackStepId": fb.ID, "breakerId": w.id}}); err != nil {
				return nil, err
			}
			job = Job{AttemptID: f.ID, Generation: f.Generation, RunAt: f.ScheduledAt}
			return []Job{job}, nil
		})
	})
	if landed { // a try committed though it seemed to fail: queue what it created
		var f *models.StepAttempt
		if f, _, err = e.landedNext(ctx, id, false); err == nil && f != nil {
			err = e.enq.Enqueue(ctx, []Job{{AttemptID: f.ID, Generation: f.Generation, RunAt: f.ScheduledAt}})
		}
	}
	if errors.Is(err, errLost) {
		return OutcomeLost, nil
	}
	if err != nil {
		return "", err
	}
	log.InfoContext(ctx, "the step's circuit breaker is open; its fallback step runs instead", "fallback_step_id", fb.ID, "breaker_id", w.id)
	return OutcomeFallback, nil
}

// stoodFor returns the attempt that fallback attempt a stands in for (the one its open
// breaker refused), or nil when a is not a fallback's (attempts: the execution's).
func stoodFor(a *models.StepAttempt, attempts []models.StepAttempt) *models.StepAttempt {
	if a.HandlesAttemptID == nil {
		return nil
	}
	for i := range attempts {
		if at := &attempts[i]; at.ID == *a.HandlesAttemptID {
			if deref(at.ErrorCode) == CodeFallback {
				return at
			}
			return nil
		}
	}
	return nil
}

// standIn adds a succeeded fallback attempt's output to env as the output of the step it
// stood in for: steps.<step> = {output, status SUCCEEDED, attempt, fallback: the fallback's
// id}, for the steps after that step (index; -1: any). Nothing for other attempts, nor when
// the step's own success came later (a replay ran it since).
func (e *core) standIn(env map[string]any, at models.StepAttempt, attempts []models.StepAttempt, index int) error {
	if at.Status != models.StepSucceeded && at.Status != models.StepSkipped {
		return nil
	}
	o := stoodFor(&at, attempts)
	if o == nil || (index >= 0 && o.StepIndex >= index) {
		return nil
	}
	for _, own := range attempts {
		if own.StepID == o.StepID && (own.Status == models.StepSucceeded || own.Status == models.StepSkipped) && own.CreatedAt.After(at.CreatedAt) {
			return nil
		}
	}
	out, err := e.open(at.Output, tableAttempts, at.ID, "output")
	if err != nil {
		return err
	}
	env["steps"].(map[string]any)[o.StepID] = map[string]any{"output": out, "status": at.Status, "attempt": at.Attempt, "fallback": at.StepID}
	return nil
}

// stoodForStep returns the index (in def) of the step that handler stepID's latest attempt
// in ex stood in for as its fallback, with the id of the attempt it replaced; -1 when that
// attempt is not a fallback's (an on-failure handler's, or none).
func stoodForStep(tx *gorm.DB, ex *models.Execution, def *definition.Definition, stepID string) (int, *string, error) {
	var last []models.StepAttempt
	if err := tx.Where("organization_id = ? AND execution_id = ? AND step_id = ?", ex.OrganizationID, ex.ID, stepID).
		Order("attempt DESC").Limit(1).Find(&last).Error; err != nil || len(last) == 0 || last[0].HandlesAttemptID == nil {
		return -1, nil, err
	}
	var replaced []models.StepAttempt
	if err := tx.Where("organization_id = ? AND id = ?", ex.OrganizationID, *last[0].HandlesAttemptID).Limit(1).Find(&replaced).Error; err != nil {
		return -1, nil, err
	}
	if len(replaced) == 0 || deref(replaced[0].ErrorCode) != CodeFallback {
		return -1, nil, nil
	}
	return def.Index(replaced[0].StepID), last[0].HandlesAttemptID, nil
}

// fallbackFailed is the message of a fallback's failure: it names the fallback and the step
// it stood in for, and the error.
func fallbackFailed(def *definition.Definition, stood, a *models.StepAttempt, msg string) string {
	return fmt.Sprintf("The fallback step %q of step %q (its circuit breaker was open) failed: %s", title(def, a), title(def, stood), msg)
}

// title is the name of an attempt's step in def (its id when def has no such step).
func title(def *definition.Definition, a *models.StepAttempt) string {
	if i := def.Index(a.StepID); i >= 0 {
		return def.Steps[i].Title()
	}
	return a.StepID
}
