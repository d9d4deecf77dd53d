package dbconn

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"lifeline/services/classify"
)

// A statement runs at most once per key: Exec records the key in the connection's key table,
// in the target database, in the statement's own transaction, before the statement:
//
//	INSERT INTO <key table> (key, executed_at) VALUES ($1, now()) ON CONFLICT (key) DO NOTHING
//
// A key that is there already was committed with its statement by an earlier run: the
// statement is not run again, and Exec answers with the rows that run affected (Replayed).
// Two runs of one key at once: the second's INSERT waits on the unique index for the first's
// transaction; when that commits, the second finds the conflict (and, under READ COMMITTED,
// reads the committed row in its next statement); when it rolls back, the second inserts the
// key and runs the statement itself. Under REPEATABLE READ or SERIALIZABLE (a database whose
// default is one) the second fails with 40001 instead, which is transient: its retry finds
// the key.

// DefaultKeyTable is the key table of a connection that names none.
const DefaultKeyTable = "lifeline_compensation_keys"

// MaxKeyLength is the longest idempotency key, in bytes.
const MaxKeyLength = 255

// keyTableColumns are the key table's columns, as its CREATE TABLE gives them.
const keyTableColumns = "(key TEXT PRIMARY KEY, executed_at TIMESTAMPTZ NOT NULL DEFAULT now(), rows_affected BIGINT)"

// Field message of a key table name (English; views/i18n/locales/formats translates it).
const msgKeyTable = "must be a table name of lowercase letters, digits and '_' (at most 63, not starting with a digit), optionally after a schema name and a dot (ledger.lifeline_compensation_keys)"

// keyTableName is a table name PostgreSQL folds to itself unquoted: lowercase letters,
// digits and '_', not starting with a digit, at most 63 bytes (NAMEDATALEN − 1); optionally
// schema-qualified the same way.
var keyTableName = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,62}(?:\.[a-z_][a-z0-9_]{0,62})?$`)

// keyTable is a connection's key table: Schema is "" for the role's search path.
type keyTable struct{ Schema, Name string }

// parseKeyTable parses a key table's name ("" is DefaultKeyTable); false when it is not one.
func parseKeyTable(s string) (keyTable, bool) {
	if s == "" {
		s = DefaultKeyTable
	}
	if !keyTableName.MatchString(s) {
		return keyTable{}, false
	}
	if schema, name, ok := strings.Cut(s, "."); ok {
		return keyTable{Schema: schema, Name: name}, true
	}
	return keyTable{Name: s}, true
}

// String is the name as the admin gave it ("schema.table" or "table").
func (k keyTable) String() string {
	if k.Schema == "" {
		return k.Name
	}
	return k.Schema + "." + k.Name
}

// ident is the name quoted for SQL (a reserved word stays a name).
func (k keyTable) ident() string {
	if k.Schema == "" {
		return pgx.Identifier{k.Name}.Sanitize()
	}
	return pgx.Identifier{k.Schema, k.Name}.Sanitize()
}

// keyTableQuery reads, in one query, whether the key table exists (as the role's search
// path finds it, or in its schema) and the role may read, insert and update it, and whether
// the schema it would be created in (its own, or the first of the search path) exists and
// the role may create tables there.
const keyTableQuery = `SELECT t.oid IS NOT NULL,
  COALESCE(pg_catalog.has_table_privilege(t.oid, 'SELECT') AND pg_catalog.has_table_privilege(t.oid, 'INSERT')
    AND pg_catalog.has_table_privilege(t.oid, 'UPDATE'), false),
  n.oid IS NOT NULL,
  COALESCE(pg_catalog.has_schema_privilege(n.oid, 'CREATE'), false),
  COALESCE(n.nspname::text, $2::text, '')
