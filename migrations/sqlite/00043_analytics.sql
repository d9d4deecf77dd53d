-- +goose Up
-- Error analytics (issue 24): narrow daily rollups that the Analytics page and
-- GET /api/v1/analytics aggregate in the database instead of reading the dead letters and
-- attempts themselves, so a report reads O(days × small dimensions) rows. A periodic job
-- (services/analytics.Refresher, River's periodic job) rebuilds, per organization, the days
-- since the day before its last run with INSERT … SELECT from the history (models.
-- RefreshAnalytics); nothing on the step path writes them. A day is a UTC calendar day
-- (YYYY-MM-DD, text on both databases). Ids are text: a rollup row outlives nothing it names.

-- Finished attempts per day (finished_at), workflow, step, attempt number, error type and
-- code ('' for an attempt that did not fail).
CREATE TABLE analytics_attempts_daily (
    organization_id TEXT NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
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

-- Every closing of a dead letter, once, as the refresh first saw it: when it was closed,
-- how (replay, resolved, skipped, expired) and its time to resolution (created → closed,
-- whole seconds). A ledger, not a rollup: a refresh only adds to it, so an item reopened
-- after it closed still counts as closed on the day it closed, and closed again later
-- counts once more on that day.
CREATE TABLE analytics_dlq_closures (
    organization_id TEXT NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
    dead_letter_id TEXT NOT NULL,
    closed_at DATETIME NOT NULL,
    how VARCHAR(16) NOT NULL,
    workflow_id VARCHAR(36) NOT NULL,
    step_id VARCHAR(100) NOT NULL,
    error_type VARCHAR(32) NOT NULL,
    client TEXT,
    seconds BIGINT NOT NULL,
    PRIMARY KEY (dead_letter_id, closed_at)
);
CREATE INDEX idx_analytics_closures_org ON analytics_dlq_closures(organization_id, closed_at);
CREATE INDEX idx_analytics_closures_client ON analytics_dlq_closures(organization_id, client, closed_at);

-- Dead letters per day, workflow, step and error type: arrivals (how = '', by created_at)
-- and closures (from the ledger, by the day they were closed, how = replay, resolved,
-- skipped or expired).
CREATE TABLE analytics_dlq_daily (
    organization_id TEXT NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
    day VARCHAR(10) NOT NULL,
    workflow_id VARCHAR(36) NOT NULL,
    step_id VARCHAR(100) NOT NULL,
    error_type VARCHAR(32) NOT NULL,
    how VARCHAR(16) NOT NULL,
    arrivals INTEGER NOT NULL,
    closures INTEGER NOT NULL,
    PRIMARY KEY (organization_id, day, workflow_id, step_id, error_type, how)
);

-- Dead-letter arrivals per day and problem group (with the group's workflow, step and
-- error type for the filters).
CREATE TABLE analytics_groups_daily (
    organization_id TEXT NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
    day VARCHAR(10) NOT NULL,
    workflow_id VARCHAR(36) NOT NULL,
    step_id VARCHAR(100) NOT NULL,
    error_type VARCHAR(32) NOT NULL,
    group_id VARCHAR(36) NOT NULL,
    arrivals INTEGER NOT NULL,
    PRIMARY KEY (organization_id, day, workflow_id, step_id, error_type, group_id)
);

-- Times to resolution per day closed, workflow and how, as a histogram: closures per
-- duration bucket (the whole second under 10 minutes, the whole
-- minute under a day, the whole hour beyond). The nearest-rank median and p90 are read
-- from it: exact under 10 minutes, to the minute under a day, to the hour beyond.
CREATE TABLE analytics_ttr_daily (
    organization_id TEXT NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
    day VARCHAR(10) NOT NULL,
    workflow_id VARCHAR(36) NOT NULL,
    how VARCHAR(16) NOT NULL,
    seconds BIGINT NOT NULL,
    closures INTEGER NOT NULL,
    PRIMARY KEY (organization_id, day, workflow_id, how, seconds)
);

-- The same histogram by step and error type too, read only when a report filters by them.
CREATE TABLE analytics_ttr_steps_daily (
    organization_id TEXT NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
    day VARCHAR(10) NOT NULL,
    workflow_id VARCHAR(36) NOT NULL,
    step_id VARCHAR(100) NOT NULL,
    error_type VARCHAR(32) NOT NULL,
    how VARCHAR(16) NOT NULL,
    seconds BIGINT NOT NULL,
    closures INTEGER NOT NULL,
    PRIMARY KEY (organization_id, day, workflow_id, step_id, error_type, how, seconds)
);

-- Executions that had a failed attempt and ended without a dead letter, per day (finished_at)
-- and workflow: all of them, and those that succeeded (recovered automatically).
CREATE TABLE analytics_recovery_daily (
    organization_id TEXT NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
    day VARCHAR(10) NOT NULL,
    workflow_id VARCHAR(36) NOT NULL,
    ended INTEGER NOT NULL,
    recovered INTEGER NOT NULL,
    PRIMARY KEY (organization_id, day, workflow_id)
);

-- When each organization's rollups were last computed (the page's "as of").
CREATE TABLE analytics_refreshes (
    organization_id TEXT PRIMARY KEY REFERENCES organizations(id) ON DELETE CASCADE,
    refreshed_at DATETIME NOT NULL
);

-- Breaker transitions are audited (circuit.opened, circuit.half_opened, circuit.closed); the
-- analytics read them by organization and time without the rest of the log.
CREATE INDEX idx_audit_breakers ON audit_log(organization_id, created_at) WHERE entity_type = 'circuit_breaker_state';

-- A refresh reads only what changed since the day before its last run: the attempts
-- finished, the executions ended and the dead letters updated (closed) since then.
CREATE INDEX idx_steps_finished ON step_executions(organization_id, finished_at) WHERE finished_at IS NOT NULL;
CREATE INDEX idx_executions_finished ON workflow_executions(organization_id, finished_at) WHERE finished_at IS NOT NULL;
CREATE INDEX idx_dlq_updated ON dead_letter_queue(organization_id, updated_at);

-- +goose Down
DROP INDEX idx_dlq_updated;
DROP INDEX idx_executions_finished;
DROP INDEX idx_steps_finished;
DROP INDEX idx_audit_breakers;
DROP TABLE analytics_refreshes;
DROP TABLE analytics_recovery_daily;
DROP TABLE analytics_ttr_steps_daily;
DROP TABLE analytics_ttr_daily;
DROP TABLE analytics_groups_daily;
DROP TABLE analytics_dlq_daily;
DROP TABLE analytics_dlq_closures;
DROP TABLE analytics_attempts_daily;
