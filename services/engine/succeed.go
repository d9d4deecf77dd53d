package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"gorm.io/gorm"

	"lifeline/models"
	"lifeline/services/classify"
	"lifeline/services/definition"
	"lifeline/services/redact"
)

// landedNext reads the next attempt a commit that landed created (nil when it created none)
// and reports whether it is this worker's to run: only when the commit claimed it (claim:
// the next step was runnable at once and the worker chains) and it is still RUNNING at the
// generation it was created with. The commit queued no job for an attempt it claimed, so no
// one else can hold that generation; a reclaim (after a long outage, its lease ran out)
// moves it to the next one, which another worker may hold: that one is not run here, or the
// same idempotency key would be sent twice at once.
func (e *Engine) landedNext(ctx context.Context, id string, claim bool) (*models.StepAttempt, bool, error) {
	var n models.StepAttempt
	err := e.db.Conn(ctx).Where("id = ?", id).First(&n).Error
	if models.IsNotFound(err) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	return &n, claim && n.Status == models.StepRunning && n.Generation == firstGeneration, nil
}

// claimsNext reports whether the commit recording step index's success claims the step after
// it (when the worker chains): there is one and it is runnable at once (no delay).
func (e *Engine) claimsNext(def *definition.Definition, index int) bool {
	i := def.After(index)
	return i >= 0 && e.delayOf(def.Steps[i]) == 0
}

// showRunning writes a step as its execution's current step if its attempt is still running.
func (e *Engine) showRunning(executionID, attemptID, stepID string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	now, err := e.now(ctx)
	if err == nil {
		err = e.db.Conn(ctx).Model(&models.Execution{}).
			Where("id = ? AND EXISTS (SELECT 1 FROM step_executions WHERE id = ? AND status = ?)", executionID, attemptID, models.StepRunning).
			Updates(map[string]any{"current_step_id": stepID, "updated_at": now}).Error
	}
	if err != nil {
		e.log.DebugContext(ctx, "could not show the running step", "execution_id", executionID, "step_id", stepID, "err", err)
	}
}

// showStep writes the execution's current step (see showAfter).
func showStep(tx *gorm.DB, executionID, stepID string, now time.Time) error {
	return tx.Model(&models.Execution{}).Where("id = ?", executionID).
		Updates(map[string]any{"current_step_id": stepID, "updated_at": now}).Error
}

// finishAttempt moves the attempt from RUNNING at generation to status; errLost if it is no longer held.
func finishAttempt(tx *gorm.DB, a *models.StepAttempt, generation int, upd map[string]any) error {
	res := tx.Model(&models.StepAttempt{}).
		Where("id = ? AND status = ? AND generation = ?", a.ID, models.StepRunning, generation).
		Updates(upd)
	if res.Error != nil {
		return res.Error
	}
	if res.RowsAffected == 0 {
		return errLost
	}
	return nil
}

// deferAttempt moves a PENDING attempt that is not due yet to the next generation and
// queues a job for its scheduled time (read from the database clock, as River compares it).
func (e *Engine) deferAttempt(ctx context.Context, a *models.StepAttempt, generation int) (Outcome, error) {
	err := e.commit(ctx, func(tx *gorm.DB, now time.Time) ([]Job, error) {
		r := tx.Model(&models.StepAttempt{}).Where("id = ? AND status = ? AND generation = ?", a.ID, models.StepPending, generation).
			Updates(map[string]any{"generation": generation + 1, "updated_at": now})
		if r.Error != nil {
			return nil, r.Error
		}
		if r.RowsAffected == 0 {
			return nil, errLost
		}
		return []Job{{AttemptID: a.ID, Generation: generation + 1, RunAt: a.ScheduledAt}}, nil
	})
	if errors.Is(err, errLost) {
		return OutcomeSkipped, nil
	}
	if err != nil {
		return "", err
	}
	return OutcomeDeferred, nil
}

// release hands a held attempt back: PENDING at the next generation, due after delay (0:
// now), with its job. It logs that on log (nil: the caller says it for many at once).
func (e *Engine) release(ctx context.Context, h holder, a *models.StepAttempt, generation int, log *slog.Logger, delay time.Duration) (Outcome, error) {
	landed, err := e.persist(ctx, h, a, generation, func(ctx context.Context) error {
		return e.commit(ctx, func(tx *gorm.DB, now time.Time) ([]Job, error) {
			due := now.Add(delay)
			err := finishAttempt(tx, a, generation, map[string]any{"status": models.StepPending, "generation": generation + 1,
				"started_at": nil, "lease_expires_at": nil, "scheduled_at": due, "updated_at": now})
			if err != nil {
				return nil, err
			}
			if err := showStep(tx, a.ExecutionID, a.StepID, now); err != nil {
				return nil, err
			}
			return []Job{{AttemptID: a.ID, Generation: generation + 1, RunAt: due}}, nil
		})
	})
	if errors.Is(err, errLost) || landed {
		return OutcomeLost, nil
	}
	if err != nil {
		return "", err
	}
	if log != nil {
		log.InfoContext(ctx, "attempt handed back; it will run again with the same idempotency key")
	}
	return OutcomeReleased, nil
}

