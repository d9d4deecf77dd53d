package engine

import (
	"errors"
	"slices"
	"strings"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"lifeline/models"
	"lifeline/services/breaker"
)

// breakerTx changes the shared state of circuit breakers, in the transaction tx (or, for
// Ensure, in one statement of its own), at now (the database clock). Every change is one
// guarded compare-and-set: it reports false, with a nil error and nothing written, when the
// breaker (or trial slot, or attempt) is no longer in the state the change starts from; an
// error is the database's. The same code runs on PostgreSQL and SQLite; where the SQL must
// differ, the difference is inside the function. Callers never write a breaker's row.
//
// No change serializes the step path on a breaker's row: a counted failure inserts a row of
// its own (RecordFailure), and the row changes only on a transition.
type breakerTx struct {
	tx  *gorm.DB
	now time.Time
}

// breakerScope names a breaker in an organization (scope_key, unique in it) and what its row
// records of the scope: the workflow and step, or the host.
type breakerScope struct {
	org, key       string
	wf, step, host *string
}

// Ensure returns the id of the organization's breaker of scope, creating its row (closed,
// configured as cfg) when there is none. Run outside the transaction that records a
// failure: concurrent first failures then wait on the unique (organization, scope) only for
// this one statement, not for each other's transactions.
func (b breakerTx) Ensure(s breakerScope, cfg breaker.Config) (string, error) {
	row := models.CircuitBreaker{ID: models.NewID(), OrganizationID: s.org, ScopeKey: s.key, WorkflowID: s.wf, StepID: s.step, Host: s.host,
		State: breaker.Closed, FailureThreshold: cfg.FailureThreshold, ResetTimeoutMs: int(cfg.ResetTimeout.Milliseconds()),
		HalfOpenRequests: cfg.HalfOpenRequests, CreatedAt: b.now, UpdatedAt: b.now}
	if err := b.tx.Clauses(clause.OnConflict{Columns: []clause.Column{{Name: "organization_id"}, {Name: "scope_key"}}, DoNothing: true}).
		Create(&row).Error; err != nil {
		return "", err
	}
	var ids []string
	if err := b.tx.Model(&models.CircuitBreaker{}).Where("organization_id = ? AND scope_key = ?", s.org, s.key).Limit(1).Pluck("id", &ids).Error; err != nil {
		return "", err
	}
	if len(ids) == 0 {
		return "", errors.New("circuit breaker row " + s.key + " vanished as it was created")
	}
	return ids[0], nil
}

// RecordFailure counts a failure against the breaker: it inserts one row (insert-only: no
// row is locked or updated) and returns the failures in the window as this transaction
// sees them (on PostgreSQL, without those of transactions not committed yet).
func (b breakerTx) RecordFailure(id string) (int, error) {
	if err := b.tx.Create(&models.BreakerFailure{ID: models.NewID(), BreakerID: id, At: b.now}).Error; err != nil {
		return 0, err
	}
	return b.InWindow(id, b.now)
}

// InWindow counts the breaker's failures since the window before at.
func (b breakerTx) InWindow(id string, at time.Time) (int, error) {
	var n int64
	err := b.tx.Model(&models.BreakerFailure{}).Where("breaker_id = ? AND at > ?", id, at.Add(-breaker.Window)).Count(&n).Error
	return int(n), err
}

// Trip opens a closed breaker whose window holds failures (at least cfg's threshold), and
// stores cfg as its configuration: closed → open. Lost when it is not closed (another worker
// tripped it first, or it is open or half-open already).
func (b breakerTx) Trip(id string, cfg breaker.Config, failures int) (bool, error) {
	return b.set(b.tx.Where("id = ? AND state = ?", id, breaker.Closed), map[string]any{
		"state": breaker.Open, "opened_at": b.now, "half_opened_at": nil, "forced": false, "reason": nil,
		"failure_count": failures, "last_failure_at": b.now, "failure_threshold": cfg.FailureThreshold,
		"reset_timeout_ms": int(cfg.ResetTimeout.Milliseconds()), "half_open_requests": cfg.HalfOpenRequests, "updated_at": b.now})
}

// HalfOpen moves an open breaker whose reset timeout has passed to half-open: open (not
// forced, opened at openedAt) → half_open. Lost when another worker moved it first, or it
// was opened again since, or an admin forced it open.
func (b breakerTx) HalfOpen(id string, openedAt time.Time) (bool, error) {
	return b.set(b.tx.Where("id = ? AND state = ? AND forced = ? AND opened_at = ?", id, breaker.Open, false, openedAt),
		map[string]any{"state": breaker.HalfOpen, "half_opened_at": b.now, "updated_at": b.now})
}

