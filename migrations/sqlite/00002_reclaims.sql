-- +goose Up
-- How often an attempt was reclaimed from a dead process without ever committing.
ALTER TABLE step_executions ADD COLUMN reclaims INTEGER NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE step_executions DROP COLUMN reclaims;
