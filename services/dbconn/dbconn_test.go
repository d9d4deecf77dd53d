package dbconn_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"lifeline/models"
	"lifeline/models/apperr"
	"lifeline/models/modeltest"
	"lifeline/services/audit"
	"lifeline/services/classify"
	"lifeline/services/dbconn"
	"lifeline/services/outbound"
	"lifeline/services/redact"
	"lifeline/services/secrets"
)

// loopback is the allow list of tests: the test PostgreSQL listens on 127.0.0.1, which the
// SSRF rules refuse unless allowed (as LIFELINE_OUTBOUND_ALLOW=127.0.0.0/8 would).
var loopback = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}

const password = "S3cret-pa55word"

var admin = audit.Actor{Type: audit.ActorUser, ID: "0190f3c5-8f5e-7000-8000-000000000001"}

// sealed gives db a sealer with a fresh key ring, as `lifeline serve` does.
func sealed(t *testing.T, db *models.DB) *models.DB {
	t.Helper()
	spec, err := secrets.NewKeySpec("test")
	if err != nil {
		t.Fatal(err)
	}
	ring, err := secrets.ParseRing(spec)
	if err != nil {
		t.Fatal(err)
	}
	db.Sealer = secrets.JSONSealer{Ring: ring, IsSecret: redact.New(nil).Match}
	return db
}

func org(t *testing.T, db *models.DB, name string) string {
	t.Helper()
	o := models.Organization{ID: models.NewID(), Name: name, CreatedAt: time.Now().UTC()}
	if err := db.Conn(context.Background()).Create(&o).Error; err != nil {
		t.Fatal(err)
	}
	return o.ID
}

// target returns an office database (modeltest.Office: a role that is not a superuser, its
// own database, reached through a forwarder) with a clients table, the service that reaches
// it as `lifeline serve` would (loopback allowed, as LIFELINE_DBCONN_ALLOW=127.0.0.0/8
// would, and the test server refused as Lifeline's own database server), and a connection
// to check the table with. The test is skipped without TEST_DATABASE_URL (failed under
// CI=true).
func target(t *testing.T, db *models.DB, now func() time.Time) (*modeltest.Office, *dbconn.Service) {
	t.Helper()
	o := modeltest.OfficeDatabase(t)
	if _, err := o.Conn.Exec(context.Background(), `CREATE TABLE clients (id INTEGER PRIMARY KEY, name TEXT NOT NULL, status TEXT NOT NULL DEFAULT 'active', amount NUMERIC(12,2));
		INSERT INTO clients (id, name, amount) VALUES (1, 'Kowalski', 100), (2, 'Nowak', 200), (3, 'Wiśniewska', 300)`); err != nil {
		t.Fatal(err)
	}
	return o, dbconn.New(sealed(t, db), dbconn.Config{Allow: loopback, Own: []string{o.Server}, Now: now})
}

func typeOf(err error) classify.Result { return classify.Classify(err) }

// statement is a Statement with an idempotency key of its own: each runs as a first run.
func statement(conn, sql string, args []any, timeout time.Duration) dbconn.Statement {
	return dbconn.Statement{Connection: conn, SQL: sql, Args: args, Timeout: timeout, Key: "test:" + models.NewID()}
}