// Reopen opens a half-open breaker again after a trial's counted failure: half_open → open,
// for another reset timeout. Lost when it is not half-open (another trial closed or reopened
// it first).
func (b breakerTx) Reopen(id string) (bool, error) {
	return b.set(b.tx.Where("id = ? AND state = ?", id, breaker.HalfOpen), map[string]any{
		"state": breaker.Open, "opened_at": b.now, "half_opened_at": nil, "failure_count": gorm.Expr("failure_count + 1"),
		"last_failure_at": b.now, "updated_at": b.now})
}

// Close closes a half-open breaker after a trial the dependency answered, and forgets its
// counted failures: half_open → closed. Lost when it is not half-open (another trial closed or
// reopened it first, or an admin acted).
func (b breakerTx) Close(id string) (bool, error) {
	won, err := b.set(b.tx.Where("id = ? AND state = ?", id, breaker.HalfOpen), map[string]any{
		"state": breaker.Closed, "opened_at": nil, "half_opened_at": nil, "failure_count": 0,
		"success_count": gorm.Expr("success_count + 1"), "last_success_at": b.now, "updated_at": b.now})
	if err != nil || !won {
		return false, err
	}
	return true, b.tx.Where("breaker_id = ?", id).Delete(&models.BreakerFailure{}).Error
}

// Reset is an admin's reset: the organization's breaker, in any state, → closed (not forced),
// with the reason, its counted failures forgotten. Lost when the organization has no such
// breaker.
func (b breakerTx) Reset(orgID, id, reason string) (bool, error) {
	won, err := b.set(b.tx.Where("id = ? AND organization_id = ?", id, orgID), map[string]any{
		"state": breaker.Closed, "forced": false, "opened_at": nil, "half_opened_at": nil, "failure_count": 0,
		"reason": reason, "updated_at": b.now})
	if err != nil || !won {
		return false, err
	}
	return true, b.tx.Where("breaker_id = ?", id).Delete(&models.BreakerFailure{}).Error
}

// ForceOpen is an admin's forced opening: the organization's breaker, in any state, → open
// and forced (it stays open until reset), with the reason. Lost when the organization has no
// such breaker.
func (b breakerTx) ForceOpen(orgID, id, reason string) (bool, error) {
	return b.set(b.tx.Where("id = ? AND organization_id = ?", id, orgID), map[string]any{
		"state": breaker.Open, "forced": true, "opened_at": b.now, "half_opened_at": nil, "reason": reason, "updated_at": b.now})
}

func (b breakerTx) set(where *gorm.DB, upd map[string]any) (bool, error) {
	r := where.Model(&models.CircuitBreaker{}).Updates(upd)
	return r.RowsAffected == 1, r.Error
}

// trialHeld is true of a trial slot (circuit_breaker_trials, in the statement as t) whose
// attempt may still be running its trial: its lease has not passed (? = now) and the attempt
// has not been seen to end, that is to be at a later generation, or at the slot's generation
// in a status other than PENDING (? ?) or RUNNING. An attempt not found, or seen PENDING at the
// slot's generation, still holds it: a transaction may read an attempt as it was before the
// claim that made it the trial (PostgreSQL's statement snapshot predates a commit it then
// waits for), and an attempt whose end it cannot see yet has not freed its slot for it.
const trialHeld = `t.lease_expires_at > ? AND NOT EXISTS (SELECT 1 FROM step_executions s WHERE s.id = t.attempt_id
  AND (s.generation > t.generation OR (s.generation = t.generation AND s.status NOT IN (?, ?))))`

