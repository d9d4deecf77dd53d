package handlers_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/html"

	"lifeline/models"
	"lifeline/models/modeltest"
)

// TestSearchLabelsNameTheInput: the lists' search finds a client's NIP or an invoice number
// in the execution's input (issue 21), and its label says so in the reader's language; it
// said "subject or reason contains", so a new user typing a NIP had no reason to try.
func TestSearchLabelsNameTheInput(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		a := newApp(t, db)
		rs := a.recoverySetup("Biuro Etykiety Szukania")
		acc, _ := a.browser(rs.accountant)
		for _, c := range []struct{ path, input, lang, want string }{
			{"/dlq/items", "filter-dlq-q", "pl", "NIP"},
			{"/executions", "filter-q", "pl", "NIP"},
			{"/dlq/items", "filter-dlq-q", "en", "NIP"},
			{"/executions", "filter-q", "en", "invoice"},
		} {
			r := do(t, acc, "GET", a.srv.URL+c.path, "", map[string]string{"Accept-Language": c.lang})
			if r.status != http.StatusOK {
				t.Fatalf("%s: %d", c.path, r.status)
			}
			doc := parseListDoc(t, r.body)
			labels := doc.all(func(n *html.Node) bool {
				return n.Type == html.ElementNode && n.Data == "label" && listAttr(n, "for") == c.input
			})
			if len(labels) != 1 {
				t.Fatalf("%s (%s): %d labels for #%s", c.path, c.lang, len(labels), c.input)
			}
			if txt := (listDoc{root: labels[0]}).text(); !strings.Contains(txt, c.want) {
				t.Errorf("%s (%s): the search's label %q does not name the input's values (%s)", c.path, c.lang, txt, c.want)
			}
		}
	})
}

