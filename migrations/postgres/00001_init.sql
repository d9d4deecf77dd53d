-- +goose Up
-- Tenancy and access.
CREATE TABLE organizations (
    id UUID PRIMARY KEY,
    name VARCHAR(200) NOT NULL,
    created_at TIMESTAMPTZ NOT NULL DEFAULT NOW()
);

CREATE TABLE users (
    id UUID PRIMARY KEY,
    email VARCHAR(320) NOT NULL UNIQUE,
    name VARCHAR(200) NOT NULL DEFAULT '',
    password_hash TEXT NOT NULL,
    created_at TIMESTAMPTZ NOT NULL DEFAULT NOW()
);

CREATE TABLE memberships (
    id UUID PRIMARY KEY,
    organization_id UUID NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
    user_id UUID NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    role VARCHAR(20) NOT NULL CHECK (role IN ('owner', 'admin', 'accountant', 'viewer')),
    created_at TIMESTAMPTZ NOT NULL DEFAULT NOW(),
    CONSTRAINT unique_membership UNIQUE (organization_id, user_id)
);
CREATE INDEX idx_memberships_user ON memberships(user_id);

CREATE TABLE api_tokens (
    id UUID PRIMARY KEY,
    organization_id UUID NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
    name VARCHAR(200) NOT NULL DEFAULT '',
    role VARCHAR(20) NOT NULL CHECK (role IN ('owner', 'admin', 'accountant', 'viewer')),
    token_hash VARCHAR(64) NOT NULL UNIQUE,
    created_at TIMESTAMPTZ NOT NULL DEFAULT NOW(),
    last_used_at TIMESTAMPTZ
);
CREATE INDEX idx_api_tokens_org ON api_tokens(organization_id);

CREATE TABLE sessions (
    token VARCHAR(100) PRIMARY KEY,
    data BYTEA NOT NULL,
    expiry TIMESTAMPTZ NOT NULL
);
CREATE INDEX idx_sessions_expiry ON sessions(expiry);

-- Workflows and their versioned definitions.
CREATE TABLE workflows (
    id UUID PRIMARY KEY,
    organization_id UUID NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
    name VARCHAR(200) NOT NULL,
    description TEXT NOT NULL DEFAULT '',
    version INTEGER NOT NULL DEFAULT 1,
    definition JSONB NOT NULL,
    unknown_errors VARCHAR(20) NOT NULL DEFAULT 'retry' CHECK (unknown_errors IN ('retry', 'no_retry')),
    webhook_token VARCHAR(64) NOT NULL UNIQUE,
    webhook_secret VARCHAR(128) NOT NULL,
    created_at TIMESTAMPTZ NOT NULL DEFAULT NOW(),
    updated_at TIMESTAMPTZ NOT NULL DEFAULT NOW()
);
CREATE INDEX idx_workflows_org ON workflows(organization_id, name);

CREATE TABLE workflow_versions (
    id UUID PRIMARY KEY,
    organization_id UUID NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
    workflow_id UUID NOT NULL REFERENCES workflows(id) ON DELETE CASCADE,
    version INTEGER NOT NULL,
    definition JSONB NOT NULL,
    created_at TIMESTAMPTZ NOT NULL DEFAULT NOW(),
    CONSTRAINT unique_workflow_version UNIQUE (workflow_id, version)
);

CREATE TABLE workflow_executions (
    id UUID PRIMARY KEY,
    organization_id UUID NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
    workflow_id UUID NOT NULL REFERENCES workflows(id) ON DELETE CASCADE,
    workflow_version INTEGER NOT NULL,
    status VARCHAR(20) NOT NULL DEFAULT 'PENDING' CHECK (status IN (
        'PENDING', 'RUNNING', 'SUCCEEDED', 'FAILED', 'PARTIAL', 'DLQ_PENDING'
    )),
    input JSONB NOT NULL DEFAULT '{}',
    trigger_type VARCHAR(20) NOT NULL DEFAULT 'ui' CHECK (trigger_type IN ('ui', 'api', 'webhook', 'demo', 'retry')),
    correlation_id VARCHAR(64) NOT NULL,
    current_step_id VARCHAR(100),
    created_by UUID,
    started_at TIMESTAMPTZ,
    finished_at TIMESTAMPTZ,
    created_at TIMESTAMPTZ NOT NULL DEFAULT NOW(),
    updated_at TIMESTAMPTZ NOT NULL DEFAULT NOW()
);
CREATE INDEX idx_executions_org_created ON workflow_executions(organization_id, created_at DESC);
CREATE INDEX idx_executions_workflow ON workflow_executions(workflow_id, created_at DESC);
CREATE INDEX idx_executions_status ON workflow_executions(organization_id, status);