// TakeTrial takes a free trial slot of a half-open breaker for attempt a, which has claimed
// it (RUNNING at a.Generation, leased until a.LeaseExpiresAt): one of the breaker's slots
// (0 ≤ slot < slots) that no attempt holds (trialHeld), by a compare-and-set on the slot's
// row. The slot is freed by the attempt's end (whatever commit moves it off RUNNING at that
// generation: its success, its failure, a hand-back, a reclaim) or when its lease passes;
// never by the time since the breaker half-opened. Lost when every slot is held: at most
// slots trials run at once, across every process.
func (b breakerTx) TakeTrial(id string, slots int, a *models.StepAttempt) (bool, error) {
	if a.LeaseExpiresAt == nil {
		return false, errors.New("take a trial slot: attempt " + a.ID + " is not claimed")
	}
	// Only while the breaker is half-open, and holding its row until this commits: a trial
	// whose failure reopens it (and frees its slot in the same commit) is either seen whole,
	// breaker open, or waits for this; never its freed slot with the breaker still half-open.
	r := b.tx.Model(&models.CircuitBreaker{}).Where("id = ? AND state = ?", id, breaker.HalfOpen).
		Update("updated_at", gorm.Expr("updated_at"))
	if r.Error != nil || r.RowsAffected == 0 {
		return false, r.Error
	}
	args := []any{b.now, models.StepPending, models.StepRunning}
	var held []int
	if err := b.tx.Table("circuit_breaker_trials AS t").Where("t.breaker_id = ? AND t.slot < ?", id, slots).
		Where(trialHeld, args...).Pluck("t.slot", &held).Error; err != nil {
		return false, err
	}
	// The existing row of the slot is the one named by its table (PostgreSQL and SQLite).
	free := gorm.Expr("NOT ("+strings.ReplaceAll(trialHeld, "t.", "circuit_breaker_trials.")+")", args...)
	for slot := range slots {
		if slices.Contains(held, slot) {
			continue
		}
		r := b.tx.Clauses(clause.OnConflict{
			Columns:   []clause.Column{{Name: "breaker_id"}, {Name: "slot"}},
			DoUpdates: clause.AssignmentColumns([]string{"attempt_id", "generation", "lease_expires_at", "taken_at"}),
			Where:     clause.Where{Exprs: []clause.Expression{free}},
		}).Create(&models.BreakerTrial{BreakerID: id, Slot: slot, AttemptID: a.ID, Generation: a.Generation,
			LeaseExpiresAt: *a.LeaseExpiresAt, TakenAt: b.now})
		if r.Error != nil {
			return false, r.Error
		}
		if r.RowsAffected == 1 {
			return true, nil
		}
	}
	return false, nil
}

// ReleaseWaiting reschedules up to limit of the attempts waiting on the breaker (PENDING,
// naming it), in the order they began waiting: the i-th is due at from + (offset+i) ×
// releaseSpacing, at its next generation, and waits no more. One statement, guarded on each
// attempt being still PENDING at the generation read; an attempt that moved on meanwhile is
// left alone. It returns the jobs of those it released (for the transaction's commit to
// queue), and more when there may be others waiting still (it read limit).
func (b breakerTx) ReleaseWaiting(id string, from time.Time, offset, limit int) (jobs []Job, more bool, err error) {
	var waiting []models.StepAttempt
	if err := b.tx.Select("id, generation").Where("waiting_breaker_id = ? AND status = ?", id, models.StepPending).
		Order("scheduled_at, created_at, id").Limit(limit).Find(&waiting).Error; err != nil {
		return nil, false, err
	}
	jobs, err = b.release(id, waiting, from, offset)
	return jobs, len(waiting) == limit, err
}

// release reschedules the waiting attempts (id and generation) as ReleaseWaiting does, in
// one statement, each only if it is still PENDING at that generation, waiting on the breaker.
func (b breakerTx) release(id string, waiting []models.StepAttempt, from time.Time, offset int) ([]Job, error) {
	if len(waiting) == 0 {
		return nil, nil
	}
	row := "(?, ?, ?)"
	if b.tx.Dialector.Name() == "postgres" { // a VALUES list's parameters have no type of their own there
		row = "(CAST(? AS uuid), CAST(? AS integer), CAST(? AS timestamptz))"
	}
	rows := make([]string, len(waiting))
	at := make(map[string]time.Time, len(waiting))
	args := make([]any, 0, 3*len(waiting)+3)
	args = append(args, b.now)
	for i, a := range waiting {
		rows[i] = row
		at[a.ID] = from.Add(time.Duration(offset+i) * releaseSpacing)
		args = append(args, a.ID, a.Generation, at[a.ID])
	}
	args = append(args, models.StepPending, id)
	var released []struct {
		ID         string
		Generation int
	}
	// VALUES columns are column1, column2… on both databases.
	err := b.tx.Raw(`UPDATE step_executions SET scheduled_at = v.column3, next_retry_at = v.column3,
  generation = step_executions.generation + 1, waiting_breaker_id = NULL, updated_at = ?
FROM (VALUES `+strings.Join(rows, ", ")+`) AS v
WHERE step_executions.id = v.column1 AND step_executions.generation = v.column2 AND step_executions.status = ?
  AND step_executions.waiting_breaker_id = ?
RETURNING step_executions.id, step_executions.generation`, args...).Scan(&released).Error
	if err != nil {
		return nil, err
	}
	jobs := make([]Job, len(released))
	for i, r := range released {
		jobs[i] = Job{AttemptID: r.ID, Generation: r.Generation, RunAt: at[r.ID]}
	}
	slices.SortFunc(jobs, func(x, y Job) int { return x.RunAt.Compare(y.RunAt) })
	return jobs, nil
}
