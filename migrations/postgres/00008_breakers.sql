-- +goose Up
-- Circuit breakers (issue 9). The table of 00001 was never written; it is made again so that
-- a breaker can be keyed by a step of a workflow or by a target host (scope_key: "step:<workflow>:<step>"
-- or "host:<host>"), with its half-open trials in flight and an admin's forced opening.
DROP TABLE circuit_breaker_state;
CREATE TABLE circuit_breaker_state (
    id UUID PRIMARY KEY,
    organization_id UUID NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
    scope_key VARCHAR(400) NOT NULL,
    workflow_id UUID REFERENCES workflows(id) ON DELETE CASCADE,
    step_id VARCHAR(100),
    host VARCHAR(255),
    state VARCHAR(20) NOT NULL DEFAULT 'closed' CHECK (state IN ('closed', 'open', 'half_open')),
    failure_count INTEGER NOT NULL DEFAULT 0,
    success_count INTEGER NOT NULL DEFAULT 0,
    last_failure_at TIMESTAMPTZ,
    last_success_at TIMESTAMPTZ,
    failure_threshold INTEGER NOT NULL DEFAULT 5,
    reset_timeout_ms INTEGER NOT NULL DEFAULT 60000,
    half_open_requests INTEGER NOT NULL DEFAULT 3,
    trials INTEGER NOT NULL DEFAULT 0,
    forced BOOLEAN NOT NULL DEFAULT FALSE,
    reason TEXT,
    opened_at TIMESTAMPTZ,
    half_opened_at TIMESTAMPTZ,
    created_at TIMESTAMPTZ NOT NULL DEFAULT NOW(),
    updated_at TIMESTAMPTZ NOT NULL DEFAULT NOW(),
    CONSTRAINT unique_circuit_scope UNIQUE (organization_id, scope_key)
);
CREATE INDEX idx_circuit_workflow ON circuit_breaker_state(workflow_id);
ALTER TABLE circuit_breaker_state ENABLE ROW LEVEL SECURITY;

-- Counted failures, one row each (insert-only: no row is a lock hot spot); the window is
-- counted from them. Old rows are deleted by the retention job.
CREATE TABLE circuit_breaker_failures (
    id UUID PRIMARY KEY,
    breaker_id UUID NOT NULL REFERENCES circuit_breaker_state(id) ON DELETE CASCADE,
    at TIMESTAMPTZ NOT NULL
);
CREATE INDEX idx_circuit_failures ON circuit_breaker_failures(breaker_id, at);

-- An attempt waiting on an open breaker names it (released at a controlled rate when it closes).
ALTER TABLE step_executions ADD COLUMN waiting_breaker_id UUID;
CREATE INDEX idx_steps_waiting_breaker ON step_executions(waiting_breaker_id) WHERE waiting_breaker_id IS NOT NULL;

-- +goose Down
DROP INDEX idx_steps_waiting_breaker;
ALTER TABLE step_executions DROP COLUMN waiting_breaker_id;
DROP TABLE circuit_breaker_failures;
DROP TABLE circuit_breaker_state;
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
CREATE INDEX idx_circuit_workflow ON circuit_breaker_state(workflow_id);
ALTER TABLE circuit_breaker_state ENABLE ROW LEVEL SECURITY;
