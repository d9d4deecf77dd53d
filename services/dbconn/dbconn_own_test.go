package dbconn_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"lifeline/models"
	"lifeline/models/apperr"
	"lifeline/models/modeltest"
	"lifeline/services/classify"
	"lifeline/services/dbconn"
)

// everywhere allows every address that can be allowed: only Lifeline's own servers (and
// link-local and metadata addresses) stay refused.
var everywhere = []netip.Prefix{netip.MustParsePrefix("0.0.0.0/0"), netip.MustParsePrefix("::/0")}

// lanAddr is an address of one of this machine's interfaces that is not loopback, if any.
func lanAddr() (netip.Addr, bool) {
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if p, err := netip.ParsePrefix(a.String()); err == nil && !p.Addr().IsLoopback() && !p.Addr().IsLinkLocalUnicast() {
			return p.Addr(), true
		}
	}
	return netip.Addr{}, false
}

// insert stores a connection past Create's validation, as one saved before the rules
// changed (or with a name that resolved elsewhere when it was saved).
func insert(t *testing.T, db *models.DB, orgID, name, dsn string) string {
	t.Helper()
	now := time.Now().UTC()
	c := models.DBConnection{ID: models.NewID(), OrganizationID: orgID, Name: name, Driver: dbconn.Driver, DSN: dsn, CreatedAt: now, UpdatedAt: now}
	if err := db.CreateDBConnection(db.Conn(context.Background()), &c); err != nil {
		t.Fatal(err)
	}
	return c.ID
}

// A connection to Lifeline's own database server (the test server, by any of this machine's
// addresses) or to its own listen address is refused when saved and again when dialled, with
// every address inside the allow list; the office database behind a forwarder is not.
func TestDBConnOwnServer(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		ctx := context.Background()
		office := modeltest.OfficeDatabase(t)
		web := httptest.NewServer(nil) // stands for Lifeline's own listen address
		defer web.Close()
		_, webPort, _ := net.SplitHostPort(web.Listener.Addr().String())
		_, pgPort, _ := net.SplitHostPort(office.Server)
		s := dbconn.New(sealed(t, db), dbconn.Config{Allow: everywhere, Own: []string{office.Server, ":" + webPort}})
		o := org(t, db, "Biuro Własny Serwer")
		hosts := []string{"localhost", "127.0.0.1", "127.0.0.2", "[::1]", "0.0.0.0", "[::ffff:127.0.0.1]"}
		if a, ok := lanAddr(); ok {
			host := a.String()
			if a.Is6() {
				host = "[" + host + "]"
			}
			hosts = append(hosts, host)
		}
		var dsns []string
		for _, h := range hosts {
			dsns = append(dsns, fmt.Sprintf("postgres://%s:%s@%s:%s/%s?sslmode=disable", office.Role, password, h, pgPort, office.Database))
		}
		dsns = append(dsns, fmt.Sprintf("host=localhost port=%s user=%s password=%s dbname=%s", pgPort, office.Role, password, office.Database),
			// One of several hosts is enough.
			fmt.Sprintf("postgres://%s@db.invalid:5432,127.0.0.3:%s/%s", office.Role, pgPort, office.Database),
			fmt.Sprintf("postgres://%s@127.0.0.1:%s/x", office.Role, webPort), fmt.Sprintf("postgres://%s@localhost:%s/x", office.Role, webPort))
		for i, dsn := range dsns {
			_, err := s.Create(ctx, o, admin, dbconn.Input{Name: fmt.Sprintf("own-%d", i), DSN: dsn})
			var me *apperr.Error
			if !errors.As(err, &me) || me.Code != apperr.EINVALID || me.Fields["dsn"] != "must not reach Lifeline's own database server or web server" {
				t.Errorf("save %s: %v", dsn, err)
			}
			// Stored past the check: refused when dialled, before connecting, by its code
			// (not the operating system's refusal of an address nothing listens on).
			id := insert(t, db, o, fmt.Sprintf("own-%d", i), dsn)
			tested, err := s.Test(ctx, o, id)
			if r := typeOf(err); r.Code != "OWN_SERVER" || r.Type != classify.Permanent || !errors.Is(err, dbconn.ErrOwnServer) ||
				!strings.Contains(r.Message, "Lifeline's own database server or web server") {
				t.Errorf("test %s: %+v", dsn, r)
			}
			if tested == nil || tested.LastTestError == "" {
				t.Errorf("test %s not recorded: %+v", dsn, tested)
			}
			_, err = s.Exec(ctx, o, statement(fmt.Sprintf("own-%d", i), "SELECT 1", nil, 0))
			if r := typeOf(err); r.Code != "OWN_SERVER" || r.Type != classify.Permanent {
				t.Errorf("exec %s: %+v", dsn, r)
			}
		}
		// An update to the own server is refused too, and keeps the stored DSN.
		c, err := s.Create(ctx, o, admin, dbconn.Input{Name: "office", DSN: office.DSN})
		if err != nil {
			t.Fatal(err)
		}
		_, err = s.Update(ctx, o, c.ID, admin, dbconn.Input{Name: "office", DSN: dsns[0]})
		if me, ok := err.(*apperr.Error); !ok || me.Fields["dsn"] == "" {
			t.Errorf("update to the own server: %v", err)
		}
		// The office database, the same server behind another port: allowed.
		if tested, err := s.Test(ctx, o, c.ID); err != nil || tested.LastTestError != "" {
			t.Errorf("office: %+v %v", tested, err)
		}
		if n, err := s.Exec(ctx, o, statement("office", "SELECT 1", nil, 0)); err != nil || n.RowsAffected != 1 {
			t.Errorf("office exec: %+v %v", n, err)
		}
	})
}

