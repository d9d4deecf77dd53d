package engine

import (
	"context"
	"time"

	"lifeline/models"
)

// Commit retries while the database is unreachable: after this first pause, doubling up to
// the longest.
const (
	persistFirst   = 100 * time.Millisecond
	persistLongest = time.Second
)

// holder is how long a worker may keep trying to record an attempt it holds: until deadline,
// or until stop ends (a shutdown). The zero holder tries once.
type holder struct {
	stop     context.Context
	deadline time.Time
	// gate is the circuit breaker the attempt passed (nil: none applies).
	gate *gate
}

// persist runs commit, which records what happened to attempt a (RUNNING at generation, held
// by this worker), until it succeeds or fails for a reason other than an unreachable or busy
// database (models.Busy: serialization failures, deadlocks, the connection limit, a
// statement timeout). Meanwhile the worker keeps the result and tries again
// with a short backoff, until deadline (shortly before the attempt's lease runs out) or until
// stop ends (a shutdown): then the attempt is abandoned, and released as soon as the database
// is back (recover).
//
// A try that failed may still have committed (the connection broke after the commit was
// sent). So before each new try persist asks whether the attempt is still RUNNING at
// generation; if it is not, a try did commit and persist reports landed.
func (e *attempts) persist(ctx context.Context, r *attemptRun, commit func(ctx context.Context) error) (landed bool, err error) {
	h, a, generation := r.h, r.a, r.generation
	if h.stop == nil {
		return false, commit(ctx)
	}
	stop, deadline := h.stop, h.deadline
	wait := persistFirst
	for {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(stop), commitTimeout)
		err = commit(ctx)
		timedOut := ctx.Err() != nil // the database did not answer within commitTimeout
		cancel()
		// An outage, or a database that could not take the commit now (a serialization
		// failure, a deadlock, its connection limit, a statement timeout): the result is
		// kept and committed again.
		if err == nil || !(e.health.Failed(err) || timedOut || models.Busy(err)) {
			return false, err
		}
		for {
			if time.Now().Add(wait).After(deadline) || stop.Err() != nil {
				e.abandoned.Store(a.ID, generation)
				return false, err
			}
			select {
			case <-time.After(wait):
			case <-stop.Done():
			}
			wait = min(2*wait, persistLongest)
			still, herr := e.held(context.WithoutCancel(stop), a.ID, generation)
			if herr == nil {
				if !still {
					return true, nil
				}
				break // the database answers and the attempt is still ours: commit again
			}
			if !e.health.Failed(herr) && !models.Busy(herr) {
				return false, herr
			}
		}
	}
}

// held reports whether the attempt is RUNNING at generation.
func (e *attempts) held(ctx context.Context, attemptID string, generation int) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, commitTimeout)
	defer cancel()
	var n int64
	err := e.db.Conn(ctx).Model(&models.StepAttempt{}).
		Where("id = ? AND status = ? AND generation = ?", attemptID, models.StepRunning, generation).Count(&n).Error
	return n > 0, err
}

// leaseDeadline is the local time until which a worker that claimed a at about now may hold
// it: its lease, less a tenth (at least a second) for clocks and the last commit.
func leaseDeadline(a *models.StepAttempt) time.Time {
	if a.LeaseExpiresAt == nil || a.StartedAt == nil {
		return time.Now()
	}
	lease := a.LeaseExpiresAt.Sub(*a.StartedAt)
	return time.Now().Add(lease - max(lease/10, time.Second))
}
