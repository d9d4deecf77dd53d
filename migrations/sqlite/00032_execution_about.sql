-- +goose Up
-- What an execution is about (issue 23): its client (a key such as the NIP), period
-- (YYYY-MM, YYYY-Qn or YYYY), filing obligation and the due date counted from them (a civil
-- date as text, YYYY-MM-DD: it sorts as a date on both databases), and its
-- amount in minor units of its currency (exact sums: never a float). Rendered from the
-- workflow's settings when the execution starts. The organization's rules: the day ZUS is
-- due (15 or 20) and how many working days before a due date work is at risk.
ALTER TABLE workflow_executions ADD COLUMN client TEXT;
ALTER TABLE workflow_executions ADD COLUMN period TEXT;
ALTER TABLE workflow_executions ADD COLUMN obligation TEXT;
ALTER TABLE workflow_executions ADD COLUMN due_on TEXT;
ALTER TABLE workflow_executions ADD COLUMN amount_minor BIGINT;
ALTER TABLE workflow_executions ADD COLUMN currency TEXT;
ALTER TABLE organizations ADD COLUMN zus_day INTEGER NOT NULL DEFAULT 20;
ALTER TABLE organizations ADD COLUMN risk_working_days INTEGER NOT NULL DEFAULT 3;
-- The lists' orders by due date (soonest first, none last) and by amount (largest first).
CREATE INDEX idx_executions_due ON workflow_executions(organization_id, (COALESCE(due_on, '9999-12-31')), id);
CREATE INDEX idx_executions_amount ON workflow_executions(organization_id, (COALESCE(amount_minor, -9000000000000000000)), id);
CREATE INDEX idx_executions_client ON workflow_executions(organization_id, client, id) WHERE client IS NOT NULL;
-- Dead letters carry their execution's, copied when made (and when a replay returns them),
-- so the list filters, sorts and sums them without a join.
ALTER TABLE dead_letter_queue ADD COLUMN client TEXT;
ALTER TABLE dead_letter_queue ADD COLUMN period TEXT;
ALTER TABLE dead_letter_queue ADD COLUMN obligation TEXT;
ALTER TABLE dead_letter_queue ADD COLUMN due_on TEXT;
ALTER TABLE dead_letter_queue ADD COLUMN amount_minor BIGINT;
ALTER TABLE dead_letter_queue ADD COLUMN currency TEXT;
CREATE INDEX idx_dlq_due ON dead_letter_queue(organization_id, (COALESCE(due_on, '9999-12-31')), id);
CREATE INDEX idx_dlq_amount ON dead_letter_queue(organization_id, (COALESCE(amount_minor, -9000000000000000000)), id);
CREATE INDEX idx_dlq_client ON dead_letter_queue(organization_id, client, id) WHERE client IS NOT NULL;

-- +goose Down
DROP INDEX idx_dlq_client;
DROP INDEX idx_dlq_amount;
DROP INDEX idx_dlq_due;
ALTER TABLE dead_letter_queue DROP COLUMN currency;
ALTER TABLE dead_letter_queue DROP COLUMN amount_minor;
ALTER TABLE dead_letter_queue DROP COLUMN due_on;
ALTER TABLE dead_letter_queue DROP COLUMN obligation;
ALTER TABLE dead_letter_queue DROP COLUMN period;
ALTER TABLE dead_letter_queue DROP COLUMN client;
DROP INDEX idx_executions_client;
DROP INDEX idx_executions_amount;
DROP INDEX idx_executions_due;
ALTER TABLE organizations DROP COLUMN risk_working_days;
ALTER TABLE organizations DROP COLUMN zus_day;
ALTER TABLE workflow_executions DROP COLUMN currency;
ALTER TABLE workflow_executions DROP COLUMN amount_minor;
ALTER TABLE workflow_executions DROP COLUMN due_on;
ALTER TABLE workflow_executions DROP COLUMN obligation;
ALTER TABLE workflow_executions DROP COLUMN period;
ALTER TABLE workflow_executions DROP COLUMN client;
