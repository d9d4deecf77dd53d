-- +goose Up
-- Language and time zone: a user's own choice (NULL: the organization's), and the
-- organization's defaults for its users.
ALTER TABLE users ADD COLUMN language VARCHAR(10);
ALTER TABLE users ADD COLUMN time_zone VARCHAR(64);
ALTER TABLE organizations ADD COLUMN default_language VARCHAR(10);
ALTER TABLE organizations ADD COLUMN time_zone VARCHAR(64);

-- +goose Down
ALTER TABLE organizations DROP COLUMN time_zone;
ALTER TABLE organizations DROP COLUMN default_language;
ALTER TABLE users DROP COLUMN time_zone;
ALTER TABLE users DROP COLUMN language;
