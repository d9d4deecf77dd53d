package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"sync"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"lifeline/models"
	"lifeline/services/audit"
	"lifeline/services/breaker"
	"lifeline/services/classify"
	"lifeline/services/definition"
	"lifeline/services/notify"
)

// Circuit breakers sit on the step path. A closed breaker costs nothing but a look in this
// process's cache (its state is read from the database at most once a second per breaker);
// a success in the closed state writes nothing. A counted failure inserts one row into
// circuit_breaker_failures (no hot row to lock) and counts the window from them; the breaker's
// own row changes only on a transition, with a compare-and-set, in the transaction that
// records the failure. An attempt an open breaker refuses makes no request: it is put back to
// PENDING, with the same attempt number and idempotency key, for when the breaker half-opens.
// A half-open breaker's trials each hold a trial slot for as long as their attempt runs.

// breakerCacheTTL is how long this process trusts a closed breaker's state without reading it.
const breakerCacheTTL = time.Second

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
	key   string // circuit_breaker_state.scope_key, unique in the organization
	cache string // this process's cache key: the organization's and the scope key
	id    string // "" while the breaker has no row (it never failed)
	trial bool
	// refused: the breaker refused the attempt and it failed for good without running (its
	// wait budget ran out). Its failure neither counts nor ends a trial; the gate stays only
	// so the dead letter records the breaker's state.
	refused bool
	wf      *string
	step    *string
	host    *string
	// release: the breaker the commit recording the attempt's end closed has more waiting
	// attempts to release after that commit (breakerAfter).
	release *releasing
}

// releasing is what is left to release of the attempts waiting on a breaker that closed.
type releasing struct {
	id     string
	from   time.Time // when it closed: the first released attempt's time
	offset int       // how many were released already
}

// waitOnBreaker is the "error" of an attempt an open breaker refused.
type waitOnBreaker struct {
	until time.Time
	id    string
}

func (w *waitOnBreaker) Error() string {
	return "Waiting on the circuit breaker until " + w.until.UTC().Format(time.RFC3339)
}

type breakerCache struct {
	mu sync.Mutex
	m  map[string]cachedBreaker
}

type cachedBreaker struct {
	id string
	at time.Time
	// forgotten: a transition of this breaker is being committed; until at+breakerCacheTTL
	// its state is read from the database every time and not cached (a read racing the
	// commit would see the old, closed state).
	forgotten bool
}

func (c *breakerCache) closed(key string) (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	b, ok := c.m[key]
	if !ok || b.forgotten || time.Since(b.at) > breakerCacheTTL {
		return "", false
	}
	return b.id, true
}

func (c *breakerCache) set(key, id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if b, ok := c.m[key]; ok && b.forgotten && time.Since(b.at) <= breakerCacheTTL {
		return
	}
	if c.m == nil || len(c.m) > 10_000 {
		c.m = map[string]cachedBreaker{}
	}
	c.m[key] = cachedBreaker{id: id, at: time.Now()}
}

// forget drops a breaker's cached state when a transaction changes it, and keeps it out of
// the cache for breakerCacheTTL: long enough for that transaction to commit.
func (c *breakerCache) forget(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string]cachedBreaker{}
	}
	c.m[key] = cachedBreaker{at: time.Now(), forgotten: true}
}

// breakerOf returns the gate of step i of an execution, before it is admitted: its
// configuration and key (step scope, or the host of the rendered config's url).
func breakerOf(ex *models.Execution, def *definition.Definition, i int, cfg map[string]any) *gate {
	c := def.Breaker(i)
	if !c.Enabled {
		return nil
	}
	g := &gate{cfg: c}
	if c.Scope == breaker.ScopeHost {
		if raw, ok := cfg["url"].(string); ok {
			if u, err := url.Parse(raw); err == nil && u.Host != "" {
				host := strings.ToLower(u.Host)
				g.key, g.host = "host:"+host, &host
				g.cache = cacheKey(ex.OrganizationID, g.key)
				return g
			}
		}
	}
	step := def.Steps[i].ID
	g.key, g.wf, g.step = "step:"+ex.WorkflowID+":"+step, &ex.WorkflowID, &step
	g.cache = cacheKey(ex.OrganizationID, g.key)
	return g
}