-- One row per attempt of a step.
CREATE TABLE step_executions (
    id UUID PRIMARY KEY,
    organization_id UUID NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
    execution_id UUID NOT NULL REFERENCES workflow_executions(id) ON DELETE CASCADE,
    step_id VARCHAR(100) NOT NULL,
    step_index INTEGER NOT NULL,
    attempt INTEGER NOT NULL,
    status VARCHAR(20) NOT NULL DEFAULT 'PENDING' CHECK (status IN (
        'PENDING', 'RUNNING', 'SUCCEEDED', 'RETRYING', 'FAILED', 'DLQ', 'SKIPPED'
    )),
    generation INTEGER NOT NULL DEFAULT 1,
    idempotency_key VARCHAR(300) NOT NULL,
    input JSONB,
    output JSONB,
    error_type VARCHAR(50) CHECK (error_type IS NULL OR error_type IN (
        'transient', 'permanent', 'timeout', 'validation',
        'authorization', 'rate_limit', 'external_service', 'internal', 'unknown'
    )),
    error_code VARCHAR(50),
    error_message TEXT,
    stack_trace TEXT,
    scheduled_at TIMESTAMPTZ NOT NULL,
    started_at TIMESTAMPTZ,
    finished_at TIMESTAMPTZ,
    lease_expires_at TIMESTAMPTZ,
    next_retry_at TIMESTAMPTZ,
    created_at TIMESTAMPTZ NOT NULL DEFAULT NOW(),
    updated_at TIMESTAMPTZ NOT NULL DEFAULT NOW(),
    CONSTRAINT unique_step_attempt UNIQUE (execution_id, step_id, attempt)
);
CREATE INDEX idx_steps_execution ON step_executions(execution_id, step_index, attempt);
CREATE INDEX idx_steps_due ON step_executions(scheduled_at) WHERE status = 'PENDING';
CREATE INDEX idx_steps_lease ON step_executions(lease_expires_at) WHERE status = 'RUNNING';

-- Idempotency keys of POST /api/v1/workflows/{id}/executions, kept at least 24 h.
CREATE TABLE api_idempotency_keys (
    organization_id UUID NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
    workflow_id UUID NOT NULL REFERENCES workflows(id) ON DELETE CASCADE,
    idem_key VARCHAR(255) NOT NULL,
    request_hash VARCHAR(64) NOT NULL,
    execution_id UUID NOT NULL REFERENCES workflow_executions(id) ON DELETE CASCADE,
    created_at TIMESTAMPTZ NOT NULL DEFAULT NOW(),
    expires_at TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (organization_id, workflow_id, idem_key)
);
CREATE INDEX idx_idempotency_expires ON api_idempotency_keys(expires_at);