func TestDBConnValidation(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		ctx := context.Background()
		s := dbconn.New(sealed(t, db), dbconn.Config{Allow: loopback})
		o := org(t, db, "Biuro Walidacja")
		good := "postgres://app:" + password + "@db.example.com:5432/ledger?sslmode=require"
		for _, c := range []struct {
			name  string
			in    dbconn.Input
			field string
			msg   string
		}{
			{"no name", dbconn.Input{DSN: good}, "name", "is required"},
			{"bad name", dbconn.Input{Name: "księgi główne", DSN: good}, "name", "must be 1-100 letters, digits, '_' or '-'"},
			{"long name", dbconn.Input{Name: strings.Repeat("a", 101), DSN: good}, "name", "must be 1-100 letters, digits, '_' or '-'"},
			{"driver", dbconn.Input{Name: "ledger", Driver: "mysql", DSN: good}, "driver", "must be one of postgres"},
			{"no dsn", dbconn.Input{Name: "ledger"}, "dsn", "is required"},
			{"long dsn", dbconn.Input{Name: "ledger", DSN: good + "&application_name=" + strings.Repeat("x", 2000)}, "dsn", "must be at most 2000 characters"},
			{"not a dsn", dbconn.Input{Name: "ledger", DSN: "mysql://root@db/ledger"}, "dsn", "must be a PostgreSQL URL"},
			{"broken url", dbconn.Input{Name: "ledger", DSN: "postgres://app@db.example.com:port/ledger"}, "dsn", "must be a PostgreSQL URL"},
			{"reads a file", dbconn.Input{Name: "ledger", DSN: "host=db.example.com user=app passfile=/etc/shadow"}, "dsn", `may not set "passfile"; allowed: host, port,`},
			{"service file", dbconn.Input{Name: "ledger", DSN: good + "&servicefile=/etc/passwd&service=x"}, "dsn", `may not set "service`},
			{"simple protocol", dbconn.Input{Name: "ledger", DSN: good + "&default_query_exec_mode=simple_protocol"}, "dsn", `may not set "default_query_exec_mode"`},
			{"socket", dbconn.Input{Name: "ledger", DSN: "host=/var/run/postgresql user=app dbname=ledger"}, "dsn", "must name the database server's host"},
			{"no host", dbconn.Input{Name: "ledger", DSN: "user=app dbname=ledger"}, "dsn", "must name the database server's host"},
			{"no user", dbconn.Input{Name: "ledger", DSN: "postgres://db.example.com/ledger"}, "dsn", "must name the user"},
			{"description", dbconn.Input{Name: "ledger", DSN: good, Description: strings.Repeat("ż", 501)}, "description", "must be at most 500 characters"},
			{"control", dbconn.Input{Name: "ledger", DSN: good, Description: "a\x00b"}, "description", "must not contain control characters"},
			{"key table capitals", dbconn.Input{Name: "ledger", DSN: good, KeyTable: ptr("Keys")}, "keyTable", "must be a table name of lowercase letters"},
			{"key table quote", dbconn.Input{Name: "ledger", DSN: good, KeyTable: ptr(`keys"; DROP TABLE x; --`)}, "keyTable", "must be a table name"},
			{"key table three parts", dbconn.Input{Name: "ledger", DSN: good, KeyTable: ptr("db.ledger.keys")}, "keyTable", "must be a table name"},
			{"key table digit", dbconn.Input{Name: "ledger", DSN: good, KeyTable: ptr("1keys")}, "keyTable", "must be a table name"},
			{"key table long", dbconn.Input{Name: "ledger", DSN: good, KeyTable: ptr(strings.Repeat("k", 64))}, "keyTable", "must be a table name"},
			{"key table space", dbconn.Input{Name: "ledger", DSN: good, KeyTable: ptr("ledger keys")}, "keyTable", "must be a table name"},
		} {
			_, err := s.Create(ctx, o, admin, c.in)
			var me *apperr.Error
			if !errors.As(err, &me) || me.Code != apperr.EINVALID || !strings.HasPrefix(me.Fields[c.field], c.msg) {
				t.Errorf("%s: %v, want %s: %q", c.name, err, c.field, c.msg)
			} else if strings.Contains(me.Fields[c.field], password) || strings.Contains(me.Message, password) {
				t.Errorf("%s: the message shows the password", c.name)
			}
		}
		for _, dsn := range []string{good, "host=db.example.com port=5433 user=app password='" + password + "' dbname=ledger sslmode=disable",
			"postgresql://app@db1.example.com,db2.example.com/ledger"} {
			c, err := s.Create(ctx, o, admin, dbconn.Input{Name: "ok-" + strings.Repeat("x", len(dsn)%50), DSN: dsn, Description: "Księgi  \n  główne"})
			if err != nil {
				t.Fatalf("%s: %v", dsn, err)
			}
			if strings.Contains(c.MaskedDSN, password) || c.Driver != "postgres" {
				t.Errorf("created %+v", c)
			}
		}
		// A name the organization uses is taken; another organization may use it.
		if _, err := s.Create(ctx, o, admin, dbconn.Input{Name: "ledger", DSN: good}); err != nil {
			t.Fatal(err)
		}
		_, err := s.Create(ctx, o, admin, dbconn.Input{Name: "ledger", DSN: good})
		if me, ok := err.(*apperr.Error); !ok || me.Fields["name"] != models.DBConnectionNameTaken {
			t.Errorf("duplicate name: %v", err)
		}
		if _, err := s.Create(ctx, org(t, db, "Inne biuro"), admin, dbconn.Input{Name: "ledger", DSN: good}); err != nil {
			t.Errorf("the same name in another organization: %v", err)
		}
	})
}

