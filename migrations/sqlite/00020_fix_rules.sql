-- +goose Up
-- Who may fix what (issue 21). organizations.accountants_may_fix: accountants may edit an
-- item's input, skip its failed step and close it (on by default; admins turn it off).
-- input_change_requests: an accountant's edited input on a workflow that moves money
-- (settings.movesMoney) waits here for an admin's approval; the input is sealed like an
-- execution's, input_before / input_after are masked copies for the diff. status moves
-- pending → approved | rejected | cancelled by guarded compare-and-set only (the engine's
-- transitions); one pending request per dead letter.
ALTER TABLE organizations ADD COLUMN accountants_may_fix BOOLEAN NOT NULL DEFAULT TRUE;

CREATE TABLE input_change_requests (
    id              TEXT PRIMARY KEY,
    organization_id TEXT NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
    dead_letter_id  TEXT NOT NULL REFERENCES dead_letter_queue(id) ON DELETE CASCADE,
    execution_id    TEXT NOT NULL,
    mode            VARCHAR(20) NOT NULL,
    input           TEXT NOT NULL,
    input_before    TEXT NOT NULL,
    input_after     TEXT NOT NULL,
    notes           TEXT,
    status          VARCHAR(20) NOT NULL,
    requested_by    TEXT,
    requested_name  TEXT NOT NULL DEFAULT '',
    decided_by      TEXT,
    decided_name    TEXT NOT NULL DEFAULT '',
    decision_notes  TEXT,
    decided_at      DATETIME,
    created_at      DATETIME NOT NULL,
    updated_at      DATETIME NOT NULL
);
CREATE INDEX idx_input_change_requests_dl ON input_change_requests(organization_id, dead_letter_id, created_at);
CREATE UNIQUE INDEX idx_input_change_requests_pending ON input_change_requests(dead_letter_id) WHERE status = 'pending';

-- +goose Down
DROP TABLE input_change_requests;
ALTER TABLE organizations DROP COLUMN accountants_may_fix;
