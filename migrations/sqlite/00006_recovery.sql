-- +goose Up
-- Manual recovery (issue 8).
-- An execution's subject: settings.subject rendered over its input when it started.
ALTER TABLE workflow_executions ADD COLUMN subject VARCHAR(300);
-- A full retry is a new execution that names the one it retries.
ALTER TABLE workflow_executions ADD COLUMN retry_of TEXT;
-- While a replay runs, the dead letter it serves (resolved when the run succeeds, pending
-- again with the new error when it fails), when the replay began (retries are counted from
-- there), the retry policy it overrides with, and the input before an operator edited it
-- (sealed like the input).
ALTER TABLE workflow_executions ADD COLUMN dead_letter_id TEXT;
ALTER TABLE workflow_executions ADD COLUMN replayed_at DATETIME;
ALTER TABLE workflow_executions ADD COLUMN retry_override TEXT;
ALTER TABLE workflow_executions ADD COLUMN original_input TEXT;

-- A dead letter carries what its list shows and searches, so the list needs no join.
ALTER TABLE dead_letter_queue ADD COLUMN subject VARCHAR(300);
ALTER TABLE dead_letter_queue ADD COLUMN error_type VARCHAR(50) NOT NULL DEFAULT 'unknown';
ALTER TABLE dead_letter_queue ADD COLUMN reason TEXT NOT NULL DEFAULT '';
ALTER TABLE dead_letter_queue ADD COLUMN retry_count INTEGER NOT NULL DEFAULT 0;
ALTER TABLE dead_letter_queue ADD COLUMN resolution_notes TEXT;
ALTER TABLE dead_letter_queue ADD COLUMN resolved_by TEXT;
ALTER TABLE dead_letter_queue ADD COLUMN resolved_at DATETIME;
ALTER TABLE dead_letter_queue ADD COLUMN replay_execution_id TEXT;
UPDATE dead_letter_queue SET
  error_type = (SELECT e.error_type FROM workflow_execution_errors e WHERE e.id = dead_letter_queue.error_id),
  reason = (SELECT e.error_message FROM workflow_execution_errors e WHERE e.id = dead_letter_queue.error_id),
  retry_count = (SELECT e.retry_count FROM workflow_execution_errors e WHERE e.id = dead_letter_queue.error_id);
-- One dead letter per execution: a failed replay returns the item, it does not add one.
CREATE UNIQUE INDEX idx_dlq_execution ON dead_letter_queue(execution_id);

-- Bulk actions on dead letters, run in the background.
CREATE TABLE dlq_bulk_jobs (
    id TEXT PRIMARY KEY,
    organization_id TEXT NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
    action VARCHAR(30) NOT NULL,
    filter TEXT,
    notes TEXT,
    status VARCHAR(20) NOT NULL DEFAULT 'queued',
    total INTEGER NOT NULL DEFAULT 0,
    processed INTEGER NOT NULL DEFAULT 0,
    succeeded INTEGER NOT NULL DEFAULT 0,
    failed INTEGER NOT NULL DEFAULT 0,
    created_by TEXT,
    created_at DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP,
    updated_at DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP,
    finished_at DATETIME
);
CREATE INDEX idx_dlq_bulk_org ON dlq_bulk_jobs(organization_id, created_at);
CREATE TABLE dlq_bulk_items (
    bulk_id TEXT NOT NULL REFERENCES dlq_bulk_jobs(id) ON DELETE CASCADE,
    dead_letter_id TEXT NOT NULL,
    position INTEGER NOT NULL,
    status VARCHAR(20) NOT NULL DEFAULT 'pending',
    message TEXT,
    execution_id TEXT,
    updated_at DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP,
    PRIMARY KEY (bulk_id, dead_letter_id)
);
CREATE INDEX idx_dlq_bulk_items_pending ON dlq_bulk_items(bulk_id, position) WHERE status = 'pending';

-- +goose Down
DROP TABLE dlq_bulk_items;
DROP TABLE dlq_bulk_jobs;
DROP INDEX idx_dlq_execution;
ALTER TABLE dead_letter_queue DROP COLUMN replay_execution_id;
ALTER TABLE dead_letter_queue DROP COLUMN resolved_at;
ALTER TABLE dead_letter_queue DROP COLUMN resolved_by;
ALTER TABLE dead_letter_queue DROP COLUMN resolution_notes;
ALTER TABLE dead_letter_queue DROP COLUMN retry_count;
ALTER TABLE dead_letter_queue DROP COLUMN reason;
ALTER TABLE dead_letter_queue DROP COLUMN error_type;
ALTER TABLE dead_letter_queue DROP COLUMN subject;
ALTER TABLE workflow_executions DROP COLUMN original_input;
ALTER TABLE workflow_executions DROP COLUMN retry_override;
ALTER TABLE workflow_executions DROP COLUMN replayed_at;
ALTER TABLE workflow_executions DROP COLUMN dead_letter_id;
ALTER TABLE workflow_executions DROP COLUMN retry_of;
ALTER TABLE workflow_executions DROP COLUMN subject;