func TestDBConnMaskDSN(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ in, want string }{
		{"postgres://user:" + password + "@host:5432/db", "postgres://user:•••@host:5432/db"},
		{"postgresql://user@host/db?password=" + password + "&sslmode=require", "postgresql://user@host/db?password=•••&sslmode=require"},
		{"postgres://user@host/db", "postgres://user@host/db"},
		{"host=h user=u password=" + password + " dbname=d", "host=h user=u password=••• dbname=d"},
		{"host=h user=u password = 'it\\'s " + password + "' dbname=d", "host=h user=u password = ••• dbname=d"},
		{"password=" + password + " host=h user=u", "password=••• host=h user=u"},
		{"postgres://user:p%40ss" + password + "@host/db", "postgres://user:•••@host/db"},
	} {
		if got := dbconn.MaskDSN(c.in); got != c.want {
			t.Errorf("MaskDSN(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestDBConnSealedAtRest(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		ctx := context.Background()
		s := dbconn.New(sealed(t, db), dbconn.Config{Allow: loopback})
		o := org(t, db, "Biuro Sejf")
		dsn := "postgres://ledger_app:" + password + "@db.example.com:5432/ledger"
		a, err := s.Create(ctx, o, admin, dbconn.Input{Name: "ledger", DSN: dsn})
		if err != nil {
			t.Fatal(err)
		}
		b, err := s.Create(ctx, o, admin, dbconn.Input{Name: "payroll", DSN: "host=db.example.com user=x password=other-" + password})
		if err != nil {
			t.Fatal(err)
		}
		var raw []struct{ ID, DSN string }
		if err := db.Conn(ctx).Raw("SELECT CAST(id AS TEXT) AS id, dsn FROM db_connections ORDER BY name").Scan(&raw).Error; err != nil {
			t.Fatal(err)
		}
		for _, r := range raw {
			if strings.Contains(r.DSN, password) || strings.Contains(r.DSN, "ledger_app") || !strings.Contains(r.DSN, `"enc:v1:test:`) {
				t.Errorf("stored dsn %s", r.DSN)
			}
		}
		if a.MaskedDSN != "postgres://ledger_app:•••@db.example.com:5432/ledger" {
			t.Errorf("masked %q", a.MaskedDSN)
		}
		// The queries open it for the service, bound to its row: another row's envelope does not open.
		got, err := db.GetDBConnection(ctx, o, a.ID)
		if err != nil || got.DSN != dsn {
			t.Fatalf("opened %v %v", got, err)
		}
		if err := db.Conn(ctx).Exec("UPDATE db_connections SET dsn = ? WHERE id = ?", raw[1].DSN, a.ID).Error; err != nil {
			t.Fatal(err)
		}
		if _, err := db.GetDBConnection(ctx, o, a.ID); err == nil || !strings.Contains(err.Error(), "decrypt db_connections:"+a.ID+":dsn") {
			t.Errorf("a swapped envelope opened: %v", err)
		}
		if _, err := s.Update(ctx, o, a.ID, admin, dbconn.Input{Name: "ledger", DSN: dsn}); err == nil {
			t.Errorf("update read a swapped envelope")
		}
		// Update with no DSN keeps it (and re-seals it under the row).
		if _, err := s.Update(ctx, o, b.ID, admin, dbconn.Input{Name: "payroll-2", Description: "Płace"}); err != nil {
			t.Fatal(err)
		}
		if got, err := db.GetDBConnection(ctx, o, b.ID); err != nil || got.DSN != "host=db.example.com user=x password=other-"+password || got.Name != "payroll-2" {
			t.Errorf("kept dsn: %+v %v", got, err)
		}
		// Audit entries have the DSN masked.
		var details []string
		if err := db.Conn(ctx).Raw("SELECT CAST(details AS TEXT) FROM audit_log WHERE organization_id = ? AND action LIKE 'connection.%'", o).Scan(&details).Error; err != nil {
			t.Fatal(err)
		}
		if len(details) != 3 {
			t.Errorf("audit entries %v", details)
		}
		for _, d := range details {
			if strings.Contains(d, password) {
				t.Errorf("audit shows the password: %s", d)
			}
		}
		// A key ring whose secret keys do not cover "password" refuses to store the DSN in clear.
		db.Sealer = secrets.JSONSealer{Ring: db.Sealer.(secrets.JSONSealer).Ring, IsSecret: redact.New([]string{"iban"}).Match}
		if _, err := s.Create(ctx, o, admin, dbconn.Input{Name: "clear", DSN: dsn}); !errors.Is(err, models.ErrDSNNotSealed) {
			t.Errorf("stored without sealing: %v", err)
		}
	})
}

