-- +goose Up
-- Failure groups at 1,000,000 items (issues 22 and 23). The executions whose completed
-- steps were undone (a rollback started on them; rollback_status is never cleared): few of
-- an organization's, so a group's view counts its rolled-back pending items from here, not by
-- reading every pending item of its groups.
CREATE INDEX idx_executions_rolled_back ON workflow_executions(organization_id, id) WHERE rollback_status IS NOT NULL;
-- A group's open amount (its pending and processing items' amounts summed, minor units),
-- kept with its counts by the same transitions: the Problems page orders groups by it.
ALTER TABLE dlq_groups ADD COLUMN open_amount_minor BIGINT NOT NULL DEFAULT 0;
UPDATE dlq_groups SET open_amount_minor = COALESCE((SELECT SUM(d.amount_minor) FROM dead_letter_queue d
    WHERE d.group_id = dlq_groups.id AND d.status IN ('pending', 'processing')), 0);
-- A group's open items by due date: its nearest due date is the first entry, its items at
-- risk a range.
CREATE INDEX idx_dlq_group_open_due ON dead_letter_queue(organization_id, group_id, due_on)
    WHERE group_id IS NOT NULL AND due_on IS NOT NULL AND status IN ('pending', 'processing');

-- +goose Down
DROP INDEX idx_dlq_group_open_due;
ALTER TABLE dlq_groups DROP COLUMN open_amount_minor;
DROP INDEX idx_executions_rolled_back;
