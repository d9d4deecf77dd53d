package engine

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"time"

	"gorm.io/gorm"

	"lifeline/models"
	"lifeline/models/apperr"
	"lifeline/services/audit"
	"lifeline/services/breaker"
	"lifeline/services/definition"
)

// Circuit breakers sit on the step path. A closed breaker costs nothing but a look in this
// process's cache (its state is read from the database at most once a second per breaker);
// a success in the closed state writes nothing. A counted failure inserts one row into
// circuit_breaker_failures (no row is locked or updated) and counts the window from them; the
// breaker's own row changes only on a transition, each a guarded compare-and-set of
// breakerTx. A failure's transaction cannot see the failures other transactions have not
// committed yet (PostgreSQL), so when its count falls short of the threshold it counts again
// once committed: the breaker opens by the threshold'th failure however many fail at once.
// An attempt an open breaker refuses makes no request: it is put back to PENDING, with the
// same attempt number and idempotency key, for when the breaker half-opens. A half-open
// breaker's trials each hold a trial slot for as long as their attempt runs.

// releaseSpacing spaces out the attempts a closing breaker releases (10 a second).
const releaseSpacing = 100 * time.Millisecond

// releaseBatch is how many waiting attempts one statement releases: the transaction that
// closes a breaker releases the first batch; the rest follow, a batch per transaction.
const releaseBatch = 500

// CodeCircuitOpen is the error code of an attempt an open breaker refused.
const CodeCircuitOpen = "circuit_open"

// gate is the breaker an attempt passed: which one, and whether the attempt is a half-open trial.
type gate struct {
	cfg   breaker.Config
	scope breakerScope
	cache string // this process's cache key: the organization's and the scope key
	id    string // "" while the breaker has no row (it never failed)
	trial bool
	// refused: the breaker refused the attempt and it failed for good without running (its
	// wait budget ran out). Its failure neither counts nor ends a trial; the gate stays only
	// so the dead letter records the breaker's state.
	refused bool
	// Set by the commit that records the attempt's failure (breakerFailed), for after it
	// (breakerAfter): inWindow is the window it counted (0: it counted none); recount, that
	// the count fell short of the threshold and is made again once committed (failedAt,
	// errorType: the failure's); release, that the breaker it closed has more waiting attempts.
	inWindow  int
	recount   bool
	failedAt  time.Time
	errorType string
	release   *releasing
}

// waitOnBreaker is the "error" of an attempt an open breaker refused.
type waitOnBreaker struct {
	until time.Time
	id    string
	// open: refused because the breaker is open (not for want of a free trial slot of a
	// half-open one): the step's fallback, if it has one, runs instead.
	open bool
}

func (w *waitOnBreaker) Error() string {
	return "Waiting on the circuit breaker until " + w.until.UTC().Format(time.RFC3339)
}

// breakerOf returns the gate of step i of an execution, before it is admitted: its
// configuration and key (step scope, or the host of the rendered config's url).
func breakerOf(ex *models.Execution, def *definition.Definition, i int, cfg map[string]any) *gate {
	c := def.Breaker(i)
	if !c.Enabled {
		return nil
	}
	g := &gate{cfg: c, scope: breakerScope{org: ex.OrganizationID}}
	if c.Scope == breaker.ScopeHost {
		if raw, ok := cfg["url"].(string); ok {
			if u, err := url.Parse(raw); err == nil && u.Host != "" {
				host := strings.ToLower(u.Host)
				g.scope.key, g.scope.host = "host:"+host, &host
				g.cache = cacheKey(ex.OrganizationID, g.scope.key)
				return g
			}
		}
	}
	step := def.Steps[i].ID
	g.scope.key, g.scope.wf, g.scope.step = "step:"+ex.WorkflowID+":"+step, &ex.WorkflowID, &step
	g.cache = cacheKey(ex.OrganizationID, g.scope.key)
	return g
}

