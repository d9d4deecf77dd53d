package engine

import (
	"context"
	"fmt"
	"time"

	"gorm.io/gorm"

	"lifeline/models"
	"lifeline/services/audit"
	"lifeline/services/breaker"
	"lifeline/services/notify"
)

// What an attempt's end does to its circuit breaker: a failure counts (and may trip it), a
// trial's end reopens or closes it, a close releases the attempts waiting on it. The slot a
// trial held is freed by the commit that records its end, with nothing to write.

// releasing is what is left to release of the attempts waiting on a breaker that closed.
type releasing struct {
	id     string
	from   time.Time // when it closed: the first released attempt's time
	offset int       // how many were released already
}

// ensureBreaker makes the row of the breaker an attempt's failure of errorType is about to
// count against, when it has none (the breaker never failed), in a statement of its own
// before the failure's transaction (see breakerTx.Ensure).
func (e *circuits) ensureBreaker(ctx context.Context, g *gate, errorType string) error {
	if g == nil || g.refused || g.trial || g.id != "" || !g.cfg.Counts(errorType) {
		return nil
	}
	now, err := e.now(ctx)
	if err != nil {
		return err
	}
	g.id, err = breakerTx{tx: e.db.Conn(ctx), now: now}.Ensure(g.scope, g.cfg)
	return err
}

// breakerFailed counts a failure against the attempt's breaker in tx (the transaction that
// records the failure): a trial's failure reopens it; a counted failure in the closed state
// is added to the window, and opens it at the threshold. A trial whose error does not count
// (the dependency answered) closes the breaker like a success: it returns the jobs of the
// waiting attempts that releases, for tx's commit to queue. The trial's slot is freed by
// this commit itself (its attempt is no longer RUNNING). An attempt the breaker refused
// (g.refused) changes nothing. Without a breaker open, this reads nothing. What is left for
// after the commit, breakerAfter does.
func (e *circuits) breakerFailed(tx *gorm.DB, r *attemptRun, errorType string, now time.Time) ([]Job, error) {
	ex, g := r.ex, r.h.gate
	if g == nil || g.refused {
		return nil, nil
	}
	g.inWindow, g.recount, g.release = 0, false, nil // what an earlier try of this commit left
	if !g.cfg.Counts(errorType) {
		if g.trial { // the dependency answered: its health is not in doubt
			return e.closeTx(tx, ex, g, now)
		}
		return nil, nil
	}
	defer e.breakers.forget(g.cache)
	if g.trial {
		won, err := breakerTx{tx: tx, now: now}.Reopen(g.id)
		if err != nil || !won {
			return nil, err
		}
		b, err := breakerRow(tx, g.id)
		if err != nil {
			return nil, err
		}
		return nil, audit.Record(tx, breakerEntry(b, "circuit.opened", audit.System, now, map[string]any{"reopened": true, "errorType": errorType, "executionId": ex.ID}))
	}
	return nil, e.countFailure(tx, r, errorType, now)
}

// countFailure adds a counted failure of the closed breaker to its window in tx, and opens it
// when the window it counts reaches the threshold; otherwise breakerAfter counts again once
// tx has committed.
func (e *circuits) countFailure(tx *gorm.DB, r *attemptRun, errorType string, now time.Time) error {
	g := r.h.gate
	bt := breakerTx{tx: tx, now: now}
	n, err := bt.RecordFailure(g.id)
	if err != nil {
		return err
	}
	g.inWindow = n
	if f := e.hooked().FailureCounted; f != nil {
		f(g.id)
	}
	if !breaker.Trips(g.cfg, n) {
		g.recount, g.failedAt, g.errorType = true, now, errorType
		return nil
	}
	_, err = e.trip(bt, r, errorType, n)
	return err
}

// trip opens the closed breaker g with n failures in its window (breakerTx.Trip), and
// audits and announces it when it won.
func (e *circuits) trip(bt breakerTx, r *attemptRun, errorType string, n int) (bool, error) {
	ex, def, g := r.ex, r.def, r.h.gate
	won, err := bt.Trip(g.id, g.cfg, n)
	if err != nil || !won {
		return false, err
	}
	b, err := breakerRow(bt.tx, g.id)
	if err != nil {
		return false, err
	}
	now := bt.now
	if err := audit.Record(bt.tx, breakerEntry(b, "circuit.opened", audit.System, now,
		map[string]any{"failures": n, "windowSeconds": int(breaker.Window.Seconds()), "errorType": errorType, "executionId": ex.ID})); err != nil {
		return false, err
	}
	ev := notify.Event{Kind: notify.BreakerOpened, OrganizationID: ex.OrganizationID, WorkflowID: ex.WorkflowID, WorkflowName: def.Name,
		ExecutionID: ex.ID, Subject: deref(ex.Subject), ErrorType: errorType, BreakerID: b.ID, Settings: def.Settings.ErrorNotifications, At: now,
		Reason: fmt.Sprintf("%d failures in %d s", n, int(breaker.Window.Seconds())), DedupKey: fmt.Sprintf("breaker_opened:%s:%d", b.ID, now.UnixNano())}
	if g.scope.step != nil {
		ev.StepID = *g.scope.step
		if i := def.Index(*g.scope.step); i >= 0 {
			ev.StepName = def.Steps[i].Title()
		}
	} else if g.scope.host != nil {
		ev.StepName = *g.scope.host
	}
	return true, e.emit(bt.tx, ev)
}

