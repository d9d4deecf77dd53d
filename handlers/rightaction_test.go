package handlers_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"lifeline/models"
	"lifeline/models/modeltest"
)

// TestRolledBackItemPrimaryAction: a rolled-back item offers only the whole-workflow retry,
// but which action comes first still follows the error (issue 21, "the right action
// first"). When the service refused the data itself (a client's e-mail address without its
// "@" found at the fourth step of the demo's bank import), that retry repeats the failure:
// the editor comes first, the retry is secondary and the page says why. When the failure
// is one time cures (a 404 for an invoice the client has not sent yet), the whole-workflow
// retry stays the primary action.
func TestRolledBackItemPrimaryAction(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		a := newApp(t, db)
		rs := a.recoverySetup("Biuro Wycofane Dane")
		svc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			switch r.URL.Path {
			case "/book":
				fmt.Fprint(w, `{"id": "B-7"}`)
			case "/report":
				w.WriteHeader(http.StatusBadRequest)
				fmt.Fprint(w, `{"error": "to: not an e-mail address"}`)
			case "/match":
				w.WriteHeader(http.StatusNotFound)
				fmt.Fprint(w, `{"error": "invoice not in KSeF yet"}`)
			default:
				fmt.Fprint(w, `{"ok": true}`)
			}
		}))
		t.Cleanup(svc.Close)
		acc, _ := a.browser(rs.accountant)
		item := func(failing string) listDoc {
			t.Helper()
			wf, err := a.wfs.Create(context.Background(), rs.org, actorSystem, []byte(fmt.Sprintf(`{"name": "Import %[2]s",
			  "settings": {"retryPolicy": {"maxRetries": 0}, "rollbackOnFailure": true},
			  "steps": [
			    {"id": "book", "type": "http", "config": {"method": "POST", "url": "%[1]s/book"},
			     "compensation": {"compensationType": "api_call", "config": {"method": "DELETE", "endpoint": "%[1]s/cancel/{{ step.output.id }}"}}},
			    {"id": "last", "type": "http", "config": {"method": "POST", "url": "%[1]s/%[2]s"}}]}`, svc.URL, failing)))
			if err != nil {
				t.Fatal(err)
			}
			exID := do(t, http.DefaultClient, "POST", a.srv.URL+"/api/v1/workflows/"+wf.ID+"/executions", `{"input": {"email": "biuro.example.pl"}}`, bearer(rs.token)).json(t)["id"].(string)
			var dlID string
			for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
				m := do(t, http.DefaultClient, "GET", a.srv.URL+"/api/v1/executions/"+exID, "", bearer(rs.token)).json(t)
				if id, _ := m["dlqId"].(string); id != "" && m["rollbackStatus"] == models.RolledBack {
					dlID = id
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("%s: no rolled-back dead letter: %v", failing, m)
				}
			}
			r := do(t, acc, "GET", a.srv.URL+"/dlq/"+dlID, "", map[string]string{"Accept-Language": "pl"})
			if r.status != http.StatusOK {
				t.Fatalf("%s: item page %d", failing, r.status)
			}
			return parseListDoc(t, r.body)
		}
		classes := func(d listDoc, id string) string {
			t.Helper()
			b := d.testID(id)
			if len(b) != 1 {
				t.Fatalf("%s ×%d", id, len(b))
			}
			return b[0].attr("class")
		}

		data := item("report")
		if c := classes(data, "action-full"); strings.Contains(c, "btn-primary") || !strings.Contains(c, "btn-secondary") {
			t.Errorf("refused data, rolled back: the whole-workflow retry (which repeats the failure) is primary: %q", c)
		}
		if h := data.testID("fix-data-hint"); len(h) != 1 || !strings.Contains(h[0].text(), "Popraw dane wejściowe") {
			t.Errorf("refused data, rolled back: no hint that a retry repeats the error: %v", h)
		}
		if e := data.testID("edit-section"); len(e) != 1 || !hasAttr(e[0].root, "open") {
			t.Errorf("refused data, rolled back: the editor is not open first")
		}
		if len(data.testID("rolled-back-warning")) != 1 {
			t.Error("refused data, rolled back: no rolled-back warning")
		}

		later := item("match")
		if c := classes(later, "action-full"); !strings.Contains(c, "btn-primary") {
			t.Errorf("an invoice not yet in KSeF, rolled back: the whole-workflow retry is not primary: %q", c)
		}
		if len(later.testID("fix-data-hint")) != 0 {
			t.Error("an invoice not yet in KSeF, rolled back: told a retry repeats the error")
		}
	})
}
