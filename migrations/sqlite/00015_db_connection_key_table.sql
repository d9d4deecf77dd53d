-- +goose Up
-- The table in the office's own database where a database_operation compensation records its
-- idempotency key (issue 20): the statement and its key commit together in that database, so
-- a compensation run again after a crash finds its key and does not run the statement twice.
-- A table name, optionally schema-qualified; created there on first use where the role may.
ALTER TABLE db_connections ADD COLUMN key_table VARCHAR(127) NOT NULL DEFAULT 'lifeline_compensation_keys';

-- +goose Down
ALTER TABLE db_connections DROP COLUMN key_table;
