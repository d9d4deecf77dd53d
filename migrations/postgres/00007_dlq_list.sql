-- +goose Up
-- The dead-letter and executions lists (issue 8). Every query of a list names the
-- organization and reads rows newest first (created_at DESC, id DESC, the keyset of its
-- pages): each index below starts with the organization and the column a filter compares
-- with "=", and ends in that order, so a page is one short range of one index whatever the
-- table's size.
CREATE INDEX idx_dlq_list ON dead_letter_queue(organization_id, created_at DESC, id DESC);
CREATE INDEX idx_dlq_list_status ON dead_letter_queue(organization_id, status, created_at DESC, id DESC);
CREATE INDEX idx_dlq_list_workflow ON dead_letter_queue(organization_id, workflow_id, created_at DESC, id DESC);
CREATE INDEX idx_dlq_list_type ON dead_letter_queue(organization_id, error_type, created_at DESC, id DESC);
-- The search: "subject ILIKE '%…%' OR reason ILIKE '%…%'" is answered by trigram indexes.
CREATE EXTENSION IF NOT EXISTS pg_trgm;
CREATE INDEX idx_dlq_subject_trgm ON dead_letter_queue USING gin (subject gin_trgm_ops);
CREATE INDEX idx_dlq_reason_trgm ON dead_letter_queue USING gin (reason gin_trgm_ops);
-- Made redundant: (organization_id, created_at DESC) is a prefix of idx_dlq_list, and every
-- query of pending dead letters names the organization (idx_dlq_list_status). The retention
-- job keeps idx_dlq_expires; deleting a workflow checks idx_dlq_workflow.
DROP INDEX idx_dlq_org_created;
DROP INDEX idx_dlq_status;

-- Executions: the same order with its tie-breaker, for the whole list and by status; by
-- workflow (a workflow belongs to one organization).
CREATE INDEX idx_executions_list ON workflow_executions(organization_id, created_at DESC, id DESC);
CREATE INDEX idx_executions_list_status ON workflow_executions(organization_id, status, created_at DESC, id DESC);
CREATE INDEX idx_executions_list_workflow ON workflow_executions(workflow_id, created_at DESC, id DESC);
DROP INDEX idx_executions_org_created;
DROP INDEX idx_executions_status;
DROP INDEX idx_executions_workflow;

-- +goose Down
CREATE INDEX idx_executions_workflow ON workflow_executions(workflow_id, created_at DESC);
CREATE INDEX idx_executions_status ON workflow_executions(organization_id, status);
CREATE INDEX idx_executions_org_created ON workflow_executions(organization_id, created_at DESC);
DROP INDEX idx_executions_list_workflow;
DROP INDEX idx_executions_list_status;
DROP INDEX idx_executions_list;
CREATE INDEX idx_dlq_status ON dead_letter_queue(status) WHERE status = 'pending';
CREATE INDEX idx_dlq_org_created ON dead_letter_queue(organization_id, created_at DESC);
DROP INDEX idx_dlq_reason_trgm;
DROP INDEX idx_dlq_subject_trgm;
DROP INDEX idx_dlq_list_type;
DROP INDEX idx_dlq_list_workflow;
DROP INDEX idx_dlq_list_status;
DROP INDEX idx_dlq_list;
