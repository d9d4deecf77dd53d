-- +goose Up
-- PostgreSQL drops the redundant foreign key step_executions.organization_id here (a lock hot
-- spot there). SQLite checks foreign keys without row locks, and dropping one would mean
-- rebuilding the table, so it keeps it. The version exists so both dialects stay numbered alike.
SELECT 1;

-- +goose Down
SELECT 1;
