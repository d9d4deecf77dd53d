-- +goose Up
-- Issue 20: the step path on PostgreSQL, as migration 00037 did on SQLite. Every change of
-- an execution's status is an update that writes every index of workflow_executions (status
-- is indexed), and three of them serve only the executions list's rarer orders (by subject,
-- due date, amount: migrations 00022 and 00032). Measured on a quiet machine (10 alternating
-- runs of BenchmarkExecutions), they cost 3.4 % of PostgreSQL's steps per second, most of
-- what the step path had lost since e882c4a. Those orders now sort the organization's
-- executions: at 1,000,000 executions in one organization, the first page by due date takes
-- ~125 ms instead of 0.3 ms; filtered lists (a client, a period, a status) sort far fewer. The
-- dead-letter list keeps its orders' indexes (urgency, amount: migrations 00039 and 00040).
DROP INDEX IF EXISTS idx_executions_sort_subject;
DROP INDEX IF EXISTS idx_executions_due;
DROP INDEX IF EXISTS idx_executions_amount;

-- +goose Down
CREATE INDEX idx_executions_sort_subject ON workflow_executions(organization_id, (COALESCE(subject, '')), id);
CREATE INDEX idx_executions_due ON workflow_executions(organization_id, (COALESCE(due_on, '9999-12-31')), id);
CREATE INDEX idx_executions_amount ON workflow_executions(organization_id, (COALESCE(amount_minor, -9000000000000000000)), id);
