-- +goose Up
-- idx_steps_execution repeats unique_step_attempt (execution_id, step_id, attempt) for
-- lookups by execution. (PostgreSQL also drops the attempt's redundant foreign key to
-- organizations, a lock hot spot there; SQLite checks it without locks, and dropping it
-- would mean rebuilding the table.)
DROP INDEX idx_steps_execution;

-- +goose Down
CREATE INDEX idx_steps_execution ON step_executions(execution_id, step_index, attempt);
