-- +goose Up
-- Ask steps (issue 25): a workflow waits for a person. An execution and the attempt of its
-- ask step are WAITING while the request (interventions, one per attempt) is open; no job
-- exists for them: an answer, the sweep's timeout or a cancel moves them on.
ALTER TABLE workflow_executions DROP CONSTRAINT workflow_executions_status_check;
ALTER TABLE workflow_executions ADD CONSTRAINT workflow_executions_status_check CHECK (status IN (
    'PENDING', 'RUNNING', 'SUCCEEDED', 'FAILED', 'PARTIAL', 'DLQ_PENDING', 'WAITING'));
ALTER TABLE step_executions DROP CONSTRAINT step_executions_status_check;
ALTER TABLE step_executions ADD CONSTRAINT step_executions_status_check CHECK (status IN (
    'PENDING', 'RUNNING', 'SUCCEEDED', 'RETRYING', 'FAILED', 'DLQ', 'SKIPPED', 'WAITING'));

-- A request an ask step's attempt made of people (models.Intervention).
CREATE TABLE interventions (
    id                 UUID PRIMARY KEY,
    organization_id    UUID NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
    execution_id       UUID NOT NULL REFERENCES workflow_executions(id) ON DELETE CASCADE,
    attempt_id         UUID NOT NULL REFERENCES step_executions(id) ON DELETE CASCADE,
    step_id            VARCHAR(100) NOT NULL,
    step_name          TEXT NOT NULL DEFAULT '',
    kind               VARCHAR(20) NOT NULL CHECK (kind IN ('approval', 'input', 'decision', 'error_resolution')),
    title              TEXT NOT NULL,
    message            TEXT NOT NULL DEFAULT '',
    schema             JSONB,
    options            JSONB,
    default_option     VARCHAR(100),
    assignees          TEXT[] NOT NULL DEFAULT '{}',
    holders            TEXT[] NOT NULL DEFAULT '{}',
    escalation         JSONB,
    escalation_level   INTEGER NOT NULL DEFAULT 0,
    escalation_round   INTEGER NOT NULL DEFAULT 0,
    four_eyes          BOOLEAN NOT NULL DEFAULT FALSE,
    barred             TEXT[] NOT NULL DEFAULT '{}',
    status             VARCHAR(20) NOT NULL DEFAULT 'open' CHECK (status IN ('open', 'answered', 'timed_out', 'cancelled')),
    expires_at         TIMESTAMPTZ NOT NULL,
    next_escalation_at TIMESTAMPTZ,
    remind_at          TIMESTAMPTZ,
    answer             JSONB,
    answered_by        UUID,
    answered_by_name   TEXT,
    answered_at        TIMESTAMPTZ,
    idempotency_key    VARCHAR(200),
    created_at         TIMESTAMPTZ NOT NULL DEFAULT NOW(),
    updated_at         TIMESTAMPTZ NOT NULL DEFAULT NOW()
);
CREATE UNIQUE INDEX idx_interventions_attempt ON interventions(attempt_id);
CREATE INDEX idx_interventions_expires ON interventions(expires_at) WHERE status = 'open';
CREATE INDEX idx_interventions_escalation ON interventions(next_escalation_at) WHERE status = 'open' AND next_escalation_at IS NOT NULL;
CREATE INDEX idx_interventions_remind ON interventions(remind_at) WHERE status = 'open' AND remind_at IS NOT NULL;
CREATE INDEX idx_interventions_list ON interventions(organization_id, status, expires_at);
CREATE INDEX idx_interventions_execution ON interventions(execution_id);

-- The single-use links e-mailed to the holders: one per (request, user), the token stored
-- hashed (SHA-256), expiring with the request; used_at is set by the answer that used it.
CREATE TABLE intervention_links (
    id              UUID PRIMARY KEY,
    organization_id UUID NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
    intervention_id UUID NOT NULL REFERENCES interventions(id) ON DELETE CASCADE,
    user_id         UUID NOT NULL,
    token_hash      VARCHAR(64) NOT NULL,
    expires_at      TIMESTAMPTZ NOT NULL,
    used_at         TIMESTAMPTZ,
    created_at      TIMESTAMPTZ NOT NULL DEFAULT NOW()
);
CREATE UNIQUE INDEX idx_intervention_links_token ON intervention_links(token_hash);
CREATE INDEX idx_intervention_links_intervention ON intervention_links(intervention_id, user_id);

-- +goose Down
DROP TABLE intervention_links;
DROP TABLE interventions;
ALTER TABLE step_executions DROP CONSTRAINT step_executions_status_check;
ALTER TABLE step_executions ADD CONSTRAINT step_executions_status_check CHECK (status IN (
    'PENDING', 'RUNNING', 'SUCCEEDED', 'RETRYING', 'FAILED', 'DLQ', 'SKIPPED'));
ALTER TABLE workflow_executions DROP CONSTRAINT workflow_executions_status_check;
ALTER TABLE workflow_executions ADD CONSTRAINT workflow_executions_status_check CHECK (status IN (
    'PENDING', 'RUNNING', 'SUCCEEDED', 'FAILED', 'PARTIAL', 'DLQ_PENDING'));
