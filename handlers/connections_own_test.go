package handlers_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"testing"
	"time"

	"lifeline/handlers"
	"lifeline/models"
	"lifeline/models/modeltest"
	"lifeline/services/dbconn"
)

// withDatabases wires the database connections as `lifeline serve` does, in the setup the
// issue was found in: the database server's addresses inside the allow list
// (LIFELINE_DBCONN_ALLOW=127.0.0.0/8,::1), Lifeline's own database server the test server
// (on the SQLite variant too: it stands for a PostgreSQL DATABASE_URL) and its listen address
// the app's.
func withDatabases(office *modeltest.Office) appOption {
	return func(d *handlers.Deps, listen string) {
		svc := dbconn.New(d.DB, dbconn.Config{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")},
			Own: []string{office.Server, listen}})
		d.Databases = svc
	}
}

// The exfiltration of issue 19, tried as an organization's admin would, through the router:
// a connection to Lifeline's own database server is refused when saved and when dialled
// (test and compensation), a superuser is refused, and a compensation that makes the
// database quote a secret row in its error stores and shows only the SQLSTATE.
func TestConnectionsExfiltrationRefused(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		ctx := context.Background()
		office := modeltest.OfficeDatabase(t)
		a := newApp(t, db, withDatabases(office))
		rs := a.recoverySetup("Biuro Napastnik")
		api := a.srv.URL + "/api/v1/connections"
		_, pgPort, _ := net.SplitHostPort(office.Server)
		_, webPort, _ := net.SplitHostPort(strings.TrimPrefix(a.srv.URL, "http://"))
		ownDB := "postgres" // the PostgreSQL variant's own database is the app's
		if db.Dialect == models.Postgres {
			if err := db.Conn(ctx).Raw("SELECT current_database()").Scan(&ownDB).Error; err != nil {
				t.Fatal(err)
			}
		}

		// Saved: 422 on "dsn", by every name of this machine, with the password of the
		// superuser or of the office's role, and for the app's own listen address.
		var own []string
		for _, host := range []string{"localhost", "127.0.0.1", "127.0.0.2", "[::1]", "0.0.0.0"} {
			own = append(own, fmt.Sprintf("postgres://%s:x@%s:%s/%s?sslmode=disable", office.Superuser(), host, pgPort, ownDB))
		}
		own = append(own, fmt.Sprintf("host=localhost port=%s user=%s password=%s dbname=%s", pgPort, office.Role, office.Password, office.Database),
			"postgres://u@127.0.0.1:"+webPort+"/x")
		for _, dsn := range own {
			r := do(t, http.DefaultClient, "POST", api, fmt.Sprintf(`{"name": "own", "dsn": %q}`, dsn), bearer(rs.token))
			if f := fieldsOf(t, r); r.status != http.StatusUnprocessableEntity || f["dsn"] != "must not reach Lifeline's own database server or web server" {
				t.Errorf("save %s: %d %s", dsn, r.status, r.body)
			}
		}
		admin, csrf := a.browser(rs.tenant)
		body, hdr := formPost(csrf, url.Values{"name": {"own"}, "driver": {"postgres"}, "dsn": {own[0]}})
		r := do(t, admin, "POST", a.srv.URL+"/settings/connections", body, hdr)
		if doc := parseListDoc(t, r.body); r.status != http.StatusUnprocessableEntity || doc.testID("connection-dsn-input")[0].attr("aria-invalid") != "true" ||
			!strings.Contains(r.body, "must not reach Lifeline&#39;s own database server or web server") {
			t.Errorf("the page's form: %d", r.status)
		}
		if n := count(t, db, "db_connections"); n != 0 {
			t.Fatalf("%d connections saved", n)
		}
		// An office connection may not be changed into one to the own server either.
		r = do(t, http.DefaultClient, "POST", api, fmt.Sprintf(`{"name": "office", "dsn": %q}`, office.DSN), bearer(rs.token))
		if r.status != http.StatusCreated {
			t.Fatalf("office connection: %d %s", r.status, r.body)
		}
		officeID := r.json(t)["id"].(string)
		r = do(t, http.DefaultClient, "PUT", api+"/"+officeID, fmt.Sprintf(`{"name": "office", "dsn": %q}`, own[1]), bearer(rs.token))
		if f := fieldsOf(t, r); r.status != http.StatusUnprocessableEntity || f["dsn"] == nil {
			t.Errorf("update to the own server: %d %s", r.status, r.body)
		}

		// Dialled: connections stored past the check (saved before the rule, or by a name
		// that resolved elsewhere then) are refused by the test, and by a compensation before
		// its statement is sent, with the rule as the reason (not the operating system's
		// refusal: nothing listens on [::1]).
		insert := func(name, dsn string) string {
			now := time.Now().UTC()
			c := models.DBConnection{ID: models.NewID(), OrganizationID: rs.org, Name: name, Driver: "postgres", DSN: dsn, CreatedAt: now, UpdatedAt: now}
			if err := db.CreateDBConnection(db.Conn(ctx), &c); err != nil {
				t.Fatal(err)
			}
			return c.ID
		}
		for i, dsn := range own {
			id := insert(fmt.Sprintf("own-%d", i), dsn)
			m := do(t, http.DefaultClient, "POST", api+"/"+id+"/test", "", bearer(rs.token)).json(t)
			msg := fmt.Sprint(m["error"])
			if m["ok"] != false || !strings.Contains(msg, "is Lifeline's own database server or web server; a connection may not reach it") {
				t.Errorf("test %s: %v", dsn, m)
			}
			if strings.Contains(dsn, "localhost") && (strings.Contains(msg, "127.0.0.1") || strings.Contains(msg, "::1")) {
				t.Errorf("test %s names a resolved address: %s", dsn, msg)
			}
		}
		// The compensation of the issue: a role change in Lifeline's own tables.
		ex := a.compensate(rs, "own-0", "UPDATE memberships SET role = 'owner' WHERE user_id = $1", `"{{ step.output.id }}"`, "x")
		if cs := ex["compensations"].([]any); len(cs) != 1 || !strings.Contains(fmt.Sprint(cs[0].(map[string]any)["error"]), "is Lifeline's own database server") {
			t.Errorf("compensation on the own server: %v", ex["compensations"])
		}

		// A superuser of the office's server (reached through the forwarder): refused.
		super := insert("super", office.DSNAs(office.Superuser(), "x"))
		if m := do(t, http.DefaultClient, "POST", api+"/"+super+"/test", "", bearer(rs.token)).json(t); m["ok"] != false ||
			m["error"] != fmt.Sprintf(`the connection's role %q is a superuser; use a role with only the rights the compensation needs`, office.Superuser()) {
			t.Errorf("superuser test: %v", m)
		}
		if r := do(t, admin, "GET", a.srv.URL+"/settings/connections", "", map[string]string{"Accept-Language": "pl"}); !strings.Contains(r.body,
			"jest superużytkownikiem; użyj roli z samymi uprawnieniami potrzebnymi kompensacji") {
			t.Errorf("the refusal in Polish")
		}
		ex = a.compensate(rs, "super", "UPDATE pg_authid SET rolsuper = true WHERE rolname = $1", `"{{ step.output.id }}"`, office.Role)
		if cs := ex["compensations"].([]any); !strings.Contains(fmt.Sprint(cs[0].(map[string]any)["error"]), "is a superuser") {
			t.Errorf("compensation as a superuser: %v", cs)
		}

		// The office's own role, with SELECT on a table with a secret row: its test passes, and
		// the statement that would quote the row in the database's error gets only the SQLSTATE.
		const hash = "$argon2id$v=19$m=65536,t=3,p=4$U0VLUkVULVNBTFQ$S3KR3T-HASH-0f1e2d3c"
		if _, err := office.Conn.Exec(ctx, `CREATE TABLE users (email TEXT PRIMARY KEY, password_hash TEXT NOT NULL);
			INSERT INTO users VALUES ('owner@biuro-inne.example', '`+hash+`')`); err != nil {
			t.Fatal(err)
		}
		if m := do(t, http.DefaultClient, "POST", api+"/"+officeID+"/test", "", bearer(rs.token)).json(t); m["ok"] != true {
			t.Fatalf("office test: %v", m)
		}
		ex = a.compensate(rs, "office", "SELECT CAST((SELECT email||' '||left(password_hash,40) FROM users WHERE email=$1) AS integer)",
			`"{{ step.output.id }}"`, "owner@biuro-inne.example")
		exID := ex["id"].(string)
		cs := ex["compensations"].([]any)
		if c := cs[0].(map[string]any); c["error"] != "22P02 invalid_text_representation" || c["errorType"] != "validation" || c["status"] != models.CompFailed {
			t.Errorf("the exfiltrating compensation: %v", c)
		}
		var stored []string
		if err := db.Conn(ctx).Raw("SELECT COALESCE(error_message, '') || ' ' || COALESCE(error_type, '') || ' ' || COALESCE(CAST(result AS TEXT), '') FROM compensation_actions WHERE execution_id = ?", exID).
			Scan(&stored).Error; err != nil || len(stored) != 1 || !strings.HasPrefix(stored[0], "22P02 invalid_text_representation validation") {
			t.Errorf("stored: %q %v", stored, err)
		}
		var audit []string
		if err := db.Conn(ctx).Raw("SELECT action || ' ' || CAST(details AS TEXT) FROM audit_log WHERE organization_id = ?", rs.org).Scan(&audit).Error; err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(strings.Join(audit, "\n"), "22P02 invalid_text_representation") {
			t.Errorf("the audit log has no compensation.failed with the SQLSTATE: %v", audit)
		}
		seen := map[string]string{
			"stored compensation": strings.Join(stored, "\n"),
			"audit rows":          strings.Join(audit, "\n"),
			"execution API":       do(t, http.DefaultClient, "GET", a.srv.URL+"/api/v1/executions/"+exID, "", bearer(rs.token)).body,
			"execution page":      do(t, admin, "GET", a.srv.URL+"/executions/"+exID, "", nil).body,
			"audit page":          do(t, admin, "GET", a.srv.URL+"/audit", "", nil).body,
			"audit CSV":           do(t, admin, "GET", a.srv.URL+"/audit/export.csv", "", nil).body,
			"connections API":     do(t, http.DefaultClient, "GET", api, "", bearer(rs.token)).body,
			"connections page":    do(t, admin, "GET", a.srv.URL+"/settings/connections", "", nil).body,
		}
		if !strings.Contains(seen["execution page"], "22P02 invalid_text_representation") {
			t.Errorf("the execution page does not show the SQLSTATE")
		}
		for what, text := range seen {
			for _, leak := range []string{"argon2id", "U0VLUkVUL", "S3KR3T", "invalid input syntax"} {
				if strings.Contains(text, leak) {
					t.Errorf("%s shows %q", what, leak)
				}
			}
		}
	})
}