// cacheKey keys a breaker in this process's cache. A host's scope key is the same in every
// organization: its id keeps the organizations apart.
func cacheKey(orgID, scopeKey string) string { return orgID + " " + scopeKey }

// admit asks the breaker whether attempt a (RUNNING, claimed by this worker) may run. It
// returns a *waitOnBreaker error when the attempt must wait; any other error is the
// database's. A half-open breaker admits it as a trial only if it takes a free trial slot.
func (e *Engine) admit(ctx context.Context, ex *models.Execution, g *gate, a *models.StepAttempt) error {
	if id, ok := e.breakers.closed(g.cache); ok && a.WaitingBreakerID == nil {
		g.id = id
		return nil
	}
	var now time.Time
	for try := 0; try < 3; try++ {
		var rows []models.CircuitBreaker
		if err := e.db.Conn(ctx).Where("organization_id = ? AND scope_key = ?", ex.OrganizationID, g.key).Limit(1).Find(&rows).Error; err != nil {
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
			return &waitOnBreaker{until: v.Until, id: b.ID}
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
func (e *Engine) takeTrial(ctx context.Context, b *models.CircuitBreaker, toHalfOpen bool, a *models.StepAttempt, now time.Time) (halfOpened, trial bool, err error) {
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
func (e *Engine) unwait(ctx context.Context, a *models.StepAttempt) error {
	if a.WaitingBreakerID == nil && (a.ErrorCode == nil || *a.ErrorCode != CodeCircuitOpen) {
		return nil
	}
	a.WaitingBreakerID, a.ErrorType, a.ErrorCode, a.ErrorMessage = nil, nil, nil, nil
	return e.db.Conn(ctx).Model(&models.StepAttempt{}).Where("id = ?", a.ID).
		Updates(map[string]any{"waiting_breaker_id": nil, "error_type": nil, "error_code": nil, "error_message": nil}).Error
}

// waitOn puts a RUNNING attempt an open breaker refused back to PENDING for until, at the
// next generation, with the same attempt number (and so idempotency key), saying why.
func (e *Engine) waitOn(ctx context.Context, h holder, ex *models.Execution, a *models.StepAttempt, generation int, w *waitOnBreaker, log *slog.Logger) (Outcome, error) {
	landed, err := e.persist(ctx, h, a, generation, func(ctx context.Context) error {
		return e.commit(ctx, func(tx *gorm.DB, now time.Time) ([]Job, error) {
			upd := map[string]any{"status": models.StepPending, "generation": generation + 1, "scheduled_at": w.until,
				"started_at": nil, "lease_expires_at": nil, "next_retry_at": w.until, "waiting_breaker_id": nullable(w.id),
				"error_type": string(classify.ExternalService), "error_code": CodeCircuitOpen, "error_message": w.Error(), "updated_at": now}
			if err := finishAttempt(tx, a, generation, upd); err != nil {
				return nil, err
			}
			if err := showStep(tx, ex.ID, a.StepID, now); err != nil {
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

// breakerFailed counts a failure against the attempt's breaker in tx (the transaction that
// records the failure): a trial's failure reopens it; a counted failure in the closed state
// is added to the window, and opens it at the threshold. A trial whose error does not count
// (the dependency answered) closes the breaker like a success: it returns the jobs of the
// waiting attempts that releases, for tx's commit to queue. An attempt the breaker refused
// (g.refused) changes nothing. Without a breaker open, this reads nothing.
func (e *Engine) breakerFailed(tx *gorm.DB, ex *models.Execution, def *definition.Definition, g *gate, errorType string, now time.Time) ([]Job, error) {
	if g == nil || g.refused {
		return nil, nil
	}
	g.release = nil // what an earlier try of this commit left
	if !g.cfg.Counts(errorType) {
		if g.trial { // the dependency answered: its health is not in doubt
			return e.closeTx(tx, ex, g, now)
		}
		return nil, nil
	}
	defer e.breakers.forget(g.cache)
	if g.trial {
		r := tx.Model(&models.CircuitBreaker{}).Where("id = ? AND state = ?", g.id, breaker.HalfOpen).Updates(map[string]any{
			"state": breaker.Open, "opened_at": now, "half_opened_at": nil, "failure_count": gorm.Expr("failure_count + 1"), "last_failure_at": now, "updated_at": now})
		if r.Error != nil || r.RowsAffected == 0 {
			return nil, r.Error
		}
		b, err := breakerRow(tx, g.id)
		if err != nil {
			return nil, err
		}
		return nil, audit.Record(tx, breakerEntry(b, "circuit.opened", audit.System, now, map[string]any{"reopened": true, "errorType": errorType, "executionId": ex.ID}))
	}
	return nil, e.countFailure(tx, ex, def, g, errorType, now)
}

// countFailure adds a counted failure of the closed breaker to its window in tx, and opens it
// at the threshold.
func (e *Engine) countFailure(tx *gorm.DB, ex *models.Execution, def *definition.Definition, g *gate, errorType string, now time.Time) error {
	if g.id == "" {
		b := models.CircuitBreaker{ID: models.NewID(), OrganizationID: ex.OrganizationID, ScopeKey: g.key, WorkflowID: g.wf, StepID: g.step, Host: g.host,
			State: breaker.Closed, FailureThreshold: g.cfg.FailureThreshold, ResetTimeoutMs: int(g.cfg.ResetTimeout.Milliseconds()),
			HalfOpenRequests: g.cfg.HalfOpenRequests, CreatedAt: now, UpdatedAt: now}
		if err := tx.Clauses(clause.OnConflict{Columns: []clause.Column{{Name: "organization_id"}, {Name: "scope_key"}}, DoNothing: true}).Create(&b).Error; err != nil {
			return err
		}
		var id string
		if err := tx.Model(&models.CircuitBreaker{}).Where("organization_id = ? AND scope_key = ?", ex.OrganizationID, g.key).Pluck("id", &id).Error; err != nil {
			return err
		}
		g.id = id
	}
	if err := tx.Create(&models.BreakerFailure{ID: models.NewID(), BreakerID: g.id, At: now}).Error; err != nil {
		return err
	}
	var n int64
	if err := tx.Model(&models.BreakerFailure{}).Where("breaker_id = ? AND at > ?", g.id, now.Add(-breaker.Window)).Count(&n).Error; err != nil {
		return err
	}
	upd := map[string]any{"failure_count": n, "last_failure_at": now, "failure_threshold": g.cfg.FailureThreshold,
		"reset_timeout_ms": int(g.cfg.ResetTimeout.Milliseconds()), "half_open_requests": g.cfg.HalfOpenRequests, "updated_at": now}
	trips := breaker.Trips(g.cfg, int(n))
	if trips {
		upd["state"], upd["opened_at"], upd["forced"], upd["reason"] = breaker.Open, now, false, nil
	}
	r := tx.Model(&models.CircuitBreaker{}).Where("id = ? AND state = ?", g.id, breaker.Closed).Updates(upd)
	if r.Error != nil || r.RowsAffected == 0 || !trips {
		return r.Error
	}
	b, err := breakerRow(tx, g.id)
	if err != nil {
		return err
	}
	if err := audit.Record(tx, breakerEntry(b, "circuit.opened", audit.System, now,
		map[string]any{"failures": n, "windowSeconds": int(breaker.Window.Seconds()), "errorType": errorType, "executionId": ex.ID})); err != nil {
		return err
	}
	ev := notify.Event{Kind: notify.BreakerOpened, OrganizationID: ex.OrganizationID, WorkflowID: ex.WorkflowID, WorkflowName: def.Name,
		ExecutionID: ex.ID, Subject: deref(ex.Subject), ErrorType: errorType, BreakerID: b.ID, Settings: def.Settings.ErrorNotifications, At: now,
		Reason: fmt.Sprintf("%d failures in %d s", n, int(breaker.Window.Seconds())), DedupKey: fmt.Sprintf("breaker_opened:%s:%d", b.ID, now.UnixNano())}
	if g.step != nil {
		ev.StepID = *g.step
		if i := def.Index(*g.step); i >= 0 {
			ev.StepName = def.Steps[i].Title()
		}
	} else if g.host != nil {
		ev.StepName = *g.host
	}
	return e.emit(tx, ev)
}

// breakerSucceeded closes the breaker after a trial's success, and releases the attempts that
// wait on it.
func (e *Engine) breakerSucceeded(ctx context.Context, ex *models.Execution, g *gate) {
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
	e.breakerAfter(ctx, g)
}

// breakerAfter does what the commit that recorded an attempt's end left for after it: it
// releases the rest of the attempts waiting on a breaker that commit closed.
func (e *Engine) breakerAfter(ctx context.Context, g *gate) {
	if g == nil {
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
func (e *Engine) closeTx(tx *gorm.DB, ex *models.Execution, g *gate, now time.Time) ([]Job, error) {
	defer e.breakers.forget(g.cache)
	r := tx.Model(&models.CircuitBreaker{}).Where("id = ? AND state = ?", g.id, breaker.HalfOpen).Updates(map[string]any{
		"state": breaker.Closed, "opened_at": nil, "half_opened_at": nil, "failure_count": 0,
		"success_count": gorm.Expr("success_count + 1"), "last_success_at": now, "updated_at": now})
	if r.Error != nil || r.RowsAffected == 0 {
		return nil, r.Error
	}
	if err := tx.Where("breaker_id = ?", g.id).Delete(&models.BreakerFailure{}).Error; err != nil {
		return nil, err
	}
	b, err := breakerRow(tx, g.id)
	if err != nil {
		return nil, err
	}
	if err := audit.Record(tx, breakerEntry(b, "circuit.closed", audit.System, now, map[string]any{"executionId": ex.ID})); err != nil {
		return nil, err
	}
	jobs, more, err := breakerTx{tx: tx, now: now}.ReleaseWaiting(g.id, now, 0, releaseBatch)
	if more {
		g.release = &releasing{id: g.id, from: now, offset: releaseBatch}
	}
	return jobs, err
}

// releaseRest releases the attempts still waiting on a breaker that closed, a batch
// (releaseBatch) per transaction, each due where the ones before left off, while the
// breaker stays closed.
func (e *Engine) releaseRest(ctx context.Context, r *releasing) {
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

// BreakerAction is an admin's reset or forced opening of a breaker.
type BreakerAction struct {
	OrganizationID string
	BreakerID      string
	Open           bool // true: force open; false: reset (close)
	Reason         string
	Actor          audit.Actor
}

// ActOnBreaker resets (closes) or force-opens a breaker of the organization, with a reason;
// a reset releases the attempts waiting on it. Errors: ENOTFOUND; EINVALID without a reason
// (or one over 2,000 characters).
func (e *Engine) ActOnBreaker(ctx context.Context, r BreakerAction) (*models.CircuitBreaker, error) {
	reason := strings.TrimSpace(r.Reason)
	switch {
	case reason == "":
		return nil, models.Invalid("breaker.reason", map[string]string{"reason": "is required"})
	case len([]rune(reason)) > MaxNotes:
		return nil, models.Invalid("breaker.reason", map[string]string{"reason": fmt.Sprintf("must be at most %d characters", MaxNotes)})
	}
	var out *models.CircuitBreaker
	var rest *releasing
	err := e.commit(ctx, func(tx *gorm.DB, now time.Time) ([]Job, error) {
		var b models.CircuitBreaker
		if err := tx.Where("organization_id = ? AND id = ?", r.OrganizationID, r.BreakerID).First(&b).Error; err != nil {
			if models.IsNotFound(err) {
				return nil, models.NotFound("circuit breaker")
			}
			return nil, err
		}
		defer e.breakers.forget(cacheKey(b.OrganizationID, b.ScopeKey))
		action, upd := "circuit.closed", map[string]any{"state": breaker.Closed, "forced": false, "opened_at": nil,
			"half_opened_at": nil, "failure_count": 0, "reason": reason, "updated_at": now}
		if r.Open {
			action, upd = "circuit.opened", map[string]any{"state": breaker.Open, "forced": true, "opened_at": now,
				"half_opened_at": nil, "reason": reason, "updated_at": now}
		}
		if err := tx.Model(&models.CircuitBreaker{}).Where("id = ?", b.ID).Updates(upd).Error; err != nil {
			return nil, err
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
		if err := tx.Where("breaker_id = ?", b.ID).Delete(&models.BreakerFailure{}).Error; err != nil {
			return nil, err
		}
		jobs, more, err := breakerTx{tx: tx, now: now}.ReleaseWaiting(b.ID, now, 0, releaseBatch)
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
