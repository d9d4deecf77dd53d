package dbconn_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"lifeline/models"
	"lifeline/models/modeltest"
	"lifeline/services/classify"
	"lifeline/services/dbconn"
)

// ledger is an office database with an accounts table (balance 100 on account 1, never
// below 0), the service that reaches it and an organization with a connection "ledger" to
// it as the database's own role (which may create the key table).
func ledger(t *testing.T, db *models.DB, name string) (*modeltest.Office, *dbconn.Service, string) {
	t.Helper()
	office, s := target(t, db, nil)
	if _, err := office.Conn.Exec(context.Background(), `CREATE TABLE accounts (id INTEGER PRIMARY KEY, balance NUMERIC(12,2) NOT NULL CHECK (balance >= 0));
		INSERT INTO accounts VALUES (1, 100)`); err != nil {
		t.Fatal(err)
	}
	o := org(t, db, name)
	if _, err := s.Create(context.Background(), o, admin, dbconn.Input{Name: "ledger", DSN: office.DSN}); err != nil {
		t.Fatal(err)
	}
	return office, s, o
}

func balance(t *testing.T, office *modeltest.Office) string {
	t.Helper()
	var b string
	if err := office.Conn.QueryRow(context.Background(), "SELECT balance::text FROM accounts WHERE id = 1").Scan(&b); err != nil {
		t.Fatal(err)
	}
	return b
}

// debit is the compensation of the tests: it takes amount off account 1, under key.
func debit(conn, key string, amount any) dbconn.Statement {
	return dbconn.Statement{Connection: conn, SQL: "UPDATE accounts SET balance = balance - $1 WHERE id = 1", Args: []any{amount}, Key: key}
}

