-- +goose Up
-- Issue 22: what grouping costs the failure branch. Every failure's JoinGroup updates its
-- group's row (arrivals, counts, last seen); two indexes on columns that change with every
-- join (the Problems ranking's open count and the groups list's last seen) made each such
-- update write every index of the table (no HOT update) under the row's lock, which every
-- failure of one problem waits for. The ranking and the list read an organization's groups
-- (thousands, not millions) and sort them instead; the group rows leave room on their page
-- for HOT updates. The arrivals per hour read idx_dlq_group (one range per status) instead
-- of an index of their own.
DROP INDEX idx_dlq_groups_open;
DROP INDEX idx_dlq_groups_seen;
DROP INDEX idx_dlq_group_arrivals;
ALTER TABLE dlq_groups SET (fillfactor = 70);

-- +goose Down
ALTER TABLE dlq_groups RESET (fillfactor);
CREATE INDEX idx_dlq_group_arrivals ON dead_letter_queue (organization_id, group_id, created_at) WHERE group_id IS NOT NULL;
CREATE INDEX idx_dlq_groups_seen ON dlq_groups (organization_id, last_seen_at DESC, id DESC);
CREATE INDEX idx_dlq_groups_open ON dlq_groups (organization_id, open_count DESC, last_seen_at DESC, id DESC) WHERE open_count > 0;
