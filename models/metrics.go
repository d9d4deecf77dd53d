package models

import "context"

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
	State          string
}

// BreakerGauges returns every circuit breaker's state (one row per breaker: as many as the
// workflows' steps and hosts guarded, not as executions).
func (db *DB) BreakerGauges(ctx context.Context) ([]BreakerGauge, error) {
	var out []BreakerGauge
	err := db.Conn(ctx).Model(&CircuitBreaker{}).Select("organization_id, workflow_id, step_id, host, state").
		Order("organization_id, scope_key").Scan(&out).Error
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
