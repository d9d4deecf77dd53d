-- +goose Up
-- Issue 20: the step path on SQLite. Every execution wrote an entry in three indexes that
-- serve only the executions list's rarer orders (by subject, due date, amount: migrations
-- 00022 and 00032); measured together, they cost the embedded database about 8 % of its
-- steps per second. On SQLite those orders sort the organization's executions instead (an
-- embedded database holds an office's, not a million); PostgreSQL keeps them.
DROP INDEX idx_executions_sort_subject;
DROP INDEX idx_executions_due;
DROP INDEX idx_executions_amount;

-- +goose Down
CREATE INDEX idx_executions_sort_subject ON workflow_executions(organization_id, (COALESCE(subject, '')), id);
CREATE INDEX idx_executions_due ON workflow_executions(organization_id, (COALESCE(due_on, '9999-12-31')), id);
CREATE INDEX idx_executions_amount ON workflow_executions(organization_id, (COALESCE(amount_minor, -9000000000000000000)), id);