func (e *Engine) succeed(ctx context.Context, h holder, ex *models.Execution, def *definition.Definition, a *models.StepAttempt, generation int,
	input json.RawMessage, out any, attempts []models.StepAttempt, mask *redact.Masker, claimNext bool, log *slog.Logger) (Outcome, *models.StepAttempt, error) {
	output, err := json.Marshal(out)
	if err != nil {
		output, _ = json.Marshal(fmt.Sprint(out))
	}
	sealedIn, err := e.sealFound(cleanJSON(input), tableAttempts, a.ID, "input", mask)
	if err != nil {
		return "", nil, err
	}
	sealedOut, err := e.sealFound(cleanJSON(output), tableAttempts, a.ID, "output", mask)
	if err != nil {
		return "", nil, err
	}
	var next *models.StepAttempt
	var claimed bool
	nextID := models.NewID()
	// One statement on PostgreSQL, except for a manual replay: its end settles a dead letter
	// and its next steps may have run before (see advanceTx).
	one := e.db.Dialect == models.Postgres && ex.DeadLetterID == nil
	landed, err := e.persist(ctx, h, a, generation, func(ctx context.Context) (err error) {
		if one {
			next, claimed, err = e.advance(ctx, ex, def, a, generation, nextID, sealedIn, sealedOut, claimNext)
		} else {
			next, claimed, err = e.advanceTx(ctx, ex, def, a, generation, nextID, sealedIn, sealedOut, claimNext)
		}
		return err
	})
	if landed { // a try committed though it seemed to fail: see what it left
		next, claimed, err = e.landedNext(ctx, nextID, claimNext && e.claimsNext(def, a.StepIndex))
	}
	if err == nil && next != nil && !claimed && (landed || one) {
		if err := e.enq.Enqueue(ctx, []Job{{AttemptID: next.ID, Generation: next.Generation, RunAt: next.ScheduledAt}}); err != nil {
			log.WarnContext(ctx, "enqueue after commit failed; the reconciler will repair it", "err", err)
		}
	}
	if errors.Is(err, errLost) {
		return OutcomeLost, nil, nil
	}
	if permanentStoreError(err) {
		// The database refuses this result and always will: record the attempt as an
		// internal failure that follows the retry policy, instead of running it forever.
		log.ErrorContext(ctx, "the step's result could not be stored", "err", err)
		storeErr := classify.New(classify.Internal, "STORE_RESULT",
			"The step succeeded but the database refused to store its result: "+err.Error())
		outcome, err := e.fail(ctx, h, ex, def, a, generation, input, storeErr, attempts, mask, log)
		return outcome, nil, err
	}
	if err != nil {
		return "", nil, err
	}
	a.Status, a.Output, a.Input = models.StepSucceeded, models.JSON(sealedOut), models.JSON(sealedIn)
	e.breakerSucceeded(ctx, ex, h.gate)
	log.DebugContext(ctx, "step succeeded")
	if !claimed {
		next = nil
	}
	return OutcomeSucceeded, next, nil
}

// advanceTx is advance as a transaction of several statements, for SQLite, where a
// statement costs no round trip and the jobs are inserted in the same transaction.
func (e *Engine) advanceTx(ctx context.Context, ex *models.Execution, def *definition.Definition, a *models.StepAttempt, generation int,
	nextID string, sealedIn, sealedOut []byte, chain bool) (next *models.StepAttempt, claimed bool, err error) {
	err = e.commit(ctx, func(tx *gorm.DB, now time.Time) ([]Job, error) {
		if err := finishAttempt(tx, a, generation, map[string]any{"status": models.StepSucceeded, "input": models.JSON(sealedIn),
			"output": models.JSON(sealedOut), "finished_at": now, "lease_expires_at": nil, "updated_at": now}); err != nil {
			return nil, err
		}
		// A step that recovers by retrying resolves its error record (a first attempt has none).
		if a.Attempt > 1 {
			if err := tx.Model(&models.ExecutionError{}).
				Where("organization_id = ? AND execution_id = ? AND step_id = ? AND status IN ?", ex.OrganizationID, ex.ID, a.StepID, []string{models.ErrPending, models.ErrRetrying}).
				Updates(map[string]any{"status": models.ErrResolved, "resolution_type": "auto_retry", "resolved_at": now, "next_retry_at": nil, "updated_at": now}).Error; err != nil {
				return nil, err
			}
		}
		i := def.After(a.StepIndex)
		if i < 0 {
			if err := tx.Model(&models.Execution{}).Where("id = ?", ex.ID).
				Updates(map[string]any{"status": endStatus(def, a.StepIndex), "current_step_id": nil, "finished_at": now, "updated_at": now}).Error; err != nil {
				return nil, err
			}
			return nil, e.replaySucceeded(tx, ex, now)
		}
		step := def.Steps[i]
		number, err := nextAttemptNumber(tx, ex, step.ID)
		if err != nil {
			return nil, err
		}
		na := newAttempt(ex, step, i, number, e.scheduleFor(step, now))
		na.ID, na.CreatedAt, na.UpdatedAt = nextID, now, now
		// The next step is runnable now: claim it in this commit (RUNNING, leased by the
		// database clock) and run it in this worker, with no queue round trip. A crash
		// leaves a leased row the reconciler reclaims with the same idempotency key.
		claimed = chain && !na.ScheduledAt.After(now)
		if claimed {
			markClaimed(nil, &na, now, e.leaseOf(step))
		}
		if err := tx.Create(&na).Error; err != nil {
			return nil, err
		}
		if !claimed { // a claimed step is shown by showRunning
			if err := showStep(tx, ex.ID, step.ID, now); err != nil {
				return nil, err
			}
		}
		next = &na
		if claimed {
			return nil, nil
		}
		return []Job{{AttemptID: na.ID, Generation: na.Generation, RunAt: na.ScheduledAt}}, nil
	})
	if err != nil {
		return nil, false, err
	}
	return next, claimed, nil
}
