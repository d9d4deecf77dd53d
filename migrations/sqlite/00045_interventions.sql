-- +goose Up
-- Ask steps (issue 25): a workflow waits for a person. An execution and the attempt of its
-- ask step are WAITING while the request (interventions, one per attempt) is open; no job
-- exists for them: an answer, the sweep's timeout or a cancel moves them on.
--
-- The status CHECKs of 00001 admit WAITING. SQLite cannot alter a CHECK: the tables' stored
-- definitions are edited (a less restrictive CHECK is one of the changes SQLite documents as
-- safe this way: no row can violate it), the connection's schema reloaded (RESET), and the
-- CREATE TABLEs below change the schema cookie, which makes every other connection reload it.
PRAGMA writable_schema = ON;
UPDATE sqlite_master SET sql = replace(sql, '''PARTIAL'', ''DLQ_PENDING''', '''PARTIAL'', ''DLQ_PENDING'', ''WAITING''')
 WHERE type = 'table' AND name = 'workflow_executions';
UPDATE sqlite_master SET sql = replace(sql, '''DLQ'', ''SKIPPED''', '''DLQ'', ''SKIPPED'', ''WAITING''')
 WHERE type = 'table' AND name = 'step_executions';
PRAGMA writable_schema = RESET;

-- A request an ask step's attempt made of people (models.Intervention).
CREATE TABLE interventions (
    id                 TEXT PRIMARY KEY,
    organization_id    TEXT NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
    execution_id       TEXT NOT NULL REFERENCES workflow_executions(id) ON DELETE CASCADE,
    attempt_id         TEXT NOT NULL REFERENCES step_executions(id) ON DELETE CASCADE,
    step_id            VARCHAR(100) NOT NULL,
    step_name          TEXT NOT NULL DEFAULT '',
    kind               VARCHAR(20) NOT NULL CHECK (kind IN ('approval', 'input', 'decision', 'error_resolution')),
    title              TEXT NOT NULL,
    message            TEXT NOT NULL DEFAULT '',
    schema             TEXT,
    options            TEXT,
    default_option     VARCHAR(100),
    assignees          TEXT NOT NULL DEFAULT '[]',
    holders            TEXT NOT NULL DEFAULT '[]',
    escalation         TEXT,
    escalation_level   INTEGER NOT NULL DEFAULT 0,
    escalation_round   INTEGER NOT NULL DEFAULT 0,
    four_eyes          BOOLEAN NOT NULL DEFAULT FALSE,
    barred             TEXT NOT NULL DEFAULT '[]',
    status             VARCHAR(20) NOT NULL DEFAULT 'open' CHECK (status IN ('open', 'answered', 'timed_out', 'cancelled')),
    expires_at         DATETIME NOT NULL,
    next_escalation_at DATETIME,
    remind_at          DATETIME,
    answer             TEXT,
    answered_by        TEXT,
    answered_by_name   TEXT,
    answered_at        DATETIME,
    idempotency_key    VARCHAR(200),
    created_at         DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP,
    updated_at         DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP
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
    id              TEXT PRIMARY KEY,
    organization_id TEXT NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
    intervention_id TEXT NOT NULL REFERENCES interventions(id) ON DELETE CASCADE,
    user_id         TEXT NOT NULL,
    token_hash      VARCHAR(64) NOT NULL,
    expires_at      DATETIME NOT NULL,
    used_at         DATETIME,
    created_at      DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP
);
CREATE UNIQUE INDEX idx_intervention_links_token ON intervention_links(token_hash);
CREATE INDEX idx_intervention_links_intervention ON intervention_links(intervention_id, user_id);

-- +goose Down
DROP TABLE intervention_links;
DROP TABLE interventions;
PRAGMA writable_schema = ON;
UPDATE sqlite_master SET sql = replace(sql, ', ''WAITING''', '') WHERE type = 'table' AND name IN ('workflow_executions', 'step_executions');
PRAGMA writable_schema = RESET;
