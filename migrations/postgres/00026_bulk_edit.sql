-- +goose Up
-- A group's edit-and-retry (issue 22): a bulk job of action edit_retry sets one field of the
-- input of each of its items to one value, then retries them. edit holds {"field", "value"}.
ALTER TABLE dlq_bulk_jobs ADD COLUMN edit JSONB;

-- +goose Down
ALTER TABLE dlq_bulk_jobs DROP COLUMN edit;
