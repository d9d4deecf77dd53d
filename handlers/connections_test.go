package handlers_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"lifeline/models"
	"lifeline/models/modeltest"
)

const connPassword = "Tajne-Haslo-2026"

// connDSN is a DSN of the loopback PostgreSQL port: the connections page's service has no
// allow list (LIFELINE_DBCONN_ALLOW), so testing it is refused by the SSRF rules before any
// connection.
var connDSN = "postgres://ksiegowosc:" + connPassword + "@127.0.0.1:5432/ledger?sslmode=disable"

func formPost(csrf string, v url.Values) (string, map[string]string) {
	v.Set("_csrf", csrf)
	return v.Encode(), map[string]string{"Content-Type": "application/x-www-form-urlencoded"}
}

// noPassword fails the test when a response shows the DSN's password.
func noPassword(t *testing.T, what string, r resp) {
	t.Helper()
	if strings.Contains(r.body, connPassword) {
		t.Errorf("%s shows the password: %.300s", what, r.body)
	}
}

func TestConnectionsAPI(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		a := newApp(t, db)
		rs := a.recoverySetup("Biuro Połączenia")
		other := a.tenant("Biuro Obce")
		api := a.srv.URL + "/api/v1/connections"
		body := fmt.Sprintf(`{"name": "ledger", "driver": "postgres", "dsn": %q, "description": "Księgi główne"}`, connDSN)

		// Admins only: accountants and viewers are refused, whatever the method.
		for _, tok := range []string{rs.accountantToken, rs.viewerToken} {
			for _, m := range []struct{ method, path, body string }{{"GET", "", ""}, {"POST", "", body}, {"GET", "/" + models.NewID(), ""},
				{"PUT", "/" + models.NewID(), body}, {"DELETE", "/" + models.NewID(), ""}, {"POST", "/" + models.NewID() + "/test", ""}} {
				if r := do(t, http.DefaultClient, m.method, api+m.path, m.body, bearer(tok)); r.status != http.StatusForbidden {
					t.Errorf("%s %s below admin: %d", m.method, m.path, r.status)
				}
			}
		}

		r := do(t, http.DefaultClient, "POST", api, body, bearer(rs.token))
		if r.status != http.StatusCreated {
			t.Fatalf("create: %d %s", r.status, r.body)
		}
		noPassword(t, "create", r)
		created := r.json(t)
		id, _ := created["id"].(string)
		if created["dsn"] != "postgres://ksiegowosc:•••@127.0.0.1:5432/ledger?sslmode=disable" || created["driver"] != "postgres" ||
			created["name"] != "ledger" || created["description"] != "Księgi główne" || created["lastTestedAt"] != nil ||
			created["lastTestError"] != nil || created["createdAt"] == nil || created["updatedAt"] == nil || created["keyTable"] != "lifeline_compensation_keys" {
			t.Errorf("created %v", created)
		}

		// Field messages, in the request's language.
		r = do(t, http.DefaultClient, "POST", api, `{"name": "zła nazwa", "driver": "mysql", "dsn": "host=db passfile=/etc/shadow"}`, bearer(rs.token))
		f := fieldsOf(t, r)
		if r.status != 422 || f["name"] == nil || f["driver"] != "must be one of postgres" || !strings.HasPrefix(fmt.Sprint(f["dsn"]), `may not set "passfile"`) {
			t.Errorf("invalid: %d %s", r.status, r.body)
		}
		r = do(t, http.DefaultClient, "POST", api, `{"name": "ledger", "dsn": "`+connDSN+`"}`, map[string]string{"Authorization": "Bearer " + rs.token, "Accept-Language": "pl"})
		if f := fieldsOf(t, r); r.status != 422 || f["name"] != "jest już używana przez inne połączenie" || r.json(t)["error"].(map[string]any)["message"] != "Połączenie zawiera błędy." {
			t.Errorf("duplicate in Polish: %d %s", r.status, r.body)
		}
		noPassword(t, "the duplicate's 422", r)
		if r := do(t, http.DefaultClient, "POST", api, `{"name": "x", "dsn": "postgres://u@h/d", "password": "x"}`, bearer(rs.token)); r.status != 422 {
			t.Errorf("unknown key: %d", r.status)
		}
		// The idempotency table: a table name, optionally schema-qualified, nothing else.
		for _, bad := range []string{`keys; DROP TABLE clients`, `Keys`, `a.b.c`, `"keys"`} {
			r = do(t, http.DefaultClient, "POST", api, fmt.Sprintf(`{"name": "k", "dsn": %q, "keyTable": %q}`, connDSN, bad), bearer(rs.token))
			if f := fieldsOf(t, r); r.status != 422 || !strings.HasPrefix(fmt.Sprint(f["keyTable"]), "must be a table name of lowercase letters, digits and '_'") {
				t.Errorf("key table %q: %d %s", bad, r.status, r.body)
			}
		}
		r = do(t, http.DefaultClient, "POST", api, fmt.Sprintf(`{"name": "k", "dsn": %q, "keyTable": "Klucze"}`, connDSN),
			map[string]string{"Authorization": "Bearer " + rs.token, "Accept-Language": "pl"})
		if f := fieldsOf(t, r); r.status != 422 || !strings.HasPrefix(fmt.Sprint(f["keyTable"]), "musi być nazwą tabeli z małych liter") {
			t.Errorf("key table in Polish: %d %s", r.status, r.body)
		}

		r = do(t, http.DefaultClient, "GET", api, "", bearer(rs.token))
		if items := apiItems(t, r); r.status != 200 || len(items) != 1 || items[0]["id"] != id {
			t.Errorf("list: %d %s", r.status, r.body)
		}
		noPassword(t, "list", r)
		if r := do(t, http.DefaultClient, "GET", api, "", bearer(other.token)); len(apiItems(t, r)) != 0 {
			t.Errorf("another organization lists %s", r.body)
		}

		// Another organization's id, or no id at all, is a 404.
		for _, m := range []struct{ method, path, body string }{{"GET", "/" + id, ""}, {"PUT", "/" + id, body}, {"DELETE", "/" + id, ""},
			{"POST", "/" + id + "/test", ""}, {"GET", "/not-an-id", ""}} {
			if r := do(t, http.DefaultClient, m.method, api+m.path, m.body, bearer(other.token)); r.status != http.StatusNotFound {
				t.Errorf("%s %s from another organization: %d", m.method, m.path, r.status)
			}
		}

		r = do(t, http.DefaultClient, "PUT", api+"/"+id, `{"name": "ledger", "description": "Księgi główne", "keyTable": "lifeline.keys"}`, bearer(rs.token))
		if m := r.json(t); r.status != 200 || m["keyTable"] != "lifeline.keys" {
			t.Errorf("update of the key table: %d %s", r.status, r.body)
		}
		// PUT without a DSN or a key table keeps them.
		r = do(t, http.DefaultClient, "PUT", api+"/"+id, `{"name": "ledger-2026", "description": ""}`, bearer(rs.token))
		if m := r.json(t); r.status != 200 || m["name"] != "ledger-2026" || m["dsn"] != created["dsn"] || m["description"] != "" || m["keyTable"] != "lifeline.keys" {
			t.Errorf("update: %d %s", r.status, r.body)
		}
		if m := do(t, http.DefaultClient, "GET", api+"/"+id, "", bearer(rs.token)).json(t); m["keyTable"] != "lifeline.keys" {
			t.Errorf("get: %v", m)
		}
		if c, err := db.GetDBConnection(context.Background(), rs.org, id); err != nil || c.DSN != connDSN {
			t.Errorf("stored DSN after update: %v", err)
		}

		// A test: 200 with the exact error (here the SSRF rules refuse loopback), recorded.
		r = do(t, http.DefaultClient, "POST", api+"/"+id+"/test", "", bearer(rs.token))
		m := r.json(t)
		conn, _ := m["connection"].(map[string]any)
		if r.status != 200 || m["ok"] != false || !strings.Contains(fmt.Sprint(m["error"]), "is at an address that is private, loopback") ||
			conn["lastTestError"] != m["error"] || conn["lastTestedAt"] == nil {
			t.Errorf("test: %d %s", r.status, r.body)
		}
		noPassword(t, "test", r)
		if m := do(t, http.DefaultClient, "GET", api+"/"+id, "", bearer(rs.token)).json(t); m["lastTestError"] != conn["lastTestError"] {
			t.Errorf("get after test: %v", m)
		}

		if r := do(t, http.DefaultClient, "DELETE", api+"/"+id, "", bearer(rs.token)); r.status != http.StatusNoContent {
			t.Errorf("delete: %d %s", r.status, r.body)
		}
		if r := do(t, http.DefaultClient, "GET", api+"/"+id, "", bearer(rs.token)); r.status != http.StatusNotFound {
			t.Errorf("deleted: %d", r.status)
		}

		var actions []string
		if err := db.Conn(context.Background()).Model(&models.AuditEntry{}).Where("organization_id = ? AND entity_id = ?", rs.org, id).
			Order("created_at").Pluck("action", &actions).Error; err != nil {
			t.Fatal(err)
		}
		if strings.Join(actions, ",") != "connection.created,connection.updated,connection.updated,connection.deleted" {
			t.Errorf("audit %v", actions)
		}
		var details []string
		_ = db.Conn(context.Background()).Raw("SELECT CAST(details AS TEXT) FROM audit_log WHERE entity_id = ?", id).Scan(&details)
		if strings.Contains(strings.Join(details, ""), connPassword) {
			t.Errorf("the audit log shows the password")
		}
		if all := strings.Join(details, "\n"); !strings.Contains(all, `"to": "lifeline.keys"`) && !strings.Contains(all, `"to":"lifeline.keys"`) {
			t.Errorf("the audit log does not show the key table's change: %s", all)
		}
		var raw string
		if err := db.Conn(context.Background()).Raw("SELECT COALESCE(MAX(dsn), '') FROM db_connections").Scan(&raw).Error; err != nil || strings.Contains(raw, connPassword) {
			t.Errorf("stored in clear: %v", err)
		}
	})
}

