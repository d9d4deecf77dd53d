-- +goose Up
-- The dead-letter and executions lists (issue 8). Every query of a list names the
-- organization and reads rows newest first (created_at DESC, id DESC, the keyset of its
-- pages; SQLite reads these indexes backwards): each index below starts with the
-- organization and the column a filter compares with "=", and ends in that order. The
-- search is a LIKE over the rows the other filters leave (PostgreSQL has trigram indexes).
CREATE INDEX idx_dlq_list ON dead_letter_queue(organization_id, created_at, id);
CREATE INDEX idx_dlq_list_status ON dead_letter_queue(organization_id, status, created_at, id);
CREATE INDEX idx_dlq_list_workflow ON dead_letter_queue(organization_id, workflow_id, created_at, id);
CREATE INDEX idx_dlq_list_type ON dead_letter_queue(organization_id, error_type, created_at, id);
-- Made redundant: (organization_id, created_at) is a prefix of idx_dlq_list, and every
-- query of pending dead letters names the organization (idx_dlq_list_status).
DROP INDEX idx_dlq_org_created;
DROP INDEX idx_dlq_status;

CREATE INDEX idx_executions_list ON workflow_executions(organization_id, created_at, id);
CREATE INDEX idx_executions_list_status ON workflow_executions(organization_id, status, created_at, id);
CREATE INDEX idx_executions_list_workflow ON workflow_executions(workflow_id, created_at, id);
DROP INDEX idx_executions_org_created;
DROP INDEX idx_executions_status;
DROP INDEX idx_executions_workflow;

-- +goose Down
CREATE INDEX idx_executions_workflow ON workflow_executions(workflow_id, created_at);
CREATE INDEX idx_executions_status ON workflow_executions(organization_id, status);
CREATE INDEX idx_executions_org_created ON workflow_executions(organization_id, created_at);
DROP INDEX idx_executions_list_workflow;
DROP INDEX idx_executions_list_status;
DROP INDEX idx_executions_list;
CREATE INDEX idx_dlq_status ON dead_letter_queue(status) WHERE status = 'pending';
CREATE INDEX idx_dlq_org_created ON dead_letter_queue(organization_id, created_at);
DROP INDEX idx_dlq_list_type;
DROP INDEX idx_dlq_list_workflow;
DROP INDEX idx_dlq_list_status;
DROP INDEX idx_dlq_list;
