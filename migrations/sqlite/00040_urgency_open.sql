-- +goose Up
-- The urgency order (issue 23) ranks only dead letters still to handle by their due date: a
-- resolved, skipped or expired one has nothing left to do by then and sorts with those
-- without one (an overdue filing resolved yesterday led the list).
DROP INDEX idx_dlq_urgency;
CREATE INDEX idx_dlq_urgency ON dead_letter_queue(organization_id,
    (CASE WHEN status IN ('pending', 'processing') THEN -CAST(REPLACE(COALESCE(due_on, '9999-12-31'), '-', '') AS INTEGER) ELSE -99991231 END),
    (COALESCE(amount_minor, -9000000000000000000)), created_at, id);

-- +goose Down
DROP INDEX idx_dlq_urgency;
CREATE INDEX idx_dlq_urgency ON dead_letter_queue(organization_id,
    (-CAST(REPLACE(COALESCE(due_on, '9999-12-31'), '-', '') AS INTEGER)),
    (COALESCE(amount_minor, -9000000000000000000)), created_at, id);