// breakerAfter does what the commit that recorded an attempt's failure left for after it:
// it counts the window again when that commit's count fell short of the threshold (failures
// committed meanwhile count now; whichever count first reaches the threshold opens the
// breaker, with a compare-and-set only one wins), and releases the rest of the attempts
// waiting on a breaker that commit closed. A database error is logged: the next failure
// counts again, and attempts not released run at their own time.
func (e *circuits) breakerAfter(ctx context.Context, r *attemptRun) {
	g := r.h.gate
	if g == nil {
		return
	}
	if g.recount {
		g.recount = false
		if err := e.recount(ctx, r); err != nil {
			e.log.WarnContext(ctx, "could not count the circuit breaker's window again; its next failure will", "breaker_id", g.id, "err", err)
		}
	}
	if r := g.release; r != nil {
		g.release = nil
		e.releaseRest(ctx, r)
	}
}

// recount counts the window of g's closed breaker again, after the failure that fell short
// committed, and opens it at the threshold.
func (e *circuits) recount(ctx context.Context, r *attemptRun) error {
	g := r.h.gate
	n, err := breakerTx{tx: e.db.Conn(ctx), now: g.failedAt}.InWindow(g.id, g.failedAt)
	if err != nil || !breaker.Trips(g.cfg, n) {
		return err
	}
	defer e.breakers.forget(g.cache)
	return e.commit(ctx, func(tx *gorm.DB, now time.Time) ([]Job, error) {
		_, err := e.trip(breakerTx{tx: tx, now: now}, r, g.errorType, n)
		return nil, err
	})
}

// breakerSucceeded closes the breaker after a trial's success (the commit that recorded the
// success freed its trial slot), and releases the attempts that wait on it.
func (e *circuits) breakerSucceeded(ctx context.Context, ex *models.Execution, g *gate) {
	if g == nil || !g.trial {
		return
	}
	err := e.commit(ctx, func(tx *gorm.DB, now time.Time) ([]Job, error) {
		return e.closeTx(tx, ex, g, now)
	})
	if err != nil {
		e.log.WarnContext(ctx, "could not close the circuit breaker after a successful trial", "breaker_id", g.id, "err", err)
		return
	}
	if r := g.release; r != nil {
		g.release = nil
		e.releaseRest(ctx, r)
	}
}

// closeTx closes a half-open breaker whose trial the dependency answered, in tx, and returns
// the jobs of the first batch of waiting attempts it releases (releaseBatch; g.release says
// whether there are more, for after the commit). Every close releases the waiting attempts
// this way: an admin's reset too. Nothing when another worker closed (or reopened) it first:
// that one released them.
func (e *circuits) closeTx(tx *gorm.DB, ex *models.Execution, g *gate, now time.Time) ([]Job, error) {
	defer e.breakers.forget(g.cache)
	bt := breakerTx{tx: tx, now: now}
	won, err := bt.Close(g.id)
	if err != nil || !won {
		return nil, err
	}
	b, err := breakerRow(tx, g.id)
	if err != nil {
		return nil, err
	}
	if err := audit.Record(tx, breakerEntry(b, "circuit.closed", audit.System, now, map[string]any{"executionId": ex.ID})); err != nil {
		return nil, err
	}
	jobs, more, err := bt.ReleaseWaiting(g.id, now, 0, releaseBatch)
	if more {
		g.release = &releasing{id: g.id, from: now, offset: releaseBatch}
	}
	return jobs, err
}

// releaseRest releases the attempts still waiting on a breaker that closed, a batch
// (releaseBatch) per transaction, each due where the ones before left off, while the
// breaker stays closed.
func (e *circuits) releaseRest(ctx context.Context, r *releasing) {
	for more := true; more; {
		err := e.commit(ctx, func(tx *gorm.DB, now time.Time) ([]Job, error) {
			var state []string
			if err := tx.Model(&models.CircuitBreaker{}).Where("id = ?", r.id).Pluck("state", &state).Error; err != nil {
				return nil, err
			}
			if len(state) == 0 || state[0] != breaker.Closed {
				more = false // it opened again: the rest keep waiting on it
				return nil, nil
			}
			jobs, m, err := breakerTx{tx: tx, now: now}.ReleaseWaiting(r.id, r.from, r.offset, releaseBatch)
			more = m
			r.offset += releaseBatch
			return jobs, err
		})
		if err != nil {
			e.log.WarnContext(ctx, "could not release the attempts waiting on a closed circuit breaker; they run at their own time", "breaker_id", r.id, "err", err)
			return
		}
	}
}
