-- +goose Up
-- A bulk action through the API takes an Idempotency-Key: the job remembers the key and a
-- hash of its request, so the same request again answers with the same job (for 24 hours).
ALTER TABLE dlq_bulk_jobs ADD COLUMN idem_key VARCHAR(255);
ALTER TABLE dlq_bulk_jobs ADD COLUMN request_hash VARCHAR(64);
CREATE UNIQUE INDEX idx_dlq_bulk_idem ON dlq_bulk_jobs(organization_id, idem_key) WHERE idem_key IS NOT NULL;

-- +goose Down
DROP INDEX idx_dlq_bulk_idem;
ALTER TABLE dlq_bulk_jobs DROP COLUMN request_hash;
ALTER TABLE dlq_bulk_jobs DROP COLUMN idem_key;