// cacheKey keys a breaker in this process's cache. A host's scope key is the same in every
// organization: its id keeps the organizations apart.
func cacheKey(orgID, scopeKey string) string { return orgID + " " + scopeKey }

// admit asks the breaker whether attempt a (RUNNING, claimed by this worker) may run. It
// returns a *waitOnBreaker error when the attempt must wait; any other error is the
// database's. A half-open breaker admits it as a trial only if it takes a free trial slot.
func (e *circuits) admit(ctx context.Context, ex *models.Execution, g *gate, a *models.StepAttempt) error {
	if id, ok := e.breakers.closed(g.cache); ok && a.WaitingBreakerID == nil {
		g.id = id
		return nil
	}
	var now time.Time
	for try := 0; try < 3; try++ {
		var rows []models.CircuitBreaker
		if err := e.db.Conn(ctx).Where("organization_id = ? AND scope_key = ?", ex.OrganizationID, g.scope.key).Limit(1).Find(&rows).Error; err != nil {
			return err
		}
		if len(rows) == 0 {
			e.breakers.set(g.cache, "")
			return e.unwait(ctx, a)
		}
		b := &rows[0]
		g.id = b.ID
		var err error
		if now, err = e.now(ctx); err != nil {
			return err
		}
		v := breaker.Admit(stateOf(b), now)
		switch {
		case !v.Run:
			return &waitOnBreaker{until: v.Until, id: b.ID, open: true}
		case !v.Trial:
			e.breakers.set(g.cache, b.ID)
			return e.unwait(ctx, a)
		}
		halfOpened, trial, err := e.takeTrial(ctx, b, v.ToHalfOpen, a, now)
		switch {
		case err != nil:
			return err
		case trial:
			g.trial = true
			return e.unwait(ctx, a)
		case halfOpened || !v.ToHalfOpen: // every slot is held by a trial still running
			return &waitOnBreaker{until: breaker.NoFreeSlot(now).Until, id: b.ID}
		}
		// Another worker half-opened it first, or it was opened again: ask again.
	}
	return &waitOnBreaker{until: breaker.NoFreeSlot(now).Until, id: g.id}
}

// takeTrial takes a trial slot of breaker b for attempt a, in one transaction, moving the
// breaker from open to half-open first when toHalfOpen. It reports whether it half-opened
// the breaker (false when another worker changed it first) and whether a holds a trial slot
// (false when every slot is held).
func (e *circuits) takeTrial(ctx context.Context, b *models.CircuitBreaker, toHalfOpen bool, a *models.StepAttempt, now time.Time) (halfOpened, trial bool, err error) {
	err = e.db.Tx(ctx, func(tx *gorm.DB) error {
		bt := breakerTx{tx: tx, now: now}
		if toHalfOpen {
			won, err := bt.HalfOpen(b.ID, *b.OpenedAt)
			if err != nil || !won {
				return err
			}
			halfOpened = true
			if err := audit.Record(tx, breakerEntry(b, "circuit.half_opened", audit.System, now, nil)); err != nil {
				return err
			}
		}
		trial, err = bt.TakeTrial(b.ID, breaker.Slots(b.HalfOpenRequests), a)
		return err
	})
	if err != nil {
		return false, false, err
	}
	return halfOpened, trial, nil
}

// unwait clears what waiting on a breaker left on an attempt that now runs.
func (e *circuits) unwait(ctx context.Context, a *models.StepAttempt) error {
	if a.WaitingBreakerID == nil && (a.ErrorCode == nil || *a.ErrorCode != CodeCircuitOpen) {
		return nil
	}
	return e.store.Unwait(ctx, a)
}

// BreakerAction is an admin's reset or forced opening of a breaker.
type BreakerAction struct {
	OrganizationID string
	BreakerID      string
	Open           bool // true: force open; false: reset (close)
	Reason         string
	Actor          audit.Actor
}