// An own server whose name never resolved leaves nothing to check against: every dial is
// refused until it does.
func TestDBConnOwnServerUnknown(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		ctx := context.Background()
		office := modeltest.OfficeDatabase(t)
		s := dbconn.New(sealed(t, db), dbconn.Config{Allow: loopback, Own: []string{"lifeline-db.invalid:5432"}})
		o := org(t, db, "Biuro Nieznany")
		if _, err := s.Create(ctx, o, admin, dbconn.Input{Name: "office", DSN: office.DSN}); err != nil {
			t.Fatal(err)
		}
		_, err := s.Exec(ctx, o, statement("office", "SELECT 1", nil, 0))
		if r := typeOf(err); r.Code != "OWN_SERVER_UNKNOWN" || r.Type != classify.Transient {
			t.Errorf("exec: %+v", r)
		}
	})
}

// A privileged role is refused when the connection is tested and when a compensation uses
// it, before its statement runs, with the reason; the office's own role is not.
func TestDBConnPrivilegedRole(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		ctx := context.Background()
		office, s := target(t, db, nil)
		o := org(t, db, "Biuro Uprawnienia")
		role := func(suffix, attrs string, grants ...string) string {
			name := office.Role + "_" + suffix
			t.Cleanup(func() {
				for _, sql := range []string{"REVOKE SELECT ON pg_catalog.pg_authid FROM %s", "DROP OWNED BY %s CASCADE", "DROP ROLE IF EXISTS %s"} {
					_ = office.AdminExec(fmt.Sprintf(sql, name))
				}
			})
			// The rights the statement needs, and the one under test.
			for _, sql := range append([]string{"CREATE ROLE %s LOGIN PASSWORD '" + password + "' " + attrs, "GRANT ALL ON clients TO %s"}, grants...) {
				if err := office.AdminExec(fmt.Sprintf(sql, name)); err != nil {
					t.Fatalf("%s: %v", sql, err)
				}
			}
			return name
		}
		for _, c := range []struct {
			name, user, why string
		}{
			{"superuser", office.Superuser(), "is a superuser"},
			{"member of a superuser", role("member", "NOINHERIT", "GRANT "+office.Superuser()+" TO %s"), "is a member of a superuser role"},
			{"reads pg_authid", role("authid", "", "GRANT SELECT ON pg_catalog.pg_authid TO %s"), "can read pg_authid"},
			{"bypasses RLS", role("bypass", "BYPASSRLS"), "bypasses row-level security (BYPASSRLS)"},
			{"reads all data", role("reader", "", "GRANT pg_read_all_data TO %s"), "is a member of pg_read_all_data"},
			{"writes all data", role("writer", "", "GRANT pg_write_all_data TO %s"), "is a member of pg_write_all_data"},
			{"runs programs", role("program", "", "GRANT pg_execute_server_program TO %s"), "is a member of pg_execute_server_program"},
			{"creates roles", role("creator", "CREATEROLE"), "can create roles (CREATEROLE)"},
		} {
			conn, err := s.Create(ctx, o, admin, dbconn.Input{Name: strings.ReplaceAll(c.name, " ", "-"), DSN: office.DSNAs(c.user, password)})
			if err != nil {
				t.Fatal(err)
			}
			want := fmt.Sprintf("the connection's role %q %s; use a role with only the rights the compensation needs", c.user, c.why)
			tested, err := s.Test(ctx, o, conn.ID)
			if r := typeOf(err); r.Code != "PRIVILEGED_ROLE" || r.Type != classify.Permanent || r.Message != want || tested.LastTestError != want {
				t.Errorf("%s: test %+v", c.name, r)
			}
			_, err = s.Exec(ctx, o, statement(conn.Name, "UPDATE clients SET status = $1 WHERE id = 1", []any{c.name}, 0))
			if r := typeOf(err); r.Code != "PRIVILEGED_ROLE" || r.Message != want {
				t.Errorf("%s: exec %+v", c.name, r)
			}
		}
		var status string
		if err := office.Conn.QueryRow(ctx, "SELECT status FROM clients WHERE id = 1").Scan(&status); err != nil || status != "active" {
			t.Errorf("a refused connection ran its statement: %q %v", status, err)
		}
		// A role with rights on the table and on the compensations' key table (which it may
		// not create), and nothing more: allowed.
		if _, err := office.Conn.Exec(ctx, "CREATE TABLE lifeline_compensation_keys (key TEXT PRIMARY KEY, executed_at TIMESTAMPTZ NOT NULL, rows_affected BIGINT)"); err != nil {
			t.Fatal(err)
		}
		plain := role("plain", "", "GRANT SELECT, INSERT, UPDATE ON lifeline_compensation_keys TO %s")
		c, err := s.Create(ctx, o, admin, dbconn.Input{Name: "plain", DSN: office.DSNAs(plain, password)})
		if err != nil {
			t.Fatal(err)
		}
		if tested, err := s.Test(ctx, o, c.ID); err != nil || tested.LastTestError != "" {
			t.Errorf("plain role: %+v %v", tested, err)
		}
		if n, err := s.Exec(ctx, o, statement("plain", "UPDATE clients SET status = $1 WHERE id = 1", []any{"plain"}, 0)); err != nil || n.RowsAffected != 1 {
			t.Errorf("plain role exec: %+v %v", n, err)
		}
	})
}

