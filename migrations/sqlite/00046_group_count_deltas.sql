-- +goose Up
-- Issue 22: on PostgreSQL a change of a group's counters is a delta row (dlq_group_counts)
-- that readers add through the view dlq_groups_now (see the PostgreSQL migration). SQLite has
-- one writer and no lock queue: it keeps its one-statement updates of the group's row, and
-- its view is the table, so that readers name one relation on both databases. The table
-- exists (empty) so that the guarded transitions' SQL is the same on both.
CREATE TABLE dlq_group_counts (
    id                INTEGER PRIMARY KEY AUTOINCREMENT,
    organization_id   TEXT NOT NULL,
    group_id          TEXT NOT NULL,
    arrivals          INTEGER NOT NULL DEFAULT 0,
    pending_count     INTEGER NOT NULL DEFAULT 0,
    processing_count  INTEGER NOT NULL DEFAULT 0,
    closed_count      INTEGER NOT NULL DEFAULT 0,
    open_count        INTEGER NOT NULL DEFAULT 0,
    open_amount_minor INTEGER NOT NULL DEFAULT 0,
    seen_at           DATETIME
);
CREATE INDEX idx_dlq_group_counts ON dlq_group_counts (organization_id, group_id);
CREATE VIEW dlq_groups_now AS SELECT * FROM dlq_groups;

-- +goose Down
DROP VIEW dlq_groups_now;
DROP TABLE dlq_group_counts;