func TestDBConnCRUD(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		ctx := context.Background()
		now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
		s := dbconn.New(sealed(t, db), dbconn.Config{Allow: loopback, Now: func() time.Time { return now }})
		o, other := org(t, db, "Biuro A"), org(t, db, "Biuro B")
		z, err := s.Create(ctx, o, admin, dbconn.Input{Name: "zeta", DSN: "postgres://u:p@h/db", Description: "Ostatnia"})
		if err != nil {
			t.Fatal(err)
		}
		a, err := s.Create(ctx, o, audit.System, dbconn.Input{Name: "alfa", DSN: "postgres://u@h/db"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Create(ctx, other, admin, dbconn.Input{Name: "obce", DSN: "postgres://u@h/db"}); err != nil {
			t.Fatal(err)
		}
		list, err := s.List(ctx, o)
		if err != nil || len(list) != 2 || list[0].ID != a.ID || list[1].ID != z.ID {
			t.Fatalf("list %+v %v", list, err)
		}
		if z.CreatedBy != admin.ID || a.CreatedBy != "" || !z.CreatedAt.Equal(now) || z.LastTestedAt != nil {
			t.Errorf("created %+v", z)
		}
		for _, id := range []string{z.ID, "not-a-uuid", models.NewID()} {
			if _, err := s.Get(ctx, other, id); apperr.ErrorCode(err) != apperr.ENOTFOUND {
				t.Errorf("get %s from another organization: %v", id, err)
			}
			if _, err := s.Update(ctx, other, id, admin, dbconn.Input{Name: "x"}); apperr.ErrorCode(err) != apperr.ENOTFOUND {
				t.Errorf("update %s from another organization: %v", id, err)
			}
			if err := s.Delete(ctx, other, id, admin); apperr.ErrorCode(err) != apperr.ENOTFOUND {
				t.Errorf("delete %s from another organization: %v", id, err)
			}
			if _, err := s.Test(ctx, other, id); apperr.ErrorCode(err) != apperr.ENOTFOUND {
				t.Errorf("test %s from another organization: %v", id, err)
			}
		}
		if _, err := s.Exec(ctx, other, statement("zeta", "SELECT 1", nil, 0)); apperr.ErrorCode(err) != apperr.ENOTFOUND || err.Error() != "not_found: database connection not found" {
			t.Errorf("exec by another organization's name: %v", err)
		}
		now = now.Add(time.Hour)
		if _, err := s.Update(ctx, o, z.ID, admin, dbconn.Input{Name: "alfa", DSN: ""}); apperr.ErrorCode(err) != apperr.EINVALID {
			t.Errorf("rename onto another's name: %v", err)
		}
		u, err := s.Update(ctx, o, z.ID, admin, dbconn.Input{Name: "omega", DSN: "postgres://u:q@h2/db", Description: "Nowa", KeyTable: ptr(" ledger.keys ")})
		if err != nil || u.Name != "omega" || u.MaskedDSN != "postgres://u:•••@h2/db" || !u.UpdatedAt.Equal(now) || !u.CreatedAt.Equal(now.Add(-time.Hour)) ||
			u.KeyTable != "ledger.keys" {
			t.Fatalf("updated %+v %v", u, err)
		}
		// No key table keeps the stored one; an empty one is the default.
		now = now.Add(time.Minute)
		if u, err := s.Update(ctx, o, z.ID, admin, dbconn.Input{Name: "omega", Description: "Nowa"}); err != nil || u.KeyTable != "ledger.keys" {
			t.Errorf("update without a key table: %+v %v", u, err)
		}
		now = now.Add(time.Minute)
		if u, err := s.Update(ctx, o, a.ID, admin, dbconn.Input{Name: "alfa", KeyTable: ptr("")}); err != nil || u.KeyTable != dbconn.DefaultKeyTable {
			t.Errorf("update with an empty key table: %+v %v", u, err)
		}
		now = now.Add(time.Hour)
		if err := s.Delete(ctx, o, a.ID, admin); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Get(ctx, o, a.ID); apperr.ErrorCode(err) != apperr.ENOTFOUND {
			t.Errorf("deleted: %v", err)
		}
		var entries []models.AuditEntry
		if err := db.Conn(ctx).Where("organization_id = ? AND entity_type = ?", o, "db_connection").Order("created_at, action").Find(&entries).Error; err != nil {
			t.Fatal(err)
		}
		var actions []string
		for _, e := range entries {
			actions = append(actions, e.Action)
		}
		if strings.Join(actions, ",") != "connection.created,connection.created,connection.updated,connection.updated,connection.updated,connection.deleted" {
			t.Errorf("audit %v", actions)
		}
		var d map[string]any
		_ = json.Unmarshal(entries[0].Details, &d)
		if d["keyTable"] != dbconn.DefaultKeyTable {
			t.Errorf("create details %v", d)
		}
		_ = json.Unmarshal(entries[2].Details, &d)
		ch, _ := d["changed"].(map[string]any)
		if kt, _ := ch["keyTable"].(map[string]any); ch["name"] == nil || ch["dsn"] == nil || ch["description"] == nil || ch["driver"] != nil ||
			kt["from"] != dbconn.DefaultKeyTable || kt["to"] != "ledger.keys" {
			t.Errorf("update details %v", d)
		}
		d = nil
		_ = json.Unmarshal(entries[3].Details, &d)
		if ch, _ := d["changed"].(map[string]any); len(ch) != 0 {
			t.Errorf("an update that changed nothing: %v", d)
		}
	})
}