// ActOnBreaker does what Engine.ActOnBreaker says.
func (e *circuits) ActOnBreaker(ctx context.Context, r BreakerAction) (*models.CircuitBreaker, error) {
	reason := strings.TrimSpace(r.Reason)
	switch {
	case reason == "":
		return nil, apperr.Invalid("breaker.reason", map[string]string{"reason": "is required"})
	case len([]rune(reason)) > MaxNotes:
		return nil, apperr.Invalid("breaker.reason", map[string]string{"reason": fmt.Sprintf("must be at most %d characters", MaxNotes)})
	}
	var out *models.CircuitBreaker
	var rest *releasing
	err := e.commit(ctx, func(tx *gorm.DB, now time.Time) ([]Job, error) {
		var b models.CircuitBreaker
		if err := tx.Where("organization_id = ? AND id = ?", r.OrganizationID, r.BreakerID).First(&b).Error; err != nil {
			if models.IsNotFound(err) {
				return nil, apperr.NotFound("circuit breaker")
			}
			return nil, err
		}
		defer e.breakers.forget(cacheKey(b.OrganizationID, b.ScopeKey))
		bt := breakerTx{tx: tx, now: now}
		action, act := "circuit.closed", bt.Reset
		if r.Open {
			action, act = "circuit.opened", bt.ForceOpen
		}
		won, err := act(r.OrganizationID, b.ID, reason)
		if err != nil {
			return nil, err
		}
		if !won { // deleted since it was read
			return nil, apperr.NotFound("circuit breaker")
		}
		if err := audit.Record(tx, breakerEntry(&b, action, r.Actor, now, map[string]any{"manual": true, "reason": reason})); err != nil {
			return nil, err
		}
		if err := tx.First(&b, "id = ?", b.ID).Error; err != nil {
			return nil, err
		}
		out = &b
		if r.Open {
			return nil, nil
		}
		jobs, more, err := bt.ReleaseWaiting(b.ID, now, 0, releaseBatch)
		if more {
			rest = &releasing{id: b.ID, from: now, offset: releaseBatch}
		}
		return jobs, err
	})
	if err == nil && rest != nil {
		e.releaseRest(ctx, rest)
	}
	return out, err
}

// state is the breaker's state as tx sees it, for a dead letter (nil without a breaker
// row): its failures are the window the failure's commit counted, or else those counted
// when it last opened.
func (g *gate) state(tx *gorm.DB) *BreakerState {
	if g == nil || g.id == "" {
		return nil
	}
	b, err := breakerRow(tx, g.id)
	if err != nil {
		return nil
	}
	n := b.FailureCount
	if b.State == breaker.Closed && g.inWindow > 0 {
		n = g.inWindow
	}
	return &BreakerState{ID: b.ID, State: b.State, Failures: n}
}

func breakerRow(tx *gorm.DB, id string) (*models.CircuitBreaker, error) {
	var b models.CircuitBreaker
	return &b, tx.First(&b, "id = ?", id).Error
}

func breakerEntry(b *models.CircuitBreaker, action string, actor audit.Actor, at time.Time, extra map[string]any) audit.Entry {
	d := map[string]any{"scope": b.ScopeKey}
	if b.WorkflowID != nil {
		d["workflowId"] = *b.WorkflowID
	}
	if b.StepID != nil {
		d["stepId"] = *b.StepID
	}
	if b.Host != nil {
		d["host"] = *b.Host
	}
	for k, v := range extra {
		d[k] = v
	}
	return audit.Entry{OrganizationID: b.OrganizationID, Actor: actor, Action: action, EntityType: "circuit_breaker_state",
		EntityID: b.ID, At: at, Details: d}
}

func stateOf(b *models.CircuitBreaker) breaker.State {
	return breaker.State{State: b.State, OpenedAt: b.OpenedAt, HalfOpenedAt: b.HalfOpenedAt, Forced: b.Forced,
		ResetTimeout: time.Duration(b.ResetTimeoutMs) * time.Millisecond, HalfOpenRequests: b.HalfOpenRequests}
}
