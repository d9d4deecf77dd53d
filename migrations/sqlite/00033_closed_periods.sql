-- +goose Up
-- Periods the office has closed (issue 23): for one client (its key, as executions carry
-- it) or for every client (client = ''), with the admin's note, who closed it (the user's
-- or token's id, and the name shown then) and when. While a period is closed, steps marked
-- postsToPeriod do not run for executions about it (a closed quarter or year covers its
-- months). One row per organization, period and client: closing it twice is a conflict.
CREATE TABLE closed_periods (
    id TEXT PRIMARY KEY,
    organization_id TEXT NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
    period VARCHAR(7) NOT NULL,
    client VARCHAR(200) NOT NULL DEFAULT '',
    note TEXT NOT NULL,
    closed_by_type VARCHAR(16) NOT NULL,
    closed_by TEXT,
    closed_by_name TEXT NOT NULL DEFAULT '',
    closed_at DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP,
    CONSTRAINT unique_closed_period UNIQUE (organization_id, period, client)
);

-- +goose Down
DROP TABLE closed_periods;