// The same key run again (a crash after the first run committed: the engine did not record
// it and runs the compensation again) does not run the statement again: the debit happens
// once, and the second run answers with the first's rows, as a replay. A failed run commits
// nothing, its key included, so the key's next run runs the statement.
func TestDBConnExecOnce(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		ctx := context.Background()
		office, s, o := ledger(t, db, "Biuro Raz")
		key := "compensate:" + models.NewID() + ":book"
		if r, err := s.Exec(ctx, o, debit("ledger", key, 10)); err != nil || r != (dbconn.Result{RowsAffected: 1}) {
			t.Fatalf("first run: %+v %v", r, err)
		}
		if r, err := s.Exec(ctx, o, debit("ledger", key, 10)); err != nil || r != (dbconn.Result{RowsAffected: 1, Replayed: true}) {
			t.Errorf("second run: %+v %v", r, err)
		}
		if b := balance(t, office); b != "90.00" {
			t.Errorf("balance %s after two runs of one key, want 90.00 (debited once)", b)
		}
		// The key table was created on first use, with the key and the rows it affected.
		var rows int64
		var at time.Time
		if err := office.Conn.QueryRow(ctx, "SELECT rows_affected, executed_at FROM lifeline_compensation_keys WHERE key = $1", key).Scan(&rows, &at); err != nil ||
			rows != 1 || time.Since(at) > time.Minute {
			t.Errorf("the key's row: %d %s %v", rows, at, err)
		}
		// Another key runs.
		if r, err := s.Exec(ctx, o, debit("ledger", key+"-2", 10)); err != nil || r.Replayed || balance(t, office) != "80.00" {
			t.Errorf("another key: %+v %v", r, err)
		}

		// A run that fails (the balance would go below 0) commits nothing, not even its key…
		failed := "compensate:" + models.NewID() + ":charge"
		if _, err := s.Exec(ctx, o, debit("ledger", failed, 500)); typeOf(err).Code != "SQLSTATE_23514" {
			t.Fatalf("a debit below 0: %v", err)
		}
		var n int
		if err := office.Conn.QueryRow(ctx, "SELECT count(*) FROM lifeline_compensation_keys WHERE key = $1", failed).Scan(&n); err != nil || n != 0 {
			t.Errorf("a failed run recorded its key: %d %v", n, err)
		}
		// …so its next run, once it can succeed, runs the statement, once.
		if _, err := office.Conn.Exec(ctx, "UPDATE accounts SET balance = 1000 WHERE id = 1"); err != nil {
			t.Fatal(err)
		}
		for i, want := range []dbconn.Result{{RowsAffected: 1}, {RowsAffected: 1, Replayed: true}} {
			if r, err := s.Exec(ctx, o, debit("ledger", failed, 500)); err != nil || r != want {
				t.Errorf("run %d after the failure: %+v %v", i+2, r, err)
			}
		}
		if b := balance(t, office); b != "500.00" {
			t.Errorf("balance %s, want 500.00", b)
		}
		// A statement that affected no rows is replayed as none.
		none := dbconn.Statement{Connection: "ledger", SQL: "DELETE FROM accounts WHERE id = 99", Key: "none:" + models.NewID()}
		for _, want := range []dbconn.Result{{}, {Replayed: true}} {
			if r, err := s.Exec(ctx, o, none); err != nil || r != want {
				t.Errorf("no rows: %+v %v", r, err)
			}
		}

		// A statement that ends the transaction would part the key from its effect: refused.
		if _, err := s.Exec(ctx, o, dbconn.Statement{Connection: "ledger", SQL: "COMMIT", Key: "commit:" + models.NewID()}); typeOf(err).Code != "TRANSACTION" {
			t.Errorf("COMMIT as the statement: %v", err)
		}
		// No key, or one too long: refused before connecting.
		for _, k := range []string{"", strings.Repeat("k", dbconn.MaxKeyLength+1)} {
			if _, err := s.Exec(ctx, o, debit("ledger", k, 1)); typeOf(err).Code != "KEY" || typeOf(err).Type != classify.Validation {
				t.Errorf("key of %d bytes: %v", len(k), err)
			}
		}

		// A key table in a schema of its own: created there, and used.
		if _, err := office.Conn.Exec(ctx, "CREATE SCHEMA lifeline"); err != nil {
			t.Fatal(err)
		}
		c, err := s.Create(ctx, o, admin, dbconn.Input{Name: "schema", DSN: office.DSN, KeyTable: ptr("lifeline.keys")})
		if err != nil || c.KeyTable != "lifeline.keys" {
			t.Fatalf("create with a key table: %+v %v", c, err)
		}
		inSchema := "compensate:" + models.NewID() + ":schema"
		for _, want := range []dbconn.Result{{RowsAffected: 1}, {RowsAffected: 1, Replayed: true}} {
			if r, err := s.Exec(ctx, o, debit("schema", inSchema, 1)); err != nil || r != want {
				t.Errorf("a key table in a schema: %+v %v", r, err)
			}
		}
		if err := office.Conn.QueryRow(ctx, "SELECT count(*) FROM lifeline.keys WHERE key = $1", inSchema).Scan(&n); err != nil || n != 1 || balance(t, office) != "499.00" {
			t.Errorf("lifeline.keys: %d %v", n, err)
		}
		// A schema that does not exist: refused, saying so.
		if _, err := s.Update(ctx, o, c.ID, admin, dbconn.Input{Name: "schema", KeyTable: ptr("nowhere.keys")}); err != nil {
			t.Fatal(err)
		}
		_, err = s.Exec(ctx, o, debit("schema", "compensate:"+models.NewID()+":nowhere", 1))
		if r := typeOf(err); r.Code != "KEY_TABLE" || r.Type != classify.Permanent ||
			r.Message != "the compensations' key table nowhere.keys cannot be created: its schema does not exist (nowhere); create the schema, or name another table in the connection's settings" {
			t.Errorf("a missing schema: %+v", r)
		}
		if b := balance(t, office); b != "499.00" {
			t.Errorf("a refused run changed the balance: %s", b)
		}
	})
}

