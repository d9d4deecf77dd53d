-- +goose Up
-- Fewer writes per step (each step records one attempt and creates the next):
-- * Every attempt insert checked organization_id against organizations, which takes a KEY
--   SHARE lock on the organization's one row: under load every worker of the organization
--   locks the same row, and PostgreSQL makes a new MultiXact for the concurrent lockers. The
--   check is redundant: an attempt belongs to its execution (execution_id keeps its foreign
--   key and ON DELETE CASCADE), and the execution to the organization.
-- * idx_steps_execution repeats unique_step_attempt (execution_id, step_id, attempt) for
--   lookups by execution; the few attempts of one execution are sorted in memory.
ALTER TABLE step_executions DROP CONSTRAINT step_executions_organization_id_fkey;
DROP INDEX idx_steps_execution;

-- +goose Down
CREATE INDEX idx_steps_execution ON step_executions(execution_id, step_index, attempt);
ALTER TABLE step_executions ADD CONSTRAINT step_executions_organization_id_fkey
    FOREIGN KEY (organization_id) REFERENCES organizations(id) ON DELETE CASCADE;
