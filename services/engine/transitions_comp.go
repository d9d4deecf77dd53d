package engine

import (
	"context"
	"time"

	"gorm.io/gorm"

	"lifeline/models"
)

// Transitions of compensations (a rollback's steps): see transitions.go. Each is guarded on
// the compensation's status and, where a job carries one, its generation.

// ClaimCompensation claims compensation c, PENDING at generation, for this worker: RUNNING
// since now, leased for lease, one more attempt (c.Attempts follows). Lost (false, nil) when
// it is not PENDING at generation.
func (t *transitions) ClaimCompensation(ctx context.Context, c *models.CompensationAction, generation int, lease time.Duration, now time.Time) (bool, error) {
	r := t.db.Conn(ctx).Model(&models.CompensationAction{}).Where("id = ? AND status = ? AND generation = ?", c.ID, models.CompPending, generation).
		Updates(map[string]any{"status": models.CompRunning, "started_at": now, "lease_expires_at": now.Add(lease),
			"attempts": c.Attempts + 1, "updated_at": now})
	if r.Error != nil || r.RowsAffected == 0 {
		return false, r.Error
	}
	c.Attempts++
	return true, nil
}

// ReleaseCompensation hands back compensation c, RUNNING at generation (a shutdown
// interrupted it): PENDING at the next generation, to run again with the same key. Lost
// (false, nil) when it is not RUNNING at generation.
func (t *transitions) ReleaseCompensation(ctx context.Context, c *models.CompensationAction, generation int, now time.Time) (bool, error) {
	r := t.db.Conn(ctx).Model(&models.CompensationAction{}).Where("id = ? AND status = ? AND generation = ?", c.ID, models.CompRunning, generation).
		Updates(map[string]any{"status": models.CompPending, "generation": generation + 1, "lease_expires_at": nil, "updated_at": now})
	return r.RowsAffected == 1, r.Error
}

// ReclaimCompensation takes back compensation c, left RUNNING at c.Generation past its lease
// by a process that died: PENDING at the next generation, due now, with the same key. Lost
// (false, nil) when it is not RUNNING at that generation.
func (t *transitions) ReclaimCompensation(ctx context.Context, c *models.CompensationAction, now time.Time) (bool, error) {
	r := t.db.Conn(ctx).Model(&models.CompensationAction{}).Where("id = ? AND status = ? AND generation = ?", c.ID, models.CompRunning, c.Generation).
		Updates(map[string]any{"status": models.CompPending, "generation": c.Generation + 1, "scheduled_at": now, "lease_expires_at": nil, "updated_at": now})
	return r.RowsAffected == 1, r.Error
}

// RequeueCompensation moves compensation c, due PENDING at c.Generation without a live job,
// to the next generation, due now (any older job becomes a no-op). Lost (false, nil) when it
// is not PENDING at that generation.
func (t *transitions) RequeueCompensation(ctx context.Context, c *models.CompensationAction, now time.Time) (bool, error) {
	r := t.db.Conn(ctx).Model(&models.CompensationAction{}).Where("id = ? AND status = ? AND generation = ?", c.ID, models.CompPending, c.Generation).
		Updates(map[string]any{"generation": c.Generation + 1, "scheduled_at": now, "updated_at": now})
	return r.RowsAffected == 1, r.Error
}

// AwaitConfirmation makes the manual compensation c, PENDING at generation, wait for an
// admin's confirmation: WAITING since now. Lost (false) when it is not PENDING at generation.
func (s stateTx) AwaitConfirmation(c *models.CompensationAction, generation int) (bool, error) {
	r := s.tx.Model(&models.CompensationAction{}).Where("id = ? AND status = ? AND generation = ?", c.ID, models.CompPending, generation).
		Updates(map[string]any{"status": models.CompWaiting, "started_at": s.now, "updated_at": s.now})
	return r.RowsAffected == 1, r.Error
}

// FinishCompensation records the end of a try of compensation c, RUNNING at generation:
// COMPLETED or FAILED (finished now), or PENDING at the next generation for a retry, with
// the fields given (result, error, schedule; not status nor generation). Lost (false) when
// it is not RUNNING at generation: nothing is written.
func (s stateTx) FinishCompensation(c *models.CompensationAction, generation int, status string, fields map[string]any) (bool, error) {
	upd := map[string]any{"status": status, "lease_expires_at": nil, "updated_at": s.now}
	if status == models.CompPending {
		upd["generation"] = generation + 1
	} else {
		upd["finished_at"] = s.now
	}
	for k, v := range fields {
		upd[k] = v
	}
	r := s.tx.Model(&models.CompensationAction{}).Where("id = ? AND status = ? AND generation = ?", c.ID, models.CompRunning, generation).Updates(upd)
	return r.RowsAffected == 1, r.Error
}

// ScheduleCompensation schedules compensation c, PENDING and not scheduled yet, to run now
// (its job is queued with the commit). Lost (false) when it is not PENDING or is scheduled
// already.
func (s stateTx) ScheduleCompensation(c *models.CompensationAction) (bool, error) {
	r := s.tx.Model(&models.CompensationAction{}).Where("id = ? AND status = ? AND scheduled_at IS NULL", c.ID, models.CompPending).
		Updates(map[string]any{"scheduled_at": s.now, "updated_at": s.now})
	return r.RowsAffected == 1, r.Error
}

// Compensation actions of an admin, by name: the states each starts from.
var compensationFrom = map[string][]string{"retry": {models.CompFailed}, "skip": {models.CompFailed, models.CompWaiting, models.CompPending},
	"confirm": {models.CompWaiting}}

// ActOnCompensation is an admin's action on compensation c (compensationFrom): retry (failed
// → PENDING at the next generation, due now, its attempts counted afresh), skip (→ SKIPPED)
// or confirm (a waiting manual one → COMPLETED), by the user by. Lost (false) when c is not
// in a state the action starts from.
func (s stateTx) ActOnCompensation(c *models.CompensationAction, action string, by *string) (bool, error) {
	upd := map[string]any{"resolved_by": by, "updated_at": s.now}
	switch action {
	case "retry":
		upd["status"], upd["generation"], upd["scheduled_at"], upd["attempts"], upd["finished_at"] = models.CompPending, gorm.Expr("generation + 1"), s.now, 0, nil
	case "skip":
		upd["status"], upd["finished_at"] = models.CompSkipped, s.now
	case "confirm":
		upd["status"], upd["finished_at"], upd["executed_at"] = models.CompCompleted, s.now, s.now
	}
	r := s.tx.Model(&models.CompensationAction{}).Where("id = ? AND generation = ? AND status IN ?", c.ID, c.Generation, compensationFrom[action]).Updates(upd)
	return r.RowsAffected == 1, r.Error
}
