-- +goose Up
-- Credentials an admin keeps for the organization by name (issue 21: the token a service
-- checks, replaced once for every execution): steps read them as {{ credentials.<name> }}.
-- The value is stored sealed (AES-256-GCM, bound to the row: a JSON document whose value
-- is an envelope), never in clear; last4 is what the page shows of it.
CREATE TABLE credentials (
    id UUID PRIMARY KEY,
    organization_id UUID NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
    name VARCHAR(64) NOT NULL,
    secret TEXT NOT NULL,
    last4 VARCHAR(16) NOT NULL DEFAULT '',
    updated_by UUID,
    created_at TIMESTAMPTZ NOT NULL DEFAULT NOW(),
    updated_at TIMESTAMPTZ NOT NULL DEFAULT NOW(),
    CONSTRAINT unique_credential_name UNIQUE (organization_id, name)
);
ALTER TABLE credentials ENABLE ROW LEVEL SECURITY;

-- +goose Down
DROP TABLE credentials;
