-- +goose Up
-- A row the reconciler cannot settle (its workflow version is missing, the database refuses
-- the change for good…) is quarantined: kept as it is, left out of later passes, logged and
-- audited once, and listed for admins until one releases it. One row never stops the
-- reconciler for every tenant.
CREATE TABLE quarantined_rows (
    id              UUID PRIMARY KEY,
    organization_id UUID NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
    table_name      VARCHAR(64) NOT NULL,
    row_id          VARCHAR(64) NOT NULL,
    execution_id    UUID,
    reason          TEXT NOT NULL,
    created_at      TIMESTAMPTZ NOT NULL
);
CREATE UNIQUE INDEX idx_quarantined_rows_row ON quarantined_rows(table_name, row_id);
CREATE INDEX idx_quarantined_rows_org ON quarantined_rows(organization_id, created_at);

-- +goose Down
DROP TABLE quarantined_rows;
