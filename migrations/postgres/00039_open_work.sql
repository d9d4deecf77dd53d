-- +goose Up
-- Deadlines and money at 1,000,000 executions (issue 23). The open dead letters by due date
-- hold their amounts and currencies, so that the Today page sums its obligations' money from
-- the index; the open dead letters by client hold theirs, so that the clients holding the
-- most are summed from an index in its order. The open executions by due date hold their
-- status too, so that Today's obligations count their dead-lettered ones from the index alone.
DROP INDEX idx_executions_open_due;
CREATE INDEX idx_executions_open_due ON workflow_executions(organization_id, due_on, obligation, period, currency, amount_minor, client, status)
    WHERE due_on IS NOT NULL AND status <> 'SUCCEEDED';
DROP INDEX idx_dlq_open_due;
CREATE INDEX idx_dlq_open_due ON dead_letter_queue(organization_id, due_on, obligation, period, currency, amount_minor, client)
    WHERE due_on IS NOT NULL AND status IN ('pending', 'processing');
CREATE INDEX idx_dlq_open_money ON dead_letter_queue(organization_id, client, currency, amount_minor)
    WHERE client IS NOT NULL AND amount_minor IS NOT NULL AND status IN ('pending', 'processing');

-- +goose Down
DROP INDEX idx_executions_open_due;
CREATE INDEX idx_executions_open_due ON workflow_executions(organization_id, due_on, obligation, period, currency, amount_minor, client)
    WHERE due_on IS NOT NULL AND status <> 'SUCCEEDED';
DROP INDEX idx_dlq_open_money;
DROP INDEX idx_dlq_open_due;
CREATE INDEX idx_dlq_open_due ON dead_letter_queue(organization_id, due_on, obligation, period, client)
    WHERE due_on IS NOT NULL AND status IN ('pending', 'processing');
