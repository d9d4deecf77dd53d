package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"

	"lifeline/models"
	"lifeline/services/classify"
	"lifeline/services/definition"
)

// landedNext reads the next attempt a commit that landed created (nil when it created none)
// and reports whether it is this worker's to run: only when the commit claimed it (claim:
// the next step was runnable at once and the worker chains) and it is still RUNNING at the
// generation it was created with. The commit queued no job for an attempt it claimed, so no
// one else can hold that generation; a reclaim (after a long outage, its lease ran out)
// moves it to the next one, which another worker may hold: that one is not run here, or the
// same idempotency key would be sent twice at once.
func (e *attempts) landedNext(ctx context.Context, id string, claim bool) (*models.StepAttempt, bool, error) {
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
func (e *attempts) claimsNext(def *definition.Definition, index int) bool {
	i := def.After(index)
	return i >= 0 && e.delayOf(def.Steps[i]) == 0
}

// showRunning writes a step as its execution's current step if its attempt is still running.
func (e *attempts) showRunning(executionID, attemptID, stepID string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := e.store.ShowRunning(ctx, executionID, attemptID, stepID); err != nil {
		e.log.DebugContext(ctx, "could not show the running step", "execution_id", executionID, "step_id", stepID, "err", err)
	}
}

// deferAttempt moves a PENDING attempt that is not due yet to the next generation and
// queues a job for its scheduled time (read from the database clock, as River compares it).
func (e *attempts) deferAttempt(ctx context.Context, a *models.StepAttempt, generation int) (Outcome, error) {
	err := e.commit(ctx, func(tx *gorm.DB, now time.Time) ([]Job, error) {
		if err := (stateTx{tx: tx, now: now}).DeferAttempt(a, generation); err != nil {
			return nil, err
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
func (e *attempts) release(ctx context.Context, r *attemptRun, delay time.Duration) (Outcome, error) {
	a, generation, log := r.a, r.generation, r.log
	landed, err := e.persist(ctx, r, func(ctx context.Context) error {
		return e.commit(ctx, func(tx *gorm.DB, now time.Time) ([]Job, error) {
			due := now.Add(delay)
			if err := (stateTx{tx: tx, now: now}).ReleaseAttempt(a, generation, due); err != nil {
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

func (e *attempts) succeed(ctx context.Context, r *attemptRun, out any, claimNext bool) (Outcome, *models.StepAttempt, error) {
	ex, def, a, generation, h, input, mask, log := r.ex, r.def, r.a, r.generation, r.h, r.input, r.mask, r.log
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
	one := e.store.oneStatement(ex)
	s := &success{ex: ex, def: def, a: a, generation: generation, nextID: nextID, in: sealedIn, out: sealedOut, chain: claimNext, took: r.took}
	if o := stoodFor(a, r.attempts); o != nil {
		s.stoodFor = o.StepID
	}
	if i := def.After(s.place()); i >= 0 {
		s.delay, s.lease = e.delayOf(def.Steps[i]), e.leaseOf(def.Steps[i])
	}
	landed, err := e.persist(ctx, r, func(ctx context.Context) (err error) {
		next, claimed, err = e.store.AdvanceAttempt(ctx, s)
		return err
	})
	if landed { // a try committed though it seemed to fail: see what it left
		next, claimed, err = e.landedNext(ctx, nextID, claimNext && e.claimsNext(def, s.place()))
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
		outcome, err := e.fail(ctx, r, storeErr)
		return outcome, nil, err
	}
	if err != nil {
		return "", nil, err
	}
	a.Status, a.Output, a.Input = models.StepSucceeded, models.JSON(sealedOut), models.JSON(sealedIn)
	e.circuits.breakerSucceeded(ctx, ex, h.gate)
	log.DebugContext(ctx, "step succeeded")
	if !claimed {
		next = nil
	}
	return OutcomeSucceeded, next, nil
}

// waitOn puts a RUNNING attempt an open breaker refused back to PENDING for until, at the
// next generation, with the same attempt number (and so idempotency key), saying why.
func (e *attempts) waitOn(ctx context.Context, r *attemptRun, w *waitOnBreaker) (Outcome, error) {
	a, generation, log := r.a, r.generation, r.log
	landed, err := e.persist(ctx, r, func(ctx context.Context) error {
		return e.commit(ctx, func(tx *gorm.DB, now time.Time) ([]Job, error) {
			if err := (stateTx{tx: tx, now: now}).ParkAttempt(a, generation, w); err != nil {
				return nil, err
			}
			return []Job{{AttemptID: a.ID, Generation: generation + 1, RunAt: w.until}}, nil
		})
	})
	if landed {
		err = e.enq.Enqueue(ctx, []Job{{AttemptID: a.ID, Generation: generation + 1, RunAt: w.until}})
	}
	if errors.Is(err, errLost) {
		return OutcomeLost, nil
	}
	if err != nil {
		return "", err
	}
	log.InfoContext(ctx, "step waits on an open circuit breaker", "until", w.until)
	return OutcomeWaiting, nil
}
