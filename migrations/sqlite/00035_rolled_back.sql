-- +goose Up
-- Failure groups (issue 22): the executions whose completed steps were undone (a rollback
-- started on them; rollback_status is never cleared). Few of an organization's executions,
-- so a group's view counts its rolled-back pending items from here, not by reading every
-- pending item of its groups.
CREATE INDEX idx_executions_rolled_back ON workflow_executions(organization_id, id) WHERE rollback_status IS NOT NULL;

-- +goose Down
DROP INDEX idx_executions_rolled_back;
