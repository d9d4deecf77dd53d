-- +goose Up
-- Bulk actions at the speed the target allows (issue 22). organizations.bulk_rate: how many
-- dead letters a second the organization's bulk actions act on (1–500, admins set it).
-- dlq_bulk_items.breaker_key: the scope key of the circuit breaker in front of the item's
-- failed step (retries only); its items wait (status 'waiting', pending → waiting → pending by
-- guarded updates) while that breaker is open. dlq_bulk_jobs.paced_at: when the job's last
-- batch began (the next batch's size makes up for a late start).
ALTER TABLE organizations ADD COLUMN bulk_rate INTEGER NOT NULL DEFAULT 20;
ALTER TABLE dlq_bulk_items ADD COLUMN breaker_key TEXT;
ALTER TABLE dlq_bulk_jobs ADD COLUMN paced_at DATETIME;
CREATE INDEX idx_dlq_bulk_items_waiting ON dlq_bulk_items(bulk_id, position) WHERE status = 'waiting';

-- +goose Down
DROP INDEX idx_dlq_bulk_items_waiting;
ALTER TABLE dlq_bulk_jobs DROP COLUMN paced_at;
ALTER TABLE dlq_bulk_items DROP COLUMN breaker_key;
ALTER TABLE organizations DROP COLUMN bulk_rate;
