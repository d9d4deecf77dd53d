package models

import (
	"context"
	"time"
)

// The reads behind the gauges of /metrics: each is one cheap query over a small table or an
// index, whatever the number of dead letters or attempts, because a scrape runs them every
// few seconds.

// OrgPending is how many dead letters of an organization wait for someone (DLQPending).
type OrgPending struct {
	OrganizationID string
	Pending        int64
}

// PendingByOrg returns the organizations that have pending dead letters, with how many. It
// sums their failure groups' kept counts (Group.PendingCount from GroupsNow, maintained by the engine's
// transitions): it reads one row per group, never the dead letters themselves.
func (db *DB) PendingByOrg(ctx context.Context) ([]OrgPending, error) {
	var out []OrgPending
	err := db.Conn(ctx).Table(GroupsNow).Select("organization_id, SUM(pending_count) AS pending").
		Where("pending_count > 0").Group("organization_id").Order("organization_id").Scan(&out).Error
	return out, err
}

// BreakerGauge is a circuit breaker's identity (its organization and the workflow and step,
// or the host, it guards) and its state (BreakerStates).
type BreakerGauge struct {
	OrganizationID string
	WorkflowID     *string
	StepID         *string
	Host           *string
	// State is the state a call would meet now: an open breaker (not forced open by an
	// admin) whose reset timeout has passed lets a trial through, so it reads half_open
	// although its row still says open until that trial.
	State string
	// What the state is computed from.
	Forced         bool       `gorm:"column:forced"`
	OpenedAt       *time.Time `gorm:"column:opened_at"`
	ResetTimeoutMs int        `gorm:"column:reset_timeout_ms"`
}

// BreakerGauges returns every circuit breaker's state (one row per breaker: as many as the
// organizations' workflows' steps and hosts, never per dead letter or attempt), as a call
// would meet it at the database clock's now.
func (db *DB) BreakerGauges(ctx context.Context) ([]BreakerGauge, error) {
	now, err := db.Now(ctx)
	if err != nil {
		return nil, err
	}
	var out []BreakerGauge
	err = db.Conn(ctx).Model(&CircuitBreaker{}).Select("organization_id, workflow_id, step_id, host, state, forced, opened_at, reset_timeout_ms").
		Order("organization_id, scope_key").Scan(&out).Error
	for i, g := range out {
		if g.State == "open" && !g.Forced && g.OpenedAt != nil && !now.Before(g.OpenedAt.Add(time.Duration(g.ResetTimeoutMs)*time.Millisecond)) {
			out[i].State = "half_open"
		}
	}
	return out, err
}

// QueueDepth is how many of River's jobs of a queue are in a state.
type QueueDepth struct {
	Queue string
	State string
	Jobs  int64
}

// QueueDepths counts River's jobs that are not finished (available, scheduled, retryable,
// running, pending) by queue and state. It reads River's fetch index (state, queue, …), not
// the jobs.
func (db *DB) QueueDepths(ctx context.Context) ([]QueueDepth, error) {
	var out []QueueDepth
	err := db.Conn(ctx).Table("river_job").Select("queue, state, COUNT(*) AS jobs").
		Where("state IN ?", []string{"available", "scheduled", "retryable", "running", "pending"}).
		Group("queue, state").Order("queue, state").Scan(&out).Error
	return out, err
}
