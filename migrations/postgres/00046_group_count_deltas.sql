-- +goose Up
-- Issue 22: grouping adds no more than 5 % to the failure branch, and a bulk of one problem
-- runs at its rate. Every change of a group's counters (a failure's join, a replay taking an
-- item, its end, a close, a split) updated the group's one row, so on PostgreSQL every item
-- of one problem queued on that row's lock for the length of each commit. On PostgreSQL the
-- engine now inserts one row here instead (the openwork counters' shape, migration 00042):
-- insert-only deltas of arrivals, counts, open amount and last seen, which
-- models.DB.FoldGroupCounts moves into the groups' rows with the reconciler. A reader reads
-- dlq_groups_now, the rows with their deltas added, in one statement (one snapshot), so
-- every figure is exact at any moment. SQLite (one writer, no lock queue) keeps its
-- one-statement updates: its view is the table.
-- No foreign key: checking one would lock the group's row (KEY SHARE) for every delta.
CREATE TABLE dlq_group_counts (
    id                BIGSERIAL PRIMARY KEY,
    organization_id   UUID NOT NULL,
    group_id          UUID NOT NULL,
    arrivals          INTEGER NOT NULL DEFAULT 0,
    pending_count     INTEGER NOT NULL DEFAULT 0,
    processing_count  INTEGER NOT NULL DEFAULT 0,
    closed_count      INTEGER NOT NULL DEFAULT 0,
    open_count        INTEGER NOT NULL DEFAULT 0,
    open_amount_minor BIGINT NOT NULL DEFAULT 0,
    seen_at           TIMESTAMPTZ
);
CREATE INDEX idx_dlq_group_counts ON dlq_group_counts (organization_id, group_id);

CREATE VIEW dlq_groups_now AS
SELECT g.id, g.organization_id, g.fingerprint, g.version, g.workflow_id, g.step_id, g.error_type, g.error_code, g.title,
       g.search_text, g.state, g.muted_until, g.split_from,
       g.arrivals + COALESCE(d.arrivals, 0) AS arrivals,
       g.pending_count + COALESCE(d.pending_count, 0) AS pending_count,
       g.processing_count + COALESCE(d.processing_count, 0) AS processing_count,
       g.closed_count + COALESCE(d.closed_count, 0) AS closed_count,
       g.open_count + COALESCE(d.open_count, 0) AS open_count,
       g.open_amount_minor + COALESCE(d.open_amount_minor, 0) AS open_amount_minor,
       g.first_seen_at, GREATEST(g.last_seen_at, d.seen_at) AS last_seen_at,
       g.resolved_at, g.resolved_before, g.reopened_at, g.reopen_cause, g.escalation_level, g.escalated_at, g.escalated_to,
       g.created_at, g.updated_at
FROM dlq_groups g LEFT JOIN (
    SELECT organization_id, group_id, CAST(SUM(arrivals) AS INTEGER) AS arrivals, CAST(SUM(pending_count) AS INTEGER) AS pending_count,
           CAST(SUM(processing_count) AS INTEGER) AS processing_count, CAST(SUM(closed_count) AS INTEGER) AS closed_count,
           CAST(SUM(open_count) AS INTEGER) AS open_count, CAST(SUM(open_amount_minor) AS BIGINT) AS open_amount_minor, MAX(seen_at) AS seen_at
    FROM dlq_group_counts GROUP BY organization_id, group_id
) d ON d.organization_id = g.organization_id AND d.group_id = g.id;

-- +goose Down
-- The deltas not yet folded go into the rows first (the code before this migration reads the
-- rows alone).
UPDATE dlq_groups g SET arrivals = g.arrivals + d.arrivals, pending_count = g.pending_count + d.pending_count,
    processing_count = g.processing_count + d.processing_count, closed_count = g.closed_count + d.closed_count,
    open_count = g.open_count + d.open_count, open_amount_minor = g.open_amount_minor + d.open_amount_minor,
    last_seen_at = GREATEST(g.last_seen_at, d.seen_at)
FROM (SELECT group_id, SUM(arrivals) AS arrivals, SUM(pending_count) AS pending_count, SUM(processing_count) AS processing_count,
             SUM(closed_count) AS closed_count, SUM(open_count) AS open_count, SUM(open_amount_minor) AS open_amount_minor,
             MAX(seen_at) AS seen_at
      FROM dlq_group_counts GROUP BY group_id) d
WHERE g.id = d.group_id;
DROP VIEW dlq_groups_now;
DROP TABLE dlq_group_counts;
