-- +goose Up
-- A failure group's counts kept on the group (issue 22, performance): its items by status
-- (pending, processing, closed: resolved, skipped or expired), and open_count (pending +
-- processing, what the Problems page ranks by), changed in the same transaction by every
-- transition that changes an item's status or group (services/engine: JoinGroup,
-- ClaimDeadLetter, ReturnToGroup, ResolveReplayed, ExpireDeadLetters, ReopenDeadLetter,
-- SplitOut, BackfillGroup), so that reading a group never counts its items. Backfilled here
-- from the items.
ALTER TABLE dlq_groups ADD COLUMN pending_count INTEGER NOT NULL DEFAULT 0;
ALTER TABLE dlq_groups ADD COLUMN processing_count INTEGER NOT NULL DEFAULT 0;
ALTER TABLE dlq_groups ADD COLUMN closed_count INTEGER NOT NULL DEFAULT 0;
ALTER TABLE dlq_groups ADD COLUMN open_count INTEGER NOT NULL DEFAULT 0;
UPDATE dlq_groups g SET pending_count = c.pending, processing_count = c.processing, closed_count = c.closed,
  open_count = c.pending + c.processing
FROM (SELECT group_id, count(*) FILTER (WHERE status = 'pending') AS pending,
        count(*) FILTER (WHERE status = 'processing') AS processing,
        count(*) FILTER (WHERE status NOT IN ('pending', 'processing')) AS closed
      FROM dead_letter_queue WHERE group_id IS NOT NULL GROUP BY group_id) c
WHERE c.group_id = g.id;
-- The Problems page: the groups with most to handle, then the most recently seen.
CREATE INDEX idx_dlq_groups_open ON dlq_groups (organization_id, open_count DESC, last_seen_at DESC, id DESC) WHERE open_count > 0;
-- A group's arrivals of the last 24 hours (a range of its newest items only), and its first
-- subjects (a skip through the distinct subjects, one index probe each).
CREATE INDEX idx_dlq_group_arrivals ON dead_letter_queue (organization_id, group_id, created_at) WHERE group_id IS NOT NULL;
CREATE INDEX idx_dlq_group_subjects ON dead_letter_queue (organization_id, group_id, subject) WHERE group_id IS NOT NULL;
-- A group's newest items of one status (its samples, its list by status) in the list's
-- order to the last key, so that the first few are read without sorting all of them.
DROP INDEX idx_dlq_group;
CREATE INDEX idx_dlq_group ON dead_letter_queue (organization_id, group_id, status, created_at DESC, id DESC) WHERE group_id IS NOT NULL;

-- +goose Down
DROP INDEX idx_dlq_group;
CREATE INDEX idx_dlq_group ON dead_letter_queue (group_id, status, created_at DESC) WHERE group_id IS NOT NULL;
DROP INDEX idx_dlq_group_subjects;
DROP INDEX idx_dlq_group_arrivals;
DROP INDEX idx_dlq_groups_open;
ALTER TABLE dlq_groups DROP COLUMN open_count;
ALTER TABLE dlq_groups DROP COLUMN closed_count;
ALTER TABLE dlq_groups DROP COLUMN processing_count;
ALTER TABLE dlq_groups DROP COLUMN pending_count;