// Two runs of one key at once: the second waits for the first's transaction on the key
// table's unique index and, when the first commits, runs nothing and answers as a replay;
// when the first dies instead, the second runs the statement. The interleaving is forced by
// locks: the test holds account 1, so the first run waits in its statement (its key
// inserted, uncommitted), and the second is started only once the first is seen waiting,
// and the end of the first is brought about only once the second is seen waiting on the key.
func TestDBConnExecOnceConcurrent(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		ctx := context.Background()
		office, s, o := ledger(t, db, "Biuro Naraz")
		for _, name := range []string{"a", "b"} {
			if _, err := s.Create(ctx, o, admin, dbconn.Input{Name: "run-" + name, DSN: withParam(office.DSN, "application_name=run-"+name)}); err != nil {
				t.Fatal(err)
			}
		}
		type outcome struct {
			r   dbconn.Result
			err error
		}
		start := func(conn, key string) chan outcome {
			ch := make(chan outcome, 1)
			go func() {
				r, err := s.Exec(ctx, o, debit(conn, key, 10))
				ch <- outcome{r, err}
			}()
			return ch
		}
		// waiting waits until the run's session waits on a lock in a statement that begins
		// with prefix, and returns its process id.
		waiting := func(run, prefix string) int {
			t.Helper()
			for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
				var pid int
				err := office.Conn.QueryRow(ctx, `SELECT pid FROM pg_stat_activity WHERE application_name = $1 AND wait_event_type = 'Lock' AND query LIKE $2`,
					run, prefix+"%").Scan(&pid)
				if err == nil {
					return pid
				}
			}
			t.Fatalf("%s never waited in %q", run, prefix)
			return 0
		}
		// The lock is held on a connection of its own: office.Conn reads pg_stat_activity,
		// whose snapshot would not change inside the holder's transaction.
		holder, err := pgx.Connect(ctx, office.DSN)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = holder.Close(context.Background()) })
		hold := func() func() {
			t.Helper()
			tx, err := holder.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := tx.Exec(ctx, "SELECT 1 FROM accounts WHERE id = 1 FOR UPDATE"); err != nil {
				t.Fatal(err)
			}
			return func() {
				if err := tx.Commit(ctx); err != nil {
					t.Fatal(err)
				}
			}
		}

		// Two first uses at once: a key table another session is creating (uncommitted) is
		// not seen, so the run creates it too, waits on the catalog for the other and, when
		// the other commits, uses the other's table.
		tx, err := holder.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(ctx, "CREATE TABLE lifeline_compensation_keys (key TEXT PRIMARY KEY, executed_at TIMESTAMPTZ NOT NULL DEFAULT now(), rows_affected BIGINT)"); err != nil {
			t.Fatal(err)
		}
		first := start("run-a", "compensate:"+models.NewID()+":first")
		waiting("run-a", "CREATE TABLE")
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		if r := <-first; r.err != nil || r.r != (dbconn.Result{RowsAffected: 1}) || balance(t, office) != "90.00" {
			t.Fatalf("a first use while the key table is being created: %+v %v", r.r, r.err)
		}

		// The first commits: the second is a replay of it.
		key := "compensate:" + models.NewID() + ":book"
		release := hold()
		a := start("run-a", key)
		waiting("run-a", "UPDATE accounts")
		b := start("run-b", key)
		waiting("run-b", "INSERT INTO")
		release()
		ra, rb := <-a, <-b
		if ra.err != nil || ra.r != (dbconn.Result{RowsAffected: 1}) || rb.err != nil || rb.r != (dbconn.Result{RowsAffected: 1, Replayed: true}) {
			t.Errorf("first %+v %v, second %+v %v", ra.r, ra.err, rb.r, rb.err)
		}
		if bal := balance(t, office); bal != "80.00" {
			t.Errorf("balance %s after two runs of one key at once, want 80.00", bal)
		}

		// The first dies before it commits: the second, which waited on its key, runs.
		key = "compensate:" + models.NewID() + ":book"
		release = hold()
		a = start("run-a", key)
		pid := waiting("run-a", "UPDATE accounts")
		b = start("run-b", key)
		waiting("run-b", "INSERT INTO")
		var killed bool
		if err := office.Conn.QueryRow(ctx, "SELECT pg_terminate_backend($1)", pid).Scan(&killed); err != nil || !killed {
			t.Fatalf("terminate the first run: %v %v", killed, err)
		}
		ra = <-a
		release()
		rb = <-b
		if typeOf(ra.err).Type != classify.Transient || rb.err != nil || rb.r != (dbconn.Result{RowsAffected: 1}) {
			t.Errorf("first %+v %v (%s), second %+v %v", ra.r, ra.err, typeOf(ra.err).Code, rb.r, rb.err)
		}
		if bal := balance(t, office); bal != "70.00" {
			t.Errorf("balance %s, want 70.00", bal)
		}
	})
}