func TestDBConnSSRF(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		ctx := context.Background()
		db = sealed(t, db)
		o := org(t, db, "Biuro SSRF")
		strict := dbconn.New(db, dbconn.Config{})
		// Everything allowed that can be: metadata and link-local addresses stay refused.
		open := dbconn.New(db, dbconn.Config{Allow: []netip.Prefix{netip.MustParsePrefix("0.0.0.0/0"), netip.MustParsePrefix("::/0")}})
		for i, c := range []struct {
			s   *dbconn.Service
			dsn string
		}{
			{strict, "postgres://postgres:" + password + "@127.0.0.1:5432/postgres?sslmode=disable"},
			{strict, "host=10.0.0.5 user=app password=" + password},
			{open, "postgres://postgres:" + password + "@169.254.169.254:5432/postgres"},
			{open, "postgres://postgres@[fd00:ec2::254]:5432/postgres"},
			{open, "postgres://postgres@[::ffff:169.254.169.254]:5432/postgres"},
			{open, "postgres://postgres@100.100.100.200/postgres"},
		} {
			name := fmt.Sprintf("target-%d", i)
			conn, err := c.s.Create(ctx, o, admin, dbconn.Input{Name: name, DSN: c.dsn})
			if err != nil {
				t.Fatalf("%s: %v %v", c.dsn, err, err.(*apperr.Error).Fields)
			}
			start := time.Now()
			tested, err := c.s.Test(ctx, o, conn.ID)
			var de *dbconn.Error
			if !errors.As(err, &de) || de.Code != "DESTINATION_DENIED" || de.Type != classify.Permanent || !errors.Is(err, outbound.ErrDenied) {
				t.Errorf("%s: test %v", c.dsn, err)
			}
			if tested == nil || tested.LastTestedAt == nil || !strings.Contains(tested.LastTestError, "LIFELINE_DBCONN_ALLOW") || strings.Contains(tested.LastTestError, password) {
				t.Errorf("%s: recorded %+v", c.dsn, tested)
			}
			_, err = c.s.Exec(ctx, o, statement(name, "DELETE FROM clients WHERE id = $1", []any{1}, time.Second))
			if r := typeOf(err); r.Code != "DESTINATION_DENIED" || r.Type != classify.Permanent {
				t.Errorf("%s: exec %v", c.dsn, r)
			}
			// Refused before connecting: no connect timeout was waited for.
			if d := time.Since(start); d > 2*time.Second {
				t.Errorf("%s: refusal took %s", c.dsn, d)
			}
		}
	})
}

