-- +goose Up
-- Database connections an admin configures by name (issue 10: the database_operation
-- compensation runs one parameterized statement through one). The DSN is stored sealed
-- (AES-256-GCM, bound to the row: a JSON document whose value is an envelope), never in
-- clear; last_test_error is the last connection test's error with the password masked.
CREATE TABLE db_connections (
    id TEXT PRIMARY KEY,
    organization_id TEXT NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
    name VARCHAR(100) NOT NULL,
    driver VARCHAR(20) NOT NULL DEFAULT 'postgres' CHECK (driver IN ('postgres')),
    dsn TEXT NOT NULL,
    description TEXT NOT NULL DEFAULT '',
    created_by TEXT,
    created_at DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP,
    updated_at DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP,
    last_tested_at DATETIME,
    last_test_error TEXT,
    CONSTRAINT unique_db_connection_name UNIQUE (organization_id, name)
);

-- +goose Down
DROP TABLE db_connections;
