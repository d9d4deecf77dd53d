-- +goose Up
-- A poison input value an admin quarantined (issue 22): while it is held (released_at NULL),
-- an execution whose input carries it goes straight to the DLQ without running a step. One
-- value is held at most once at a time per organization; released rows stay as history.
CREATE TABLE held_values (
    id              UUID PRIMARY KEY,
    organization_id UUID NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
    kind            VARCHAR(16) NOT NULL,
    value           VARCHAR(64) NOT NULL,
    note            TEXT NOT NULL,
    held_by         VARCHAR(320) NOT NULL,
    held_at         TIMESTAMPTZ NOT NULL,
    released_at     TIMESTAMPTZ,
    released_by     VARCHAR(320)
);
CREATE UNIQUE INDEX idx_held_values_held ON held_values(organization_id, kind, value) WHERE released_at IS NULL;
CREATE INDEX idx_held_values_org ON held_values(organization_id, held_at);

-- +goose Down
DROP TABLE held_values;