-- WFA-004 tables (seed 000), each with organization_id.
CREATE TABLE workflow_execution_errors (
    id UUID PRIMARY KEY,
    organization_id UUID NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
    execution_id UUID NOT NULL REFERENCES workflow_executions(id) ON DELETE CASCADE,
    step_id VARCHAR(100) NOT NULL,
    error_type VARCHAR(50) NOT NULL CHECK (error_type IN (
        'transient', 'permanent', 'timeout', 'validation',
        'authorization', 'rate_limit', 'external_service', 'internal', 'unknown'
    )),
    error_code VARCHAR(50),
    error_message TEXT NOT NULL,
    stack_trace TEXT,
    input_data JSONB,
    output_data JSONB,
    step_state JSONB,
    retry_count INTEGER NOT NULL DEFAULT 0,
    max_retries INTEGER NOT NULL DEFAULT 3,
    next_retry_at TIMESTAMPTZ,
    last_retry_at TIMESTAMPTZ,
    status VARCHAR(20) NOT NULL DEFAULT 'pending' CHECK (status IN (
        'pending', 'retrying', 'resolved', 'escalated', 'dead_letter'
    )),
    resolution_type VARCHAR(20),
    resolution_notes TEXT,
    resolved_by UUID REFERENCES users(id),
    resolved_at TIMESTAMPTZ,
    created_at TIMESTAMPTZ NOT NULL DEFAULT NOW(),
    updated_at TIMESTAMPTZ NOT NULL DEFAULT NOW()
);

CREATE TABLE dead_letter_queue (
    id UUID PRIMARY KEY,
    organization_id UUID NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
    error_id UUID NOT NULL REFERENCES workflow_execution_errors(id),
    workflow_id UUID NOT NULL REFERENCES workflows(id),
    execution_id UUID NOT NULL REFERENCES workflow_executions(id),
    original_input JSONB NOT NULL,
    step_states JSONB NOT NULL,
    failed_step_id VARCHAR(100) NOT NULL,
    status VARCHAR(20) NOT NULL DEFAULT 'pending' CHECK (status IN (
        'pending', 'processing', 'resolved', 'skipped', 'expired'
    )),
    manual_retry_count INTEGER DEFAULT 0,
    last_manual_retry_at TIMESTAMPTZ,
    expires_at TIMESTAMPTZ NOT NULL DEFAULT NOW() + INTERVAL '30 days',
    created_at TIMESTAMPTZ NOT NULL DEFAULT NOW(),
    updated_at TIMESTAMPTZ NOT NULL DEFAULT NOW()
);

CREATE TABLE circuit_breaker_state (
    id UUID PRIMARY KEY,
    organization_id UUID NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
    workflow_id UUID NOT NULL REFERENCES workflows(id),
    step_id VARCHAR(100) NOT NULL,
    state VARCHAR(20) NOT NULL DEFAULT 'closed' CHECK (state IN ('closed', 'open', 'half_open')),
    failure_count INTEGER NOT NULL DEFAULT 0,
    success_count INTEGER NOT NULL DEFAULT 0,
    last_failure_at TIMESTAMPTZ,
    last_success_at TIMESTAMPTZ,
    failure_threshold INTEGER NOT NULL DEFAULT 5,
    reset_timeout_ms INTEGER NOT NULL DEFAULT 60000,
    half_open_requests INTEGER NOT NULL DEFAULT 3,
    opened_at TIMESTAMPTZ,
    half_opened_at TIMESTAMPTZ,
    created_at TIMESTAMPTZ NOT NULL DEFAULT NOW(),
    updated_at TIMESTAMPTZ NOT NULL DEFAULT NOW(),
    CONSTRAINT unique_circuit_per_step UNIQUE (workflow_id, step_id)
);

CREATE TABLE compensation_actions (
    id UUID PRIMARY KEY,
    organization_id UUID NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
    workflow_id UUID NOT NULL REFERENCES workflows(id),
    step_id VARCHAR(100) NOT NULL,
    compensation_type VARCHAR(50) NOT NULL CHECK (compensation_type IN (
        'api_call', 'database_operation', 'notification', 'manual', 'none'
    )),
    compensation_config JSONB NOT NULL DEFAULT '{}',
    execution_id UUID REFERENCES workflow_executions(id),
    status VARCHAR(20) DEFAULT 'pending',
    executed_at TIMESTAMPTZ,
    result JSONB,
    created_at TIMESTAMPTZ NOT NULL DEFAULT NOW()
);