// TestItemOffersTheClientsOtherValues: a payroll export refused for a NIP typed wrong
// ("clientNip: NIP „645004606” ma 9 cyfr…") opens on the input's editor, which now says what
// the client's other executions hold in clientNip (the right NIP, the demo's cure) with a
// link to the client's page; another client's values, the same typo and another
// organization's runs are not offered, a secret never is, and a viewer (no editor) gets no
// hint.
func TestItemOffersTheClientsOtherValues(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		a := newApp(t, db)
		rs := a.recoverySetup("Biuro Płace NIP")
		other := a.tenant("Inne Biuro Płace NIP")
		bank := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			var body struct {
				NIP string `json:"clientNip"`
			}
			_ = json.NewDecoder(r.Body).Decode(&body)
			w.Header().Set("Content-Type", "application/json")
			if len(body.NIP) != 10 {
				msg := fmt.Sprintf("NIP „%s” ma %d cyfr, a powinien mieć 10", body.NIP, len(body.NIP))
				w.WriteHeader(http.StatusBadRequest)
				_ = json.NewEncoder(w).Encode(map[string]any{"error": "validation", "message": msg, "fields": map[string]string{"clientNip": msg}})
				return
			}
			fmt.Fprint(w, `{"ok": true}`)
		}))
		t.Cleanup(bank.Close)
		def := fmt.Sprintf(`{"name": "Eksport listy płac", "settings": {"subject": "{{ input.clientName }} · {{ input.period }}", "client": "{{ input.clientName }}",
		  "retryPolicy": {"maxRetries": 0}},
		  "steps": [{"id": "export", "name": "Eksport do banku", "type": "http",
		    "config": {"method": "POST", "url": "%s/export", "body": {"clientNip": "{{ input.clientNip }}"}}}]}`, bank.URL)
		run := func(tn *tenant, client, nip string) (string, string) {
			t.Helper()
			wf, err := a.wfs.Create(context.Background(), tn.org, actorSystem, []byte(def))
			if err != nil {
				t.Fatal(err)
			}
			r := do(t, http.DefaultClient, "POST", a.srv.URL+"/api/v1/workflows/"+wf.ID+"/executions",
				fmt.Sprintf(`{"input": {"clientName": %q, "clientNip": %q, "period": "2026-10", "apiToken": "tok-s3cret-99"}}`, client, nip), bearer(tn.token))
			if r.status != http.StatusCreated {
				t.Fatalf("start: %d %s", r.status, r.body)
			}
			exID := r.json(t)["id"].(string)
			for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
				m := do(t, http.DefaultClient, "GET", a.srv.URL+"/api/v1/executions/"+exID, "", bearer(tn.token)).json(t)
				if m["status"] == models.ExecSucceeded {
					return exID, ""
				}
				if id, _ := m["dlqId"].(string); id != "" {
					return exID, id
				}
				if time.Now().After(deadline) {
					t.Fatalf("%s %s: %v", client, nip, m["status"])
				}
			}
		}
		_, typo := run(rs.tenant, "Jankowski Auto Serwis", "645004606")
		run(rs.tenant, "Jankowski Auto Serwis", "6450046206")
		run(rs.tenant, "Jankowski Auto Serwis", "6450046206")
		run(rs.tenant, "Jankowski Auto Serwis", "645004606") // the same typo: not offered
		run(rs.tenant, "Mazur Budownictwo S.A.", "3848737482")
		run(other, "Jankowski Auto Serwis", "1111111111")

		acc, _ := a.browser(rs.accountant)
		r := do(t, acc, "GET", a.srv.URL+"/dlq/"+typo, "", map[string]string{"Accept-Language": "pl"})
		doc := parseListDoc(t, r.body)
		hint := doc.testID("client-values")
		if r.status != http.StatusOK || len(hint) != 1 {
			t.Fatalf("no hint of the client's other values: %d %.300s", r.status, r.body)
		}
		var vals []string
		for _, v := range hint[0].testID("client-value") {
			vals = append(vals, v.text())
		}
		if !slices.Equal(vals, []string{"6450046206"}) || !strings.Contains(hint[0].text(), "Inne wykonania klienta Jankowski Auto Serwis mają w polu clientNip") ||
			!strings.Contains(hint[0].text(), "(2 wykonania)") {
			t.Errorf("hint: %q values %q", hint[0].text(), vals)
		}
		if card := hint[0].testID("client-values-card"); len(card) != 1 || card[0].attr("href") != "/clients/Jankowski%20Auto%20Serwis" {
			t.Errorf("client card link: %v", card)
		}
		if strings.Contains(r.body, "tok-s3cret-99") {
			t.Error("a secret on the page")
		}
		viewer, _ := a.browser(rs.viewer)
		if doc := parseListDoc(t, do(t, viewer, "GET", a.srv.URL+"/dlq/"+typo, "", nil).body); len(doc.testID("client-values")) != 0 {
			t.Error("the viewer, who cannot edit, gets the hint")
		}
	})
}

// TestNotifyCardRecipientsInWords: the workflow page's notification card, which the
// accountant reads, named its default recipients "role:admin, role:accountant" (issue 21
// item 12: no raw role names on pages). It says them in the reader's language; an address
// stays as it is.
func TestNotifyCardRecipientsInWords(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		a := newNotifApp(t, db)
		nt := a.tenant("Biuro Odbiorcy")
		acc, _ := a.browser(nt.accountant)
		card := func(lang string) string {
			t.Helper()
			r := do(t, acc, "GET", a.srv.URL+"/workflows/"+nt.wf+"/notifications", "", map[string]string{"HX-Request": "true", "Accept-Language": lang})
			got := parseListDoc(t, r.body).testID("notify-card-recipients")
			if r.status != http.StatusOK || len(got) != 1 {
				t.Fatalf("card (%s): %d %.300s", lang, r.status, r.body)
			}
			return got[0].text()
		}
		if got := card("pl"); got != "administratorzy, księgowe" {
			t.Errorf("pl recipients %q", got)
		}
		if got := card("en"); got != "admins, accountants" {
			t.Errorf("en recipients %q", got)
		}
		wf, err := db.GetWorkflow(context.Background(), nt.org, nt.wf)
		if err != nil {
			t.Fatal(err)
		}
		wf.Definition = models.JSON(`{"name": "Deklaracja VAT", "settings": {"errorNotifications": {"recipients": ["vat@example.pl", "role:owner"]}}, "steps": []}`)
		if err := db.Conn(context.Background()).Save(wf).Error; err != nil {
			t.Fatal(err)
		}
		if got := card("pl"); got != "vat@example.pl, właściciele" {
			t.Errorf("own recipients %q", got)
		}
	})
}
