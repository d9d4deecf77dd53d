-- +goose Up
-- Rollback (issue 10). One compensation_actions row per compensation of a rollback: the
-- step it undoes, its place in the rollback (0 runs first: the last completed step), its
-- attempts, schedule and lease (it runs durably, like a step attempt), its idempotency key
-- (compensate:{execution}:{step}) and what happened. Status: pending, running, waiting (a
-- manual compensation waits for an admin), completed, failed, skipped.
ALTER TABLE compensation_actions ADD COLUMN position INTEGER NOT NULL DEFAULT 0;
ALTER TABLE compensation_actions ADD COLUMN step_index INTEGER NOT NULL DEFAULT 0;
ALTER TABLE compensation_actions ADD COLUMN attempts INTEGER NOT NULL DEFAULT 0;
ALTER TABLE compensation_actions ADD COLUMN generation INTEGER NOT NULL DEFAULT 1;
ALTER TABLE compensation_actions ADD COLUMN idempotency_key VARCHAR(300);
ALTER TABLE compensation_actions ADD COLUMN error_type VARCHAR(50);
ALTER TABLE compensation_actions ADD COLUMN error_message TEXT;
ALTER TABLE compensation_actions ADD COLUMN scheduled_at TIMESTAMPTZ;
ALTER TABLE compensation_actions ADD COLUMN started_at TIMESTAMPTZ;
ALTER TABLE compensation_actions ADD COLUMN finished_at TIMESTAMPTZ;
ALTER TABLE compensation_actions ADD COLUMN lease_expires_at TIMESTAMPTZ;
ALTER TABLE compensation_actions ADD COLUMN resolved_by UUID;
ALTER TABLE compensation_actions ADD COLUMN updated_at TIMESTAMPTZ NOT NULL DEFAULT NOW();
CREATE INDEX idx_compensations_execution ON compensation_actions(execution_id, position);
CREATE INDEX idx_compensations_open ON compensation_actions(scheduled_at) WHERE status IN ('pending', 'running');

-- An execution's rollback, beside its status: ROLLING_BACK, ROLLED_BACK or ROLLBACK_FAILED.
ALTER TABLE workflow_executions ADD COLUMN rollback_status VARCHAR(20);

-- +goose Down
ALTER TABLE workflow_executions DROP COLUMN rollback_status;
DROP INDEX idx_compensations_open;
DROP INDEX idx_compensations_execution;
ALTER TABLE compensation_actions DROP COLUMN updated_at;
ALTER TABLE compensation_actions DROP COLUMN resolved_by;
ALTER TABLE compensation_actions DROP COLUMN lease_expires_at;
ALTER TABLE compensation_actions DROP COLUMN finished_at;
ALTER TABLE compensation_actions DROP COLUMN started_at;
ALTER TABLE compensation_actions DROP COLUMN scheduled_at;
ALTER TABLE compensation_actions DROP COLUMN error_message;
ALTER TABLE compensation_actions DROP COLUMN error_type;
ALTER TABLE compensation_actions DROP COLUMN idempotency_key;
ALTER TABLE compensation_actions DROP COLUMN generation;
ALTER TABLE compensation_actions DROP COLUMN attempts;
ALTER TABLE compensation_actions DROP COLUMN step_index;
ALTER TABLE compensation_actions DROP COLUMN position;
