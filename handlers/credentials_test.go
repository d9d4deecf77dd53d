package handlers_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"lifeline/models"
	"lifeline/models/modeltest"
)

// tokenGate is a service that checks a bearer token: the current one passes; any other is
// refused with 401, the token echoed back as a careless service does.
type tokenGate struct {
	mu      sync.Mutex
	current string
	sent    []string
}

func (g *tokenGate) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	g.mu.Lock()
	defer g.mu.Unlock()
	got := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
	g.sent = append(g.sent, got)
	if got != g.current {
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprintf(w, `{"message": "token %s expired"}`, got)
		return
	}
	fmt.Fprint(w, `{"ok": true}`)
}

// TestCredentialsPage: admins keep the organization's credentials (others get 403); a value
// is never shown again, only its last 4 characters; bad input is a 422 that does not send the
// value back; a step reads the credential, and where it failed with it (a 401 that echoes
// it) nothing shows it in clear: not the pages, the API, the audit log or the database.
// Replacing it once cures the dead letter by a plain retry; deleting another organization's
// is a 404.
func TestCredentialsPage(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		ctx := context.Background()
		a := newApp(t, db)
		rs := a.recoverySetup("Biuro Dane Dostępowe")
		other := a.tenant("Biuro Cudze Dane")
		admin, csrf := a.browser(rs.tenant)
		page := a.srv.URL + "/settings/credentials"
		const expired, fresh = "KSEF-EXPIRED-7c1e9a", "KSEF-FRESH-2b8d40"

		for _, tn := range []*tenant{rs.accountant, rs.viewer} {
			b, tok := a.browser(tn)
			if r := do(t, b, "GET", page, "", nil); r.status != http.StatusForbidden {
				t.Errorf("%s: page %d", tn.email, r.status)
			}
			body, hdr := formPost(tok, url.Values{"name": {"x"}, "value": {"12345678"}})
			if r := do(t, b, "POST", page, body, hdr); r.status != http.StatusForbidden {
				t.Errorf("%s: save %d", tn.email, r.status)
			}
		}
		r := do(t, admin, "GET", page, "", nil)
		doc := parseListDoc(t, r.body)
		if tab := doc.testID("tab-credentials"); r.status != 200 || len(tab) != 1 || tab[0].attr("aria-current") != "page" || len(doc.testID("empty-state")) != 1 {
			t.Fatalf("page: %d %.300s", r.status, r.body)
		}

		// 422 in Polish: the messages by field, the value not sent back, nothing saved.
		body, hdr := formPost(csrf, url.Values{"name": {"zły token"}, "value": {"krótki"}})
		hdr["Accept-Language"] = "pl"
		r = do(t, admin, "POST", page, body, hdr)
		doc = parseListDoc(t, r.body)
		if r.status != 422 || len(doc.testID("field-error")) != 2 || len(doc.testID("credential-retype")) != 1 || strings.Contains(r.body, "krótki") {
			t.Errorf("invalid form: %d, %d field errors", r.status, len(doc.testID("field-error")))
		}
		if !strings.Contains(r.body, "musi zaczynać się od litery") || !strings.Contains(r.body, "musi mieć co najmniej 8 znaków") {
			t.Errorf("the messages are not in Polish")
		}
		if in := doc.testID("credential-value-input"); len(in) != 1 || in[0].attr("value") != "" || in[0].attr("type") != "password" {
			t.Errorf("the value field: %v", in)
		}

		save := func(name, value, want string) string {
			t.Helper()
			body, hdr := formPost(csrf, url.Values{"name": {name}, "value": {value}})
			r := do(t, admin, "POST", page, body, hdr)
			if loc := r.header.Get("Location"); r.status != http.StatusSeeOther || !strings.HasPrefix(loc, "/settings/credentials?done="+want+"&name="+name+"#credential-") {
				t.Fatalf("save %s: %d %s", name, r.status, loc)
			}
			return strings.TrimPrefix(r.header.Get("Location"), "/settings/credentials?done="+want+"&name="+name+"#credential-")
		}
		id := save("ksefToken", expired, "created")
		r = do(t, admin, "GET", page+"?done=created&name=ksefToken", "", nil)
		doc = parseListDoc(t, r.body)
		if rows := doc.testID("credential-row"); len(rows) != 1 || len(rows[0].testID("credential-masked")) != 1 || rows[0].testID("credential-masked")[0].text() != "••••"+expired[len(expired)-4:] {
			t.Errorf("rows: %v", rows)
		}
		if strings.Contains(r.body, expired) || len(doc.testID("credential-done")) != 1 {
			t.Errorf("the list shows the value, or no confirmation")
		}

		// A step reads it; the service refuses the expired token with 401, echoing it.
		gate := &tokenGate{current: fresh}
		up := httptest.NewServer(gate)
		defer up.Close()
		def := fmt.Sprintf(`{"name": "KSeF", "settings": {"retryPolicy": {"maxRetries": 0}}, "steps": [{"id": "fetch", "name": "Pobierz faktury",
		  "type": "http", "config": {"method": "POST", "url": "%s/invoices", "headers": {"Authorization": "Bearer {{ credentials.ksefToken }}"},
		  "body": {"nip": "{{ input.nip }}"}}}]}`, up.URL)
		wf, err := a.wfs.Create(ctx, rs.org, actorSystem, []byte(def))
		if err != nil {
			t.Fatal(err)
		}
		r = do(t, http.DefaultClient, "POST", a.srv.URL+"/api/v1/workflows/"+wf.ID+"/executions", `{"input": {"nip": "5260250274"}}`, bearer(rs.token))
		if r.status != http.StatusCreated {
			t.Fatalf("start: %d %s", r.status, r.body)
		}
		execID := r.json(t)["id"].(string)
		var dl models.DeadLetter
		for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			if err := db.Conn(ctx).Where("execution_id = ?", execID).First(&dl).Error; err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("no dead letter")
			}
		}
		if item := a.dlqStatus(rs.token, dl.ID); item["errorType"] != "authorization" {
			t.Errorf("the 401 is %v, want authorization", item["errorType"])
		}
		leaks := func(where, text string) {
			t.Helper()
			if i := strings.Index(text, expired); i >= 0 {
				t.Errorf("%s shows the credential: …%s…", where, text[max(0, i-80):min(len(text), i+40)])
			}
		}
		accountant, _ := a.browser(rs.accountant)
		for _, p := range []string{"/executions/" + execID, "/dlq/" + dl.ID, "/dlq", "/audit", "/settings/credentials"} {
			leaks("page "+p, do(t, admin, "GET", a.srv.URL+p, "", nil).body)
			leaks("accountant's page "+p, do(t, accountant, "GET", a.srv.URL+p, "", nil).body)
		}
		for _, p := range []string{"/api/v1/executions/" + execID, "/api/v1/dlq/" + dl.ID} {
			leaks("API "+p, do(t, http.DefaultClient, "GET", a.srv.URL+p, "", bearer(rs.token)).body)
		}
		leaks("database", dumpDatabase(t, db))

		// The admin replaces it once: a plain retry goes through.
		if again := save("ksefToken", fresh, "replaced"); again != id {
			t.Errorf("replacing made a new credential %s, want %s", again, id)
		}
		r = do(t, http.DefaultClient, "POST", a.srv.URL+"/api/v1/dlq/"+dl.ID+"/actions", `{"action": "retry"}`, bearer(rs.accountantToken))
		if r.status != http.StatusAccepted {
			t.Fatalf("retry: %d %s", r.status, r.body)
		}
		if item := a.dlqStatus(rs.token, dl.ID); item["status"] != models.DLQResolved {
			t.Errorf("after the new token the retry left %v", item["status"])
		}
		gate.mu.Lock()
		if n := len(gate.sent); n != 2 || gate.sent[0] != expired || gate.sent[1] != fresh {
			t.Errorf("the service got %q", gate.sent)
		}
		gate.mu.Unlock()
		leaks("database after the retry", dumpDatabase(t, db))
		if strings.Contains(dumpDatabase(t, db), fresh) {
			t.Error("the new value is stored in clear")
		}

		// The audit log names the changes, never the value.
		audit := do(t, admin, "GET", a.srv.URL+"/audit/export.csv", "", nil).body
		if !strings.Contains(audit, "credential.created") || !strings.Contains(audit, "credential.replaced") || !strings.Contains(audit, "ksefToken") ||
			strings.Contains(audit, fresh) || strings.Contains(audit, expired) {
			t.Errorf("audit: %.800s", audit)
		}

		// Another organization's credential is a 404; the admin's own is deleted.
		otherAdmin, otherCSRF := a.browser(other)
		body, hdr = formPost(otherCSRF, url.Values{})
		if r := do(t, otherAdmin, "POST", page+"/"+id+"/delete", body, hdr); r.status != http.StatusNotFound {
			t.Errorf("another organization's delete: %d", r.status)
		}
		body, hdr = formPost(csrf, url.Values{})
		if r := do(t, admin, "POST", page+"/"+id+"/delete", body, hdr); r.status != http.StatusSeeOther {
			t.Errorf("delete: %d", r.status)
		}
		if r := do(t, admin, "GET", page, "", nil); len(parseListDoc(t, r.body).testID("credential-row")) != 0 {
			t.Error("still listed after delete")
		}
	})
}
