-- +goose Up
-- API tokens expire and can be revoked.
ALTER TABLE api_tokens ADD COLUMN expires_at TIMESTAMPTZ;
ALTER TABLE api_tokens ADD COLUMN revoked_at TIMESTAMPTZ;

-- +goose Down
ALTER TABLE api_tokens DROP COLUMN revoked_at;
ALTER TABLE api_tokens DROP COLUMN expires_at;
