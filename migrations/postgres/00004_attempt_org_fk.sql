-- +goose Up
-- Every attempt insert checked organization_id against organizations, which takes a KEY SHARE
-- lock on the organization's one row: under load, every worker of the organization locks the
-- same row, and PostgreSQL turns the concurrent lockers into a new MultiXact each time. The
-- check is redundant: an attempt belongs to its execution (execution_id keeps its foreign key
-- and ON DELETE CASCADE), and the execution to the organization. Dropping it made the step
-- path about 15 % faster (`make bench`).
ALTER TABLE step_executions DROP CONSTRAINT step_executions_organization_id_fkey;

-- +goose Down
ALTER TABLE step_executions ADD CONSTRAINT step_executions_organization_id_fkey
    FOREIGN KEY (organization_id) REFERENCES organizations(id) ON DELETE CASCADE;