// The database's error text is no channel: a statement that makes the server quote a row in
// its error stores and shows only the SQLSTATE and its name, and no failure names an address
// a host name resolved to.
func TestDBConnErrorsCarryNoData(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		ctx := context.Background()
		office, s := target(t, db, nil)
		if _, err := office.Conn.Exec(ctx, `CREATE TABLE users (email TEXT PRIMARY KEY, password_hash TEXT NOT NULL);
			INSERT INTO users VALUES ('admin@office.example', '$argon2id$v=19$m=65536,t=3,p=4$c2VjcmV0LXNhbHQ$SEKRET')`); err != nil {
			t.Fatal(err)
		}
		o := org(t, db, "Biuro Wyciek")
		if _, err := s.Create(ctx, o, admin, dbconn.Input{Name: "office", DSN: office.DSN}); err != nil {
			t.Fatal(err)
		}
		_, err := s.Exec(ctx, o, statement("office", "SELECT CAST((SELECT email||' '||left(password_hash,40) FROM users WHERE email=$1) AS integer)",
			[]any{"admin@office.example"}, 0))
		r := typeOf(err)
		if r.Code != "SQLSTATE_22P02" || r.Type != classify.Validation || r.Message != "22P02 invalid_text_representation" || err.Error() != r.Message {
			t.Errorf("exfiltration: %+v", r)
		}
		// Nor does its cause: only the code is kept.
		var pe *pgconn.PgError
		if !errors.As(err, &pe) || pe.Code != "22P02" || pe.Message != "" || pe.Detail != "" || pe.Where != "" {
			t.Errorf("the cause: %#v", pe)
		}
		for _, leak := range []string{"admin@", "argon2", "SEKRET", "invalid input syntax"} {
			if strings.Contains(r.Message, leak) || strings.Contains(fmt.Sprintf("%v %+v", errors.Unwrap(err), errors.Unwrap(err)), leak) {
				t.Errorf("the error carries %q: %s", leak, r.Message)
			}
		}
		// RAISE with the row in its text: the same.
		_, err = s.Exec(ctx, o, statement("office", `DO $$ BEGIN RAISE EXCEPTION '%', (SELECT password_hash FROM users LIMIT 1); END $$`, nil, 0))
		if r := typeOf(err); r.Message != "P0001 raise_exception" {
			t.Errorf("raise: %+v", r)
		}

		// Connection failures name the host as typed, never the address it resolved to.
		open := dbconn.New(db, dbconn.Config{Allow: everywhere, Own: []string{office.Server}})
		for _, c := range []struct{ dsn, code, msg string }{
			{"postgres://u@localhost:1/x?sslmode=disable", "CONNECT", "the database server localhost:1 refused the connection"},
			{"postgres://u@nothing-here.invalid:5432/x", "ENOTFOUND", "the database server's host nothing-here.invalid:5432 could not be resolved"},
		} {
			id := insert(t, db, o, c.code, c.dsn)
			tested, err := open.Test(ctx, o, id)
			r := typeOf(err)
			// A machine whose resolver does not answer at all (no network, under load) gives
			// the test's timeout instead of "not found": the message still names the host as
			// typed, and nothing else.
			if timedOut := "the database server nothing-here.invalid:5432 did not answer in time"; c.code == "ENOTFOUND" && r.Code == "ETIMEDOUT" && r.Message == timedOut && tested.LastTestError == timedOut {
				t.Logf("%s: the resolver did not answer: %+v", c.dsn, r)
				continue
			}
			if r.Code != c.code || r.Message != c.msg || tested.LastTestError != c.msg {
				t.Errorf("%s: %+v", c.dsn, r)
			}
		}
		strict := dbconn.New(db, dbconn.Config{})
		id := insert(t, db, o, "strict", "postgres://u@localhost:5432/x")
		_, err = strict.Test(ctx, o, id)
		if r := typeOf(err); r.Code != "DESTINATION_DENIED" || strings.Contains(r.Message, "127.0.0.1") || strings.Contains(r.Message, "::1") ||
			!strings.Contains(r.Message, "localhost:5432") {
			t.Errorf("denied: %+v", r)
		}
	})
}