// A role that may not create the key table is refused before its statement, saying which
// table to create with which columns and what to grant; one that may not use the table
// the owner created, saying what to grant; one whose table lacks what the key needs,
// saying which columns it needs. Nothing runs in any of these cases; once the owner has
// created and granted the table, the role's compensations run, once.
func TestDBConnKeyTableRefused(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		ctx := context.Background()
		office, s, o := ledger(t, db, "Biuro Bez Tabeli")
		role := office.Role + "_nocreate"
		t.Cleanup(func() {
			for _, sql := range []string{"DROP OWNED BY %s CASCADE", "DROP ROLE IF EXISTS %s"} {
				_ = office.AdminExec(fmt.Sprintf(sql, role))
			}
		})
		for _, sql := range []string{"CREATE ROLE %s LOGIN PASSWORD '" + password + "'", "GRANT SELECT, UPDATE ON accounts TO %s"} {
			if err := office.AdminExec(fmt.Sprintf(sql, role)); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := s.Create(ctx, o, admin, dbconn.Input{Name: "clerk", DSN: office.DSNAs(role, password)}); err != nil {
			t.Fatal(err)
		}
		key := "compensate:" + models.NewID() + ":book"
		refused := func(what, want string) {
			t.Helper()
			_, err := s.Exec(ctx, o, debit("clerk", key, 10))
			if r := typeOf(err); r.Code != "KEY_TABLE" || r.Type != classify.Permanent || r.Message != want {
				t.Errorf("%s: %+v\nwant %q", what, r, want)
			}
			if b := balance(t, office); b != "100.00" {
				t.Errorf("%s: the statement ran (balance %s)", what, b)
			}
		}
		refused("no CREATE", fmt.Sprintf(`the compensations' key table lifeline_compensation_keys does not exist and the connection's role "%s" may not create it (no CREATE on schema public): `+
			`CREATE TABLE lifeline_compensation_keys (key TEXT PRIMARY KEY, executed_at TIMESTAMPTZ NOT NULL DEFAULT now(), rows_affected BIGINT); `+
			`GRANT SELECT, INSERT, UPDATE ON lifeline_compensation_keys TO "%s"`, role, role))
		var exists bool
		if err := office.Conn.QueryRow(ctx, "SELECT to_regclass('lifeline_compensation_keys') IS NOT NULL").Scan(&exists); err != nil || exists {
			t.Errorf("the key table was created: %v %v", exists, err)
		}

		// The owner creates it as the message says, but grants nothing yet.
		if _, err := office.Conn.Exec(ctx, "CREATE TABLE lifeline_compensation_keys (key TEXT PRIMARY KEY, executed_at TIMESTAMPTZ NOT NULL DEFAULT now(), rows_affected BIGINT)"); err != nil {
			t.Fatal(err)
		}
		refused("no grant", fmt.Sprintf(`the connection's role "%s" may not use the compensations' key table lifeline_compensation_keys: GRANT SELECT, INSERT, UPDATE ON lifeline_compensation_keys TO "%s"`,
			role, role))
		if _, err := office.Conn.Exec(ctx, fmt.Sprintf("GRANT SELECT, INSERT, UPDATE ON lifeline_compensation_keys TO %s", role)); err != nil {
			t.Fatal(err)
		}
		for _, want := range []dbconn.Result{{RowsAffected: 1}, {RowsAffected: 1, Replayed: true}} {
			if r, err := s.Exec(ctx, o, debit("clerk", key, 10)); err != nil || r != want {
				t.Errorf("granted: %+v %v", r, err)
			}
		}
		if b := balance(t, office); b != "90.00" {
			t.Errorf("balance %s, want 90.00", b)
		}

		// A key table in a schema the role may not use: refused, saying what to grant.
		if _, err := office.Conn.Exec(ctx, "CREATE SCHEMA vault"); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Create(ctx, o, admin, dbconn.Input{Name: "vault", DSN: office.DSNAs(role, password), KeyTable: ptr("vault.keys")}); err != nil {
			t.Fatal(err)
		}
		_, err := s.Exec(ctx, o, debit("vault", "compensate:"+models.NewID()+":vault", 10))
		if r := typeOf(err); r.Code != "KEY_TABLE" || r.Message != fmt.Sprintf(`the connection's role "%s" may not use the schema of the compensations' key table vault.keys: GRANT USAGE ON SCHEMA vault TO "%s"`, role, role) {
			t.Errorf("a schema without USAGE: %+v", r)
		}

		// A table of that name without a unique key: refused, saying what it needs.
		if _, err := office.Conn.Exec(ctx, fmt.Sprintf("CREATE TABLE odd_keys (key TEXT, executed_at TIMESTAMPTZ, rows_affected BIGINT); GRANT ALL ON odd_keys TO %s", role)); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Create(ctx, o, admin, dbconn.Input{Name: "odd", DSN: office.DSNAs(role, password), KeyTable: ptr("odd_keys")}); err != nil {
			t.Fatal(err)
		}
		_, err = s.Exec(ctx, o, debit("odd", "compensate:"+models.NewID()+":odd", 10))
		if r := typeOf(err); r.Code != "KEY_TABLE" || r.Message != "the compensations' key table odd_keys cannot be used (42P10 invalid_column_reference): it needs the columns "+
			"(key TEXT PRIMARY KEY, executed_at TIMESTAMPTZ NOT NULL DEFAULT now(), rows_affected BIGINT)" {
			t.Errorf("a key table without a unique key: %+v", r)
		}
		if b := balance(t, office); b != "90.00" {
			t.Errorf("balance %s, want 90.00", b)
		}
	})
}

func ptr(s string) *string { return &s }

// withParam adds a setting to a DSN URL.
func withParam(dsn, param string) string {
	if strings.Contains(dsn, "?") {
		return dsn + "&" + param
	}
	return dsn + "?" + param
}
