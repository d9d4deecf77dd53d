-- +goose Up
-- The lists' orders (issue 21): the dead-letter list sorts by expiry, retries and subject,
-- the executions list by subject. Each order is its keys then id, all one direction, and
-- its page after a cursor is one row-value comparison: an index of (organization_id, keys,
-- id) answers a page as one short range, read forwards or backwards. The default orders
-- (newest first) keep their indexes of migration 00007. The subject's key is the
-- expression the queries order by (a missing subject sorts as '').
CREATE INDEX idx_dlq_sort_expires ON dead_letter_queue(organization_id, expires_at, id);
CREATE INDEX idx_dlq_sort_retries ON dead_letter_queue(organization_id, retry_count, created_at, id);
CREATE INDEX idx_dlq_sort_subject ON dead_letter_queue(organization_id, (COALESCE(subject, '')), id);
CREATE INDEX idx_executions_sort_subject ON workflow_executions(organization_id, (COALESCE(subject, '')), id);
-- An attempt's duration: the time its request took, measured by the engine in microseconds
-- (started_at and finished_at are when it was claimed and recorded, database clock).
ALTER TABLE step_executions ADD COLUMN duration_us BIGINT;

-- +goose Down
ALTER TABLE step_executions DROP COLUMN duration_us;
DROP INDEX idx_executions_sort_subject;
DROP INDEX idx_dlq_sort_subject;
DROP INDEX idx_dlq_sort_retries;
DROP INDEX idx_dlq_sort_expires;
