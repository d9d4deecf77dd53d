-- +goose Up
-- Error analytics (issue 24): daily rollups that the Analytics page and GET /api/v1/analytics
-- read instead of the dead letters and attempts themselves. A periodic job
-- (services/analytics.Refresher, River's periodic job) recomputes, per organization, every
-- day since the day before its last run, from the attempts, dead letters and executions, in
-- one transaction; nothing on the step path writes them. A day is a UTC calendar day
-- (YYYY-MM-DD, text on both databases). Ids are text: a rollup row outlives nothing it names.

-- Finished attempts per day (finished_at), workflow, step, attempt number, error type and
-- code ('' for an attempt that did not fail).
CREATE TABLE analytics_attempts_daily (
    organization_id UUID NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
    day VARCHAR(10) NOT NULL,
    workflow_id VARCHAR(36) NOT NULL,
    step_id VARCHAR(100) NOT NULL,
    attempt INTEGER NOT NULL,
    error_type VARCHAR(32) NOT NULL,
    error_code VARCHAR(50) NOT NULL,
    attempts INTEGER NOT NULL,
    succeeded INTEGER NOT NULL,
    retried INTEGER NOT NULL,
    PRIMARY KEY (organization_id, day, workflow_id, step_id, attempt, error_type, error_code)
);

-- Dead letters per day: arrivals (how = '', by created_at) and closures (by the day they were
-- closed, how = replay, resolved, skipped or expired), with the closures' times to
-- resolution in whole seconds, sorted, as unsigned varint deltas (models.PackSeconds).
CREATE TABLE analytics_dlq_daily (
    organization_id UUID NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
    day VARCHAR(10) NOT NULL,
    workflow_id VARCHAR(36) NOT NULL,
    step_id VARCHAR(100) NOT NULL,
    error_type VARCHAR(32) NOT NULL,
    error_code VARCHAR(50) NOT NULL,
    group_id VARCHAR(36) NOT NULL,
    how VARCHAR(16) NOT NULL,
    arrivals INTEGER NOT NULL,
    closures INTEGER NOT NULL,
    seconds BYTEA NOT NULL,
    PRIMARY KEY (organization_id, day, workflow_id, step_id, error_type, error_code, group_id, how)
);

-- Executions that had a failed attempt and ended without a dead letter, per day (finished_at)
-- and workflow: all of them, and those that succeeded (recovered automatically).
CREATE TABLE analytics_recovery_daily (
    organization_id UUID NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
    day VARCHAR(10) NOT NULL,
    workflow_id VARCHAR(36) NOT NULL,
    ended INTEGER NOT NULL,
    recovered INTEGER NOT NULL,
    PRIMARY KEY (organization_id, day, workflow_id)
);

-- When each organization's rollups were last computed (the page's "as of").
CREATE TABLE analytics_refreshes (
    organization_id UUID PRIMARY KEY REFERENCES organizations(id) ON DELETE CASCADE,
    refreshed_at TIMESTAMPTZ NOT NULL
);

-- Breaker transitions are audited (circuit.opened, circuit.half_opened, circuit.closed); the
-- analytics read them by organization and time without the rest of the log.
CREATE INDEX idx_audit_breakers ON audit_log(organization_id, created_at) WHERE entity_type = 'circuit_breaker_state';

-- +goose Down
DROP INDEX idx_audit_breakers;
DROP TABLE analytics_refreshes;
DROP TABLE analytics_recovery_daily;
DROP TABLE analytics_dlq_daily;
DROP TABLE analytics_attempts_daily;