FROM (SELECT pg_catalog.to_regclass($1) AS oid) t
LEFT JOIN pg_catalog.pg_namespace n ON n.nspname = COALESCE($2::text, pg_catalog.current_schema())`

// ensureKeyTable makes sure the role can record keys in k: it creates the table (CREATE
// TABLE IF NOT EXISTS, committed on its own) when it does not exist and the role may;
// otherwise a KEY_TABLE error (permanent) that says what to create or grant, before anything
// else runs. A failure of the queries themselves is returned as it is, for classified.
func ensureKeyTable(ctx context.Context, conn *pgx.Conn, k keyTable, user string) error {
	var schema *string
	if k.Schema != "" {
		schema = &k.Schema
	}
	var exists, usable, schemaExists, mayCreate bool
	var where string
	role := pgx.Identifier{user}.Sanitize()
	err := conn.QueryRow(ctx, keyTableQuery, k.ident(), schema).Scan(&exists, &usable, &schemaExists, &mayCreate, &where)
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "42501" {
		// to_regclass looks into the key table's schema, which the role may not.
		return keyTableError(fmt.Sprintf("the connection's role %s may not use the schema of the compensations' key table %s: GRANT USAGE ON SCHEMA %s TO %s",
			role, k, k.Schema, role))
	}
	if err != nil {
		return err
	}
	switch {
	case exists && usable:
		return nil
	case exists:
		return keyTableError(fmt.Sprintf("the connection's role %s may not use the compensations' key table %s: GRANT SELECT, INSERT, UPDATE ON %s TO %s",
			role, k, k, role))
	case !schemaExists:
		return keyTableError(fmt.Sprintf("the compensations' key table %s cannot be created: its schema does not exist (%s); create the schema, or name another table in the connection's settings",
			k, orText(where, "no schema of the search path")))
	case !mayCreate:
		return keyTableError(fmt.Sprintf("the compensations' key table %s does not exist and the connection's role %s may not create it (no CREATE on schema %s): CREATE TABLE %s %s; GRANT SELECT, INSERT, UPDATE ON %s TO %s",
			k, role, where, k, keyTableColumns, k, role))
	}
	_, err = conn.Exec(ctx, "CREATE TABLE IF NOT EXISTS "+k.ident()+" "+keyTableColumns)
	// Two first runs at once: the loser's CREATE can fail on the catalog's unique index
	// instead of finding the table; the winner's table is there.
	if errors.As(err, &pe) && (pe.Code == "23505" || pe.Code == "42P07") {
		return nil
	}
	return err
}

// unusableKeyTable turns an error of writing the key table that is about the table (class
// 42: a missing column, no unique index on key for ON CONFLICT, a privilege, a table dropped
// meanwhile) into a KEY_TABLE error that says what the table needs; other errors are
// returned as they are.
func unusableKeyTable(err error, k keyTable) error {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || !strings.HasPrefix(pe.Code, "42") {
		return err
	}
	code := "INVALID"
	if validSQLSTATE(pe.Code) {
		code = pe.Code
	}
	e := keyTableError(fmt.Sprintf("the compensations' key table %s cannot be used (%s): it needs the columns %s",
		k, sqlstateText(pe.Code), keyTableColumns))
	e.Err = &pgconn.PgError{Severity: sqlstateSeverity(pe.Severity), Code: code}
	return e
}

func keyTableError(msg string) *Error {
	return &Error{Type: classify.Permanent, Code: "KEY_TABLE", Message: msg}
}

func orText(s, fallback string) string {
	if s == "" {
		return fallback
	}
	return s
}

// claimKey records key in k within tx: true when this run inserted it (the statement is to
// run), false when a committed run has it (after waiting for a run of the key in flight).
func claimKey(ctx context.Context, tx pgx.Tx, k keyTable, key string) (bool, error) {
	tag, err := tx.Exec(ctx, "INSERT INTO "+k.ident()+" (key, executed_at) VALUES ($1, now()) ON CONFLICT (key) DO NOTHING", key)
	if err != nil {
		return false, unusableKeyTable(err, k)
	}
	return tag.RowsAffected() == 1, nil
}

// recordedRows is the rows_affected a committed run of key recorded (0 when none was
// recorded, or the row was deleted since).
func recordedRows(ctx context.Context, tx pgx.Tx, k keyTable, key string) (int64, error) {
	var n *int64
	err := tx.QueryRow(ctx, "SELECT rows_affected FROM "+k.ident()+" WHERE key = $1", key).Scan(&n)
	if errors.Is(err, pgx.ErrNoRows) || (err == nil && n == nil) {
		return 0, nil
	}
	if err != nil {
		return 0, unusableKeyTable(err, k)
	}
	return *n, nil
}

// recordRows stores the rows the statement of key affected, in its transaction.
func recordRows(ctx context.Context, tx pgx.Tx, k keyTable, key string, n int64) error {
	_, err := tx.Exec(ctx, "UPDATE "+k.ident()+" SET rows_affected = $2 WHERE key = $1", key, n)
	return unusableKeyTable(err, k)
}