func TestConnectionsPage(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		ctx := context.Background()
		a := newApp(t, db)
		rs := a.recoverySetup("Biuro Strona Połączeń")
		other := a.tenant("Biuro Cudze")
		admin, csrf := a.browser(rs.tenant)
		page := a.srv.URL + "/settings/connections"

		// Accountants and viewers: no nav item, 403 on the page and its forms.
		for _, tn := range []*tenant{rs.accountant, rs.viewer} {
			b, tok := a.browser(tn)
			if r := do(t, b, "GET", a.srv.URL+"/workflows", "", nil); len(parseListDoc(t, r.body).testID("nav-settings")) != 0 {
				t.Errorf("%s sees the nav item", tn.email)
			}
			if r := do(t, b, "GET", page, "", nil); r.status != http.StatusForbidden {
				t.Errorf("%s: page %d", tn.email, r.status)
			}
			body, hdr := formPost(tok, url.Values{"name": {"x"}, "dsn": {connDSN}})
			if r := do(t, b, "POST", page, body, hdr); r.status != http.StatusForbidden {
				t.Errorf("%s: create %d", tn.email, r.status)
			}
		}

		r := do(t, admin, "GET", page, "", nil)
		doc := parseListDoc(t, r.body)
		nav, tab := doc.testID("nav-settings"), doc.testID("tab-connections")
		if r.status != 200 || len(nav) != 1 || nav[0].attr("aria-current") != "page" || len(tab) != 1 || tab[0].attr("aria-current") != "page" ||
			tab[0].attr("href") != "/settings/connections" {
			t.Fatalf("page: %d, nav %d, tab %d", r.status, len(nav), len(tab))
		}
		if len(doc.testID("empty-state")) != 1 || !strings.Contains(r.body, `data-testid="new-connection" open`) {
			t.Errorf("an empty list with the form open")
		}
		if in := doc.testID("connection-key-table-input"); len(in) != 1 || in[0].attr("value") != "lifeline_compensation_keys" || in[0].attr("name") != "keyTable" {
			t.Errorf("the key table field: %v", in)
		}

		// 422: the form again with its messages; the DSN that was sent is not sent back.
		body, hdr := formPost(csrf, url.Values{"name": {"zła nazwa"}, "driver": {"postgres"}, "dsn": {"host=db user=u password=" + connPassword + " service=x"}, "description": {"Opis"},
			"keyTable": {"księgi.klucze"}})
		r = do(t, admin, "POST", page, body, hdr)
		doc = parseListDoc(t, r.body)
		if r.status != 422 || len(doc.testID("field-error")) != 3 || len(doc.testID("connection-dsn-retype")) != 1 || len(doc.testID("form-error")) != 1 {
			t.Errorf("invalid form: %d %d", r.status, len(doc.testID("field-error")))
		}
		if in := doc.testID("connection-key-table-input"); len(in) != 1 || in[0].attr("value") != "księgi.klucze" || in[0].attr("aria-invalid") != "true" ||
			!strings.Contains(r.body, "must be a table name of lowercase letters, digits and &#39;_&#39;") {
			t.Errorf("the key table is not kept with its message: %v", in)
		}
		if in := doc.testID("connection-name-input"); len(in) != 1 || in[0].attr("value") != "zła nazwa" || in[0].attr("aria-invalid") != "true" {
			t.Errorf("the name is not kept")
		}
		if in := doc.testID("connection-dsn-input"); len(in) != 1 || in[0].attr("value") != "" {
			t.Errorf("the DSN came back")
		}
		noPassword(t, "the 422 form", r)

		body, hdr = formPost(csrf, url.Values{"name": {"ledger"}, "driver": {"postgres"}, "dsn": {connDSN}, "description": {"Księgi główne"}})
		r = do(t, admin, "POST", page, body, hdr)
		if r.status != http.StatusSeeOther || r.header.Get("Location") != "/settings/connections?done=created&name=ledger" {
			t.Fatalf("create: %d %s", r.status, r.header.Get("Location"))
		}
		r = do(t, admin, "GET", a.srv.URL+r.header.Get("Location"), "", nil)
		noPassword(t, "the list", r)
		doc = parseListDoc(t, r.body)
		rows := doc.testID("connection-row")
		if len(rows) != 1 || len(doc.testID("connection-done")) != 1 {
			t.Fatalf("rows %d", len(rows))
		}
		id := rows[0].attr("data-id")
		for tid, want := range map[string]string{"connection-name": "ledger", "connection-driver": "PostgreSQL",
			"connection-dsn": "postgres://ksiegowosc:•••@127.0.0.1:5432/ledger?sslmode=disable", "connection-description": "Księgi główne",
			"connection-test-status": "Never tested", "connection-key-table": "lifeline_compensation_keys"} {
			if got := rows[0].testID(tid); len(got) != 1 || got[0].text() != want {
				t.Errorf("row %s: %v, want %q", tid, got, want)
			}
		}

		// Test connection, by htmx: the result alone (here the SSRF refusal), recorded.
		r = do(t, admin, "POST", page+"/"+id+"/test", "", map[string]string{"HX-Request": "true", "X-CSRF-Token": csrf})
		doc = parseListDoc(t, r.body)
		res := doc.testID("connection-test-result")
		if r.status != 200 || strings.Contains(r.body, "<html") || len(res) != 1 || res[0].attr("data-status") != "failed" || res[0].attr("role") != "status" ||
			!strings.Contains(res[0].testID("connection-test-error")[0].text(), "is at an address that is private, loopback") {
			t.Errorf("htmx test: %d %.300s", r.status, r.body)
		}
		noPassword(t, "the test", r)
		// Without htmx: back to the list, the row marked.
		body, hdr = formPost(csrf, url.Values{})
		r = do(t, admin, "POST", page+"/"+id+"/test", body, hdr)
		if r.status != http.StatusSeeOther || r.header.Get("Location") != "/settings/connections?tested="+id+"#connection-"+id {
			t.Errorf("test form: %d %s", r.status, r.header.Get("Location"))
		}
		r = do(t, admin, "GET", page+"?tested="+id, "", nil)
		if row := parseListDoc(t, r.body).testID("connection-row"); len(row) != 1 || !strings.Contains(row[0].attr("class"), "row--tested") ||
			row[0].testID("connection-test-status")[0].text() != "Failed" {
			t.Errorf("tested row")
		}

		// Edit: prefilled, the DSN empty (kept) and shown masked.
		r = do(t, admin, "GET", page+"/"+id, "", nil)
		doc = parseListDoc(t, r.body)
		if r.status != 200 || doc.testID("connection-name-input")[0].attr("value") != "ledger" || doc.testID("connection-dsn-input")[0].attr("value") != "" ||
			doc.testID("connection-stored-dsn")[0].text() != "postgres://ksiegowosc:•••@127.0.0.1:5432/ledger?sslmode=disable" {
			t.Errorf("edit page: %d", r.status)
		}
		noPassword(t, "the edit page", r)
		body, hdr = formPost(csrf, url.Values{"name": {""}, "driver": {"postgres"}, "dsn": {""}})
		if r := do(t, admin, "POST", page+"/"+id, body, hdr); r.status != 422 || len(parseListDoc(t, r.body).testID("field-error")) != 1 {
			t.Errorf("edit without a name: %d", r.status)
		}
		if in := doc.testID("connection-key-table-input"); len(in) != 1 || in[0].attr("value") != "lifeline_compensation_keys" {
			t.Errorf("edit page: the key table %v", in)
		}
		body, hdr = formPost(csrf, url.Values{"name": {"ledger-2026"}, "driver": {"postgres"}, "dsn": {""}, "description": {"Nowy opis"}, "keyTable": {" ledger.keys "}})
		if r := do(t, admin, "POST", page+"/"+id, body, hdr); r.status != http.StatusSeeOther || r.header.Get("Location") != "/settings/connections?done=updated&name=ledger-2026" {
			t.Errorf("edit: %d %s", r.status, r.header.Get("Location"))
		}
		if c, err := db.GetDBConnection(ctx, rs.org, id); err != nil || c.DSN != connDSN || c.Name != "ledger-2026" || c.Description != "Nowy opis" || c.KeyTable != "ledger.keys" {
			t.Errorf("after edit: %+v %v", c, err)
		}
		body, hdr = formPost(csrf, url.Values{"name": {"ledger-2026"}, "keyTable": {"Ledger"}})
		if r := do(t, admin, "POST", page+"/"+id, body, hdr); r.status != 422 || parseListDoc(t, r.body).testID("connection-key-table-input")[0].attr("value") != "Ledger" {
			t.Errorf("edit with a bad key table: %d", r.status)
		}

		// Polish.
		r = do(t, admin, "GET", page, "", map[string]string{"Accept-Language": "pl"})
		if d := parseListDoc(t, r.body); !strings.Contains(r.body, "Połączenia z bazami danych") || d.testID("tab-connections")[0].text() != "Połączenia" ||
			d.testID("connection-test-status")[0].text() != "Błąd" {
			t.Errorf("Polish page")
		}
		body, hdr = formPost(csrf, url.Values{"name": {"ledger-2026"}, "dsn": {"postgres://db.example.com/x"}})
		hdr["Accept-Language"] = "pl"
		r = do(t, admin, "POST", page, body, hdr)
		if !strings.Contains(r.body, "Połączenie zawiera błędy.") || !strings.Contains(r.body, "musi wskazywać użytkownika") {
			t.Errorf("Polish field messages: %d", r.status)
		}

		// Another organization's connection: 404 on every page route.
		ob, ocsrf := a.browser(other)
		body, hdr = formPost(ocsrf, url.Values{"name": {"x"}, "dsn": {connDSN}})
		for _, m := range []struct{ method, path string }{{"GET", "/" + id}, {"POST", "/" + id}, {"POST", "/" + id + "/delete"}, {"POST", "/" + id + "/test"}, {"GET", "/nope"}} {
			b, h := "", map[string]string(nil)
			if m.method == "POST" {
				b, h = body, hdr
			}
			if r := do(t, ob, m.method, page+m.path, b, h); r.status != http.StatusNotFound {
				t.Errorf("%s %s from another organization: %d", m.method, m.path, r.status)
			}
		}

		// Delete, after the confirmation in the row.
		r = do(t, admin, "GET", page, "", nil)
		if d := parseListDoc(t, r.body); len(d.testID("connection-delete-form")) != 1 || d.testID("connection-delete-form")[0].attr("action") != "/settings/connections/"+id+"/delete" {
			t.Errorf("delete form")
		}
		body, hdr = formPost(csrf, url.Values{})
		if r := do(t, admin, "POST", page+"/"+id+"/delete", body, hdr); r.status != http.StatusSeeOther || r.header.Get("Location") != "/settings/connections?done=deleted&name=ledger-2026" {
			t.Errorf("delete: %d %s", r.status, r.header.Get("Location"))
		}
		if n := count(t, db, "db_connections"); n != 0 {
			t.Errorf("%d connections left", n)
		}
		var entries int64
		if err := db.Conn(ctx).Model(&models.AuditEntry{}).Where("organization_id = ? AND action LIKE 'connection.%'", rs.org).Count(&entries).Error; err != nil || entries != 3 {
			t.Errorf("%d audit entries %v", entries, err)
		}
	})
}
