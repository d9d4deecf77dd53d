-- +goose Up
-- Deadlines (issue 23). The dead-letter list's urgency order: the due date soonest first
-- (as a number, negated, so that the whole order runs one way: overdue, due today, at risk
-- and later follow from the due date itself, since due dates are working days), then the
-- largest amount, then the newest; none last. The keyset of a page is one range of this
-- index.
CREATE INDEX idx_dlq_urgency ON dead_letter_queue(organization_id,
    (-CAST(REPLACE(COALESCE(due_on, '9999-12-31'), '-', '') AS INTEGER)),
    (COALESCE(amount_minor, -9000000000000000000)), created_at, id);
-- The open work of each due date (GET /api/v1/deadlines, the reminders): executions not
-- done, by due date.
CREATE INDEX idx_executions_open_due ON workflow_executions(organization_id, due_on, obligation, period, currency, amount_minor, client)
    WHERE due_on IS NOT NULL AND status <> 'SUCCEEDED';
-- The banner: dead letters still to handle by due date, with what it groups and counts.
CREATE INDEX idx_dlq_open_due ON dead_letter_queue(organization_id, due_on, obligation, period, client)
    WHERE due_on IS NOT NULL AND status IN ('pending', 'processing');
-- The reminders sent: one per organization, obligation, due date and threshold (working
-- days left), whatever the number of passes or processes that found it due.
CREATE TABLE deadline_reminders (
    id              TEXT PRIMARY KEY,
    organization_id TEXT NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
    obligation      TEXT NOT NULL,
    due_on          VARCHAR(10) NOT NULL,
    days_left       INTEGER NOT NULL,
    clients         INTEGER NOT NULL,
    sent_at         DATETIME NOT NULL,
    UNIQUE (organization_id, obligation, due_on, days_left)
);

-- +goose Down
DROP TABLE deadline_reminders;
DROP INDEX idx_dlq_open_due;
DROP INDEX idx_executions_open_due;
DROP INDEX idx_dlq_urgency;