// compensate runs, for the tenant, a workflow whose first step outputs {"id": value} and
// whose second fails, with rollback on failure: the first step's database_operation
// compensation runs statement with params on connection. It returns the execution (API)
// once its rollback has ended.
func (a *app) compensate(rs *recoverySetup, connection, statement, params, value string) map[string]any {
	a.t.Helper()
	def := fmt.Sprintf(`{"name": "Kompensacja %s %d", "settings": {"retryPolicy": {"maxRetries": 0}, "rollbackOnFailure": true},
	  "steps": [
	    {"id": "book", "type": "transform", "config": {"output": {"id": "{{ input.value }}"}},
	     "compensation": {"compensationType": "database_operation", "config": {"connection": %q, "sqlTemplate": %q, "params": [%s]}}},
	    {"id": "file", "type": "http", "config": {"method": "POST", "url": "%s/bad"}}]}`, connection, time.Now().UnixNano(), connection, statement, params, a.ext.URL)
	r := do(a.t, http.DefaultClient, "POST", a.srv.URL+"/api/v1/workflows", def, bearer(rs.token))
	if r.status != http.StatusCreated {
		a.t.Fatalf("workflow: %d %s", r.status, r.body)
	}
	wf := r.json(a.t)["id"].(string)
	r = do(a.t, http.DefaultClient, "POST", a.srv.URL+"/api/v1/workflows/"+wf+"/executions", fmt.Sprintf(`{"input": {"value": %q}}`, value), bearer(rs.token))
	if r.status != http.StatusCreated {
		a.t.Fatalf("start: %d %s", r.status, r.body)
	}
	exID := r.json(a.t)["id"].(string)
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		m := do(a.t, http.DefaultClient, "GET", a.srv.URL+"/api/v1/executions/"+exID, "", bearer(rs.token)).json(a.t)
		if m["rollbackStatus"] == models.RollbackFailed || m["rollbackStatus"] == models.RolledBack {
			return m
		}
		if time.Now().After(deadline) {
			a.t.Fatalf("no end of the rollback: %v", m)
		}
	}
}