func TestDBConnExec(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		ctx := context.Background()
		office, s := target(t, db, nil)
		dsn, check := office.DSN, office.Conn
		o := org(t, db, "Biuro Kompensacje")
		c, err := s.Create(ctx, o, admin, dbconn.Input{Name: "ledger", DSN: dsn})
		if err != nil {
			t.Fatal(err)
		}
		tested, err := s.Test(ctx, o, c.ID)
		if err != nil || tested.LastTestError != "" || tested.LastTestedAt == nil {
			t.Fatalf("test: %+v %v", tested, err)
		}
		if got, _ := s.Get(ctx, o, c.ID); got.LastTestedAt == nil || got.LastTestError != "" {
			t.Errorf("test not recorded: %+v", got)
		}
		status := func(id int) (name, status string) {
			t.Helper()
			if err := check.QueryRow(ctx, "SELECT name, status FROM clients WHERE id = $1", id).Scan(&name, &status); err != nil {
				t.Fatal(err)
			}
			return name, status
		}
		exec := func(stmt string, args []any, timeout time.Duration) (int64, error) {
			res, err := s.Exec(ctx, o, statement("ledger", stmt, args, timeout))
			return res.RowsAffected, err
		}

		// Values from a step's output (decoded JSON: strings, numbers, json.Number) are bound.
		n, err := exec("UPDATE clients SET status = $1 WHERE id = $2 OR id = $3", []any{"reversed", float64(1), json.Number("2")}, 0)
		if err != nil || n != 2 {
			t.Fatalf("update: %d %v", n, err)
		}
		if _, st := status(2); st != "reversed" {
			t.Errorf("status %q", st)
		}
		if n, err := exec("UPDATE clients SET amount = $1 WHERE id = $2", []any{"123.45", "3"}, 0); err != nil || n != 1 {
			t.Errorf("numbers as text: %d %v", n, err)
		}
		if n, err := exec("DELETE FROM clients WHERE id = 99", nil, 0); err != nil || n != 0 {
			t.Errorf("no rows: %d %v", n, err)
		}

		// Injection attempts in values are stored as text and change nothing else.
		for _, evil := range []string{"'; DROP TABLE clients; --", "x' OR '1'='1", `"; DELETE FROM clients; --`, "$1; DROP TABLE clients"} {
			n, err := exec("UPDATE clients SET name = $1 WHERE id = $2", []any{evil, 1}, 0)
			if err != nil || n != 1 {
				t.Fatalf("update with %q: %d %v", evil, n, err)
			}
			if name, _ := status(1); name != evil {
				t.Errorf("stored %q, want %q", name, evil)
			}
		}
		if _, err := exec("UPDATE clients SET status = 'x' WHERE id = $1", []any{"1 OR 1=1"}, 0); typeOf(err).Type != classify.Validation {
			t.Errorf("a value that is not an integer: %v", err)
		}
		// Two statements in one string are refused, with values or without; nothing runs.
		for _, c := range []struct {
			stmt string
			args []any
		}{
			{"UPDATE clients SET status = 'gone' WHERE id = 3; DROP TABLE clients", nil},
			{"UPDATE clients SET status = $1 WHERE id = 3; DROP TABLE clients", []any{"gone"}},
			{"SELECT 1; SELECT 2;", nil},
		} {
			_, err := exec(c.stmt, c.args, 0)
			if r := typeOf(err); r.Type != classify.Validation || r.Code != "SQLSTATE_42601" {
				t.Errorf("%q: %v %v", c.stmt, r, err)
			}
		}
		var clients int
		if err := check.QueryRow(ctx, "SELECT count(*) FROM clients WHERE status <> 'gone'").Scan(&clients); err != nil || clients != 3 {
			t.Errorf("clients after the refused statements: %d %v", clients, err)
		}
		// A statement that ends with a semicolon is still one statement.
		if n, err := exec("UPDATE clients SET status = $1 WHERE id = 3;", []any{"closed"}, 0); err != nil || n != 1 {
			t.Errorf("trailing semicolon: %d %v", n, err)
		}

		// The statement timeout ends a long statement: a timeout error.
		start := time.Now()
		_, err = exec("SELECT pg_sleep(5)", nil, time.Second)
		if r := typeOf(err); r.Type != classify.Timeout || r.Code != "SQLSTATE_57014" || time.Since(start) > 4*time.Second {
			t.Errorf("timeout: %v after %s", r, time.Since(start))
		}
		// The timeout holds for the statement's transaction only.
		if n, err := exec("UPDATE clients SET status = $1 WHERE id = $2 AND pg_sleep(1.5) IS NOT NULL", []any{"slow", 1}, 0); err != nil || n != 1 {
			t.Errorf("a statement under the default timeout: %d %v", n, err)
		}

		// Other failures, classified.
		for _, c := range []struct {
			stmt string
			args []any
			typ  classify.Type
			code string
		}{
			{"", nil, classify.Validation, "EMPTY_STATEMENT"},
			{" ;\n", nil, classify.Validation, "EMPTY_STATEMENT"},
			{"UPDATE clients SET nope = $1", []any{1}, classify.Validation, "SQLSTATE_42703"},
			{"UPDATE nowhere SET x = 1", nil, classify.Validation, "SQLSTATE_42P01"},
			{"UPDTE clients", nil, classify.Validation, "SQLSTATE_42601"},
			{"INSERT INTO clients (id, name) VALUES ($1, $2)", []any{1, "dup"}, classify.Validation, "SQLSTATE_23505"},
			{"UPDATE clients SET amount = $1", []any{"abc"}, classify.Validation, "SQLSTATE_22P02"},
			{"UPDATE clients SET status = $1 WHERE id = $2", []any{"x"}, classify.Validation, "PARAMETERS"},
			{"UPDATE clients SET status = $1", []any{map[string]any{"a": make(chan int)}}, classify.Validation, "ARGUMENTS"},
			{"SELECT 1/0", nil, classify.Validation, "SQLSTATE_22012"},
		} {
			_, err := exec(c.stmt, c.args, 0)
			if r := typeOf(err); r.Type != c.typ || r.Code != c.code {
				t.Errorf("%q: %+v, want %s %s", c.stmt, r, c.typ, c.code)
			}
		}
		if _, st := status(2); st != "reversed" {
			t.Errorf("a failed statement changed a row: %q", st)
		}

		// A connection that fails: its SQLSTATE and condition name (not the server's text,
		// which names the database), recorded.
		bad, err := s.Create(ctx, o, admin, dbconn.Input{Name: "missing-db", DSN: strings.Replace(dsn, "/"+office.Database, "/nope_x", 1)})
		if err != nil {
			t.Fatal(err)
		}
		tested, err = s.Test(ctx, o, bad.ID)
		if r := typeOf(err); r.Type != classify.Permanent || r.Code != "SQLSTATE_3D000" || r.Message != "3D000 invalid_catalog_name" {
			t.Errorf("test of a missing database: %+v", r)
		}
		if tested == nil || tested.LastTestError != err.Error() {
			t.Errorf("recorded %+v", tested)
		}
		if _, err := s.Exec(ctx, o, statement("missing-db", "SELECT 1", nil, 0)); typeOf(err).Code != "SQLSTATE_3D000" {
			t.Errorf("exec on a missing database: %v", err)
		}
		// A server that is not there: transient.
		down, err := s.Create(ctx, o, admin, dbconn.Input{Name: "down", DSN: "postgres://postgres:" + password + "@127.0.0.1:1/postgres?sslmode=disable"})
		if err != nil {
			t.Fatal(err)
		}
		_, err = s.Exec(ctx, o, statement(down.Name, "SELECT 1", nil, 0))
		if r := typeOf(err); r.Type != classify.Transient || r.Code != "CONNECT" || r.Message != "the database server 127.0.0.1:1 refused the connection" {
			t.Errorf("exec on a closed port: %+v", r)
		}
		// An update of the DSN forgets the last test.
		u, err := s.Update(ctx, o, c.ID, admin, dbconn.Input{Name: "ledger", DSN: dsn + "&application_name=lifeline-test"})
		if err != nil || u.LastTestedAt != nil {
			t.Errorf("updated dsn keeps its test: %+v %v", u, err)
		}
	})
}