CREATE TABLE retry_policies (
    id UUID PRIMARY KEY,
    organization_id UUID NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
    workflow_id UUID REFERENCES workflows(id) ON DELETE CASCADE, -- NULL for the organization's default policy
    step_id VARCHAR(100), -- NULL applies to all steps
    max_retries INTEGER NOT NULL DEFAULT 3,
    initial_delay_ms INTEGER NOT NULL DEFAULT 5000,
    max_delay_ms INTEGER NOT NULL DEFAULT 300000,
    backoff_multiplier DECIMAL(3,1) NOT NULL DEFAULT 2.0,
    retry_on_errors TEXT[] DEFAULT '{transient, timeout, rate_limit}',
    no_retry_on_errors TEXT[] DEFAULT '{permanent, validation, authorization}',
    -- Lifeline additions: the fields as written (merged field by field at resolution).
    spec JSONB NOT NULL DEFAULT '{}',
    created_at TIMESTAMPTZ NOT NULL DEFAULT NOW(),
    CONSTRAINT unique_policy_per_step UNIQUE (workflow_id, step_id)
);
-- UNIQUE treats NULLs as distinct: keep one default per organization and one workflow-level row per workflow.
CREATE UNIQUE INDEX unique_policy_org_default ON retry_policies(organization_id) WHERE workflow_id IS NULL;
CREATE UNIQUE INDEX unique_policy_workflow_level ON retry_policies(workflow_id) WHERE step_id IS NULL AND workflow_id IS NOT NULL;

CREATE INDEX idx_errors_execution ON workflow_execution_errors(execution_id);
CREATE INDEX idx_errors_status ON workflow_execution_errors(status) WHERE status = 'pending';
CREATE INDEX idx_errors_retry ON workflow_execution_errors(next_retry_at) WHERE status = 'retrying';
CREATE INDEX idx_dlq_workflow ON dead_letter_queue(workflow_id);
CREATE INDEX idx_dlq_status ON dead_letter_queue(status) WHERE status = 'pending';
CREATE INDEX idx_dlq_expires ON dead_letter_queue(expires_at);
CREATE INDEX idx_dlq_org_created ON dead_letter_queue(organization_id, created_at DESC);
CREATE INDEX idx_circuit_workflow ON circuit_breaker_state(workflow_id);

-- Row-level security as in the specification. The application connects as the table owner and
-- scopes every query by organization_id itself; these policies guard other roles.
ALTER TABLE workflow_execution_errors ENABLE ROW LEVEL SECURITY;
ALTER TABLE dead_letter_queue ENABLE ROW LEVEL SECURITY;
ALTER TABLE circuit_breaker_state ENABLE ROW LEVEL SECURITY;
ALTER TABLE compensation_actions ENABLE ROW LEVEL SECURITY;
ALTER TABLE retry_policies ENABLE ROW LEVEL SECURITY;

CREATE TABLE audit_log (
    id UUID PRIMARY KEY,
    organization_id UUID NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
    actor_type VARCHAR(20) NOT NULL CHECK (actor_type IN ('system', 'user', 'api_token')),
    actor_id UUID,
    action VARCHAR(50) NOT NULL,
    entity_type VARCHAR(50) NOT NULL,
    entity_id VARCHAR(100) NOT NULL,
    details JSONB NOT NULL DEFAULT '{}',
    created_at TIMESTAMPTZ NOT NULL DEFAULT NOW()
);
CREATE INDEX idx_audit_org_created ON audit_log(organization_id, created_at DESC);
CREATE INDEX idx_audit_entity ON audit_log(entity_type, entity_id);

-- +goose Down
DROP TABLE audit_log;
DROP TABLE retry_policies;
DROP TABLE compensation_actions;
DROP TABLE circuit_breaker_state;
DROP TABLE dead_letter_queue;
DROP TABLE workflow_execution_errors;
DROP TABLE api_idempotency_keys;
DROP TABLE step_executions;
DROP TABLE workflow_executions;
DROP TABLE workflow_versions;
DROP TABLE workflows;
DROP TABLE sessions;
DROP TABLE api_tokens;
DROP TABLE memberships;
DROP TABLE users;
DROP TABLE organizations;
