package handlers_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
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
		run(rs.tenant, "Jankowski Auto Serwis", "64500462")  // another typo, which failed: no example either
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

// TestProblemsSayWhatCuresThem: "Kolejka DLQ" opens on the problems, and there the demo's
// expired KSeF token offered only "retry all" (a retry repeats a 401 until an admin uploads
// a new token; nothing said so), and its closed September said "a retry will repeat this
// error: the service refuses the data itself" (the service never saw it: the period is
// closed). A new user found the cure only by opening an item. Now an authorization problem
// says an admin must upload new credentials first (admins get the link; the others ask on
// the problem's page), and a closed period's says what an office does instead; a data error
// keeps its hint.
func TestProblemsSayWhatCuresThem(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		ctx := context.Background()
		a := newApp(t, db)
		rs := a.recoverySetup("Biuro Problemy Lekarstwa")
		ksef := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			fmt.Fprint(w, `{"error": "token_expired", "message": "Token KSeF wygasł — administrator musi wgrać nowy"}`)
		}))
		t.Cleanup(ksef.Close)
		gw := vatGateway(t)
		defs := []string{
			fmt.Sprintf(`{"name": "Faktury z KSeF", "settings": {"subject": "{{ input.client }}", "retryPolicy": {"maxRetries": 0}},
			  "steps": [{"id": "fetch", "name": "Pobierz faktury", "type": "http", "config": {"method": "POST", "url": "%s/query", "body": {"nip": "{{ input.nip }}"}}}]}`, ksef.URL),
			// Imported, then refused at the posting and rolled back, as the demo's late statement.
			fmt.Sprintf(`{"name": "Import i księgowanie", "settings": {"subject": "{{ input.client }} · {{ input.period }}", "client": "{{ input.client }}",
			  "period": "{{ input.period }}", "retryPolicy": {"maxRetries": 0}, "rollbackOnFailure": true},
			  "steps": [{"id": "import", "name": "Import", "type": "http", "config": {"method": "POST", "url": "%[1]s/vat", "body": {"nip": "{{ input.nip }}"}},
			      "compensation": {"compensationType": "api_call", "config": {"method": "POST", "endpoint": "%[1]s/undo", "body": {"nip": "{{ input.nip }}"}}}},
			    {"id": "post", "name": "Księgowanie", "type": "http", "postsToPeriod": true,
			      "config": {"method": "POST", "url": "%[1]s/vat", "body": {"nip": "{{ input.nip }}", "period": "{{ input.period }}"}}}]}`, gw.URL),
		}
		if r := do(t, http.DefaultClient, "POST", a.srv.URL+"/api/v1/periods/closed", `{"period": "2026-09", "client": "Kowalski", "note": "Wrzesień rozliczony"}`,
			map[string]string{"Authorization": "Bearer " + rs.token, "Content-Type": "application/json"}); r.status != http.StatusCreated {
			t.Fatalf("close: %d %s", r.status, r.body)
		}
		wfs := []string{rs.wf}
		for _, def := range defs {
			wf, err := a.wfs.Create(ctx, rs.org, actorSystem, []byte(def))
			if err != nil {
				t.Fatal(err)
			}
			wfs = append(wfs, wf.ID)
		}
		for _, wf := range wfs { // a NIP typed wrong (validation), the 401, the closed September
			r := do(t, http.DefaultClient, "POST", a.srv.URL+"/api/v1/workflows/"+wf+"/executions",
				`{"input": {"client": "Kowalski", "period": "2026-09", "nip": "5260250274"}}`, bearer(rs.token))
			if wf == rs.wf {
				r = do(t, http.DefaultClient, "POST", a.srv.URL+"/api/v1/workflows/"+wf+"/executions",
					`{"input": {"client": "Kowalski", "period": "2026-10", "nip": "526025027"}}`, bearer(rs.token))
			}
			if r.status != http.StatusCreated {
				t.Fatalf("start: %d %s", r.status, r.body)
			}
		}
		groupOf := map[string]string{} // error type → group
		for deadline := time.Now().Add(20 * time.Second); len(groupOf) < 3; time.Sleep(50 * time.Millisecond) {
			var dls []models.DeadLetter
			db.Conn(ctx).Where("organization_id = ? AND workflow_id IN ? AND group_id IS NOT NULL", rs.org, wfs).Find(&dls)
			for _, dl := range dls {
				groupOf[map[string]string{wfs[0]: "validation", wfs[1]: "authorization", wfs[2]: "period_closed"}[dl.WorkflowID]] = *dl.GroupID
			}
			if time.Now().After(deadline) {
				t.Fatalf("dead letters grouped: %v", groupOf)
			}
		}
		if len(groupOf) != 3 || groupOf["authorization"] == "" || groupOf["period_closed"] == "" || groupOf["validation"] == "" {
			t.Fatalf("groups: %v", groupOf)
		}
		// card finds the problem card of a group on the Problems page.
		card := func(doc listDoc, group string) listDoc {
			t.Helper()
			for _, c := range doc.testID("problem") {
				for _, l := range c.all(func(n *html.Node) bool { return n.Type == html.ElementNode && n.Data == "a" }) {
					if strings.HasSuffix(listAttr(l, "href"), "/dlq/groups/"+group) {
						return c
					}
				}
			}
			t.Fatalf("no card of group %s", group)
			return listDoc{}
		}
		acc, _ := a.browser(rs.accountant)
		admin, _ := a.browser(rs.tenant)
		pl := map[string]string{"Accept-Language": "pl"}
		var doc listDoc
		for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(100 * time.Millisecond) { // until the rollback has run
			r := do(t, acc, "GET", a.srv.URL+"/dlq", "", pl)
			if r.status != http.StatusOK {
				t.Fatalf("problems: %d", r.status)
			}
			if doc = parseListDoc(t, r.body); len(card(doc, groupOf["period_closed"]).testID("problem-retry-full")) == 1 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the closed period's problem was not rolled back: %q", card(doc, groupOf["period_closed"]).text())
			}
		}
		auth, period, data := card(doc, groupOf["authorization"]), card(doc, groupOf["period_closed"]), card(doc, groupOf["validation"])
		// Rolled back, but while the period is closed a retry of the whole workflow is refused too:
		// not the first action, and no "retry the whole workflow" hint.
		if b := period.testID("problem-retry-full"); strings.Contains(b[0].attr("class"), "btn-primary") || len(period.testID("problem-rolledback")) != 0 {
			t.Errorf("the closed period's problem leads to a retry: %q", period.text())
		}
		if h := auth.testID("problem-credentials-hint"); len(h) != 1 || !strings.Contains(h[0].text(), "dopóki administrator nie wgra nowych danych dostępowych") ||
			len(h[0].testID("problem-credentials-hint-link")) != 0 {
			t.Errorf("the accountant's authorization problem: %q", auth.text())
		}
		if h := period.testID("problem-period-hint"); len(h) != 1 || !strings.Contains(h[0].text(), "przenieś go do otwartego okresu") ||
			len(period.testID("problem-fix-hint")) != 0 || strings.Contains(period.text(), "usługa odrzuca same dane") {
			t.Errorf("the closed period's problem: %q", period.text())
		}
		if len(data.testID("problem-fix-hint")) != 1 || len(data.testID("problem-period-hint")) != 0 || len(data.testID("problem-credentials-hint")) != 0 {
			t.Errorf("the data error's problem: %q", data.text())
		}
		doc = parseListDoc(t, do(t, admin, "GET", a.srv.URL+"/dlq", "", pl).body)
		if l := card(doc, groupOf["authorization"]).testID("problem-credentials-hint-link"); len(l) != 1 || l[0].attr("href") != "/settings/credentials" {
			t.Errorf("the admin's authorization problem has no link to the credentials: %v", l)
		}
		// The problem's page: the accountant may ask an admin from it.
		doc = parseListDoc(t, do(t, acc, "GET", a.srv.URL+"/dlq/groups/"+groupOf["authorization"], "", pl).body)
		if len(doc.testID("group-credentials-hint")) != 1 || len(doc.testID("group-ask")) != 1 || len(doc.testID("group-admin-only")) != 0 {
			t.Errorf("the authorization problem's page: hint %d, ask %d, admin-only %d", len(doc.testID("group-credentials-hint")),
				len(doc.testID("group-ask")), len(doc.testID("group-admin-only")))
		}
		doc = parseListDoc(t, do(t, acc, "GET", a.srv.URL+"/dlq/groups/"+groupOf["period_closed"], "", pl).body)
		if len(doc.testID("group-period-hint")) != 1 || len(doc.testID("group-fix-hint")) != 0 {
			t.Errorf("the closed period's page: period hint %d, fix hint %d", len(doc.testID("group-period-hint")), len(doc.testID("group-fix-hint")))
		}
		doc = parseListDoc(t, do(t, acc, "GET", a.srv.URL+"/dlq/groups/"+groupOf["validation"], "", pl).body)
		if len(doc.testID("group-fix-hint")) != 1 || len(doc.testID("group-ask")) != 0 {
			t.Errorf("the data error's page: fix hint %d, ask %d", len(doc.testID("group-fix-hint")), len(doc.testID("group-ask")))
		}
	})
}

// TestGroupEditOnlyForOneClient: ten minutes into the demo the payroll's "check digit" NIP
// problem held five items of four clients, and its page offered "set one clientNip in all
// the pending items and retry": a new user following "Popraw dane" would have sent four
// companies' salaries under one NIP. A field is corrected once for a whole group only when
// its items are about one client; otherwise the page says to correct each item on its own.
func TestGroupEditOnlyForOneClient(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		ctx := context.Background()
		a := newApp(t, db)
		rs := a.recoverySetup("Biuro Jedna Wartość")
		gw := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { // names the field, as the demo's bank does
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprint(w, `{"error": "validation", "fields": {"nip": "NIP musi mieć 10 cyfr"}}`)
		}))
		t.Cleanup(gw.Close)
		def := fmt.Sprintf(`{"name": "Eksport płac", "settings": {"subject": "{{ input.client }} · {{ input.period }}", "client": "{{ input.client }}",
		  "retryPolicy": {"maxRetries": 0}},
		  "steps": [{"id": "export", "name": "Eksport do banku", "type": "http", "config": {"method": "POST", "url": "%s/vat", "body": {"nip": "{{ input.nip }}"}}}]}`, gw.URL)
		groupOf := func(inputs ...string) string {
			t.Helper()
			wf, err := a.wfs.Create(ctx, rs.org, actorSystem, []byte(def))
			if err != nil {
				t.Fatal(err)
			}
			for _, in := range inputs {
				if r := do(t, http.DefaultClient, "POST", a.srv.URL+"/api/v1/workflows/"+wf.ID+"/executions", `{"input": `+in+`}`, bearer(rs.token)); r.status != http.StatusCreated {
					t.Fatalf("start: %d %s", r.status, r.body)
				}
			}
			for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
				var dls []models.DeadLetter
				db.Conn(ctx).Where("organization_id = ? AND workflow_id = ? AND group_id IS NOT NULL", rs.org, wf.ID).Find(&dls)
				if len(dls) == len(inputs) {
					return *dls[0].GroupID
				}
				if time.Now().After(deadline) {
					t.Fatalf("%d dead letters grouped, want %d", len(dls), len(inputs))
				}
			}
		}
		many := groupOf(`{"client": "Kowalski", "period": "2026-10", "nip": "526025027"}`, `{"client": "Mazur", "period": "2026-10", "nip": "384873784"}`,
			`{"client": "Mazur", "period": "2026-11", "nip": "384873784"}`)
		one := groupOf(`{"client": "Nowak", "period": "2026-10", "nip": "390036031"}`, `{"client": "Nowak", "period": "2026-11", "nip": "390036031"}`)
		acc, _ := a.browser(rs.accountant)
		pl := map[string]string{"Accept-Language": "pl"}
		doc := parseListDoc(t, do(t, acc, "GET", a.srv.URL+"/dlq/groups/"+many, "", pl).body)
		if n := len(doc.testID("group-edit")); n != 0 {
			t.Errorf("a group of two clients offers %d edits of one value for all", n)
		}
		if note := doc.testID("group-many-clients"); len(note) != 1 || !strings.Contains(note[0].text(), "dotyczą 2 klientów") {
			t.Errorf("the page does not say why: %v", note)
		}
		doc = parseListDoc(t, do(t, acc, "GET", a.srv.URL+"/dlq/groups/"+one, "", pl).body)
		if e := doc.testID("group-edit"); len(e) != 1 || e[0].attr("data-field") != "nip" || len(doc.testID("group-many-clients")) != 0 {
			t.Errorf("one client's group: %d edits, %d notes", len(e), len(doc.testID("group-many-clients")))
		}
	})
}

// TestItemAfterPeriodReopened: the demo's late September statement, refused for the closed
// September: once an admin reopened the period, its page still said "a retry will repeat
// this error: the service refused the data itself; correct the input below" and kept the
// retry second, though a retry now posts (it did, in the walk). Now it says the period was
// reopened, the retry comes first, and it cures the item.
func TestItemAfterPeriodReopened(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		ctx := context.Background()
		a := newApp(t, db)
		rs := a.recoverySetup("Biuro Okres Otwarty Znowu")
		wf := periodWorkflow(t, a, rs.org)
		r := do(t, http.DefaultClient, "POST", a.srv.URL+"/api/v1/periods/closed", `{"period": "2026-09", "client": "Kowalski", "note": "Wrzesień rozliczony"}`,
			map[string]string{"Authorization": "Bearer " + rs.token, "Content-Type": "application/json"})
		if r.status != http.StatusCreated {
			t.Fatalf("close: %d %s", r.status, r.body)
		}
		closed := r.json(t)["id"].(string)
		r = do(t, http.DefaultClient, "POST", a.srv.URL+"/api/v1/workflows/"+wf.ID+"/executions",
			`{"input": {"client": "Kowalski", "period": "2026-09", "nip": "5260250274"}}`, bearer(rs.token))
		if r.status != http.StatusCreated {
			t.Fatalf("start: %d %s", r.status, r.body)
		}
		exID := r.json(t)["id"].(string)
		var dl models.DeadLetter
		for deadline := time.Now().Add(15 * time.Second); db.Conn(ctx).Where("execution_id = ?", exID).First(&dl).Error != nil; time.Sleep(50 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal("no dead letter")
			}
		}
		acc, csrf := a.browser(rs.accountant)
		pl := map[string]string{"Accept-Language": "pl"}
		page := func(path string) listDoc {
			t.Helper()
			r := do(t, acc, "GET", a.srv.URL+path, "", pl)
			if r.status != http.StatusOK {
				t.Fatalf("%s: %d", path, r.status)
			}
			return parseListDoc(t, r.body)
		}
		if doc := page("/dlq/" + dl.ID); len(doc.testID("period-closed")) != 1 || len(doc.testID("period-reopened")) != 0 {
			t.Fatalf("while closed: notice %d, reopened %d", len(doc.testID("period-closed")), len(doc.testID("period-reopened")))
		}
		if r := do(t, http.DefaultClient, "DELETE", a.srv.URL+"/api/v1/periods/closed/"+closed, "", bearer(rs.token)); r.status != http.StatusNoContent {
			t.Fatalf("reopen: %d %s", r.status, r.body)
		}
		for _, path := range []string{"/dlq/" + dl.ID, "/executions/" + exID} {
			doc := page(path)
			if n := doc.testID("period-reopened"); len(n) != 1 || !strings.Contains(n[0].text(), "Okres 2026-09 jest już ponownie otwarty") {
				t.Errorf("%s: no word that the period was reopened: %v", path, n)
			}
			if len(doc.testID("fix-data-hint")) != 0 || len(doc.testID("period-closed")) != 0 {
				t.Errorf("%s: still says to correct the data", path)
			}
			if b := doc.testID("action-retry"); len(b) != 1 || !strings.Contains(b[0].attr("class"), "btn-primary") {
				t.Errorf("%s: the retry is not the first action", path)
			}
		}
		retryResolves(t, a, db, acc, csrf, dl.ID, "the retry after the reopen")
	})
}

// retryResolves posts the item page's retry as the browser client c and waits until the
// dead letter id is resolved; what names the retry in the failure.
func retryResolves(t *testing.T, a *app, db *models.DB, c *http.Client, csrf, id, what string) {
	t.Helper()
	form := url.Values{"_csrf": {csrf}, "action": {"retry"}}
	if r := do(t, c, "POST", a.srv.URL+"/dlq/"+id+"/actions", form.Encode(), map[string]string{"Content-Type": "application/x-www-form-urlencoded"}); r.status != http.StatusSeeOther {
		t.Fatalf("%s: %d %.300s", what, r.status, r.body)
	}
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		var got models.DeadLetter
		db.Conn(context.Background()).First(&got, "id = ?", id)
		if got.Status == models.DLQResolved {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s left the item %s", what, got.Status)
		}
	}
}

// TestQuarantinedItemSaysWhy: an item held back by a quarantined value said "a retry will
// repeat this error: the service refused the data itself" (the service never saw it), and
// after an admin released the value it still did, with the retry second. Now it says the
// value is held (correct it, or ask for its release), and once released, that a retry runs
// the step, first; the retry then cures it.
func TestQuarantinedItemSaysWhy(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		a := newApp(t, db)
		rs := a.recoverySetup("Biuro Kwarantanna Słowa")
		h := map[string]string{"Authorization": "Bearer " + rs.token, "Content-Type": "application/json"}
		r := do(t, http.DefaultClient, "POST", a.srv.URL+"/api/v1/quarantine", `{"value": "5260250274", "note": "Podejrzany NIP"}`, h)
		if r.status != http.StatusCreated {
			t.Fatalf("hold: %d %s", r.status, r.body)
		}
		hold := r.json(t)["id"].(string)
		held := a.deadLetterOf(rs.org, rs.wf, `{"client": "Kowalski", "period": "2026-10", "nip": "5260250274"}`)
		acc, csrf := a.browser(rs.accountant)
		page := func() listDoc {
			t.Helper()
			r := do(t, acc, "GET", a.srv.URL+"/dlq/"+held.ID, "", map[string]string{"Accept-Language": "pl"})
			if r.status != http.StatusOK {
				t.Fatalf("item: %d", r.status)
			}
			return parseListDoc(t, r.body)
		}
		doc := page()
		if n := doc.testID("quarantine-hint"); len(n) != 1 || !strings.Contains(n[0].text(), "jest w kwarantannie") || len(doc.testID("fix-data-hint")) != 0 {
			t.Errorf("while held: hint %v, fix-data hint %d", n, len(doc.testID("fix-data-hint")))
		}
		if r := do(t, http.DefaultClient, "POST", a.srv.URL+"/api/v1/quarantine/"+hold+"/release", "{}", h); r.status != http.StatusOK {
			t.Fatalf("release: %d %s", r.status, r.body)
		}
		doc = page()
		if len(doc.testID("quarantine-released")) != 1 || len(doc.testID("quarantine-hint")) != 0 || len(doc.testID("fix-data-hint")) != 0 {
			t.Errorf("released: released %d, hint %d, fix-data %d", len(doc.testID("quarantine-released")), len(doc.testID("quarantine-hint")), len(doc.testID("fix-data-hint")))
		}
		if b := doc.testID("action-retry"); len(b) != 1 || !strings.Contains(b[0].attr("class"), "btn-primary") {
			t.Errorf("released: the retry is not the first action")
		}
		retryResolves(t, a, db, acc, csrf, held.ID, "the retry after the release")
	})
}

// TestClosedPeriodIsNoPoison: in the demo, Kowalski's late September statements, each
// refused for the closed September (no service saw them), flagged Kowalski's right NIP as a
// value that "failed 3 times in 1 workflow", with "quarantine this value" for admins, on
// every Kowalski problem (the expired KSeF token's too). A failure the closed period caused
// no longer counts against the input's values; a data error still does.
func TestClosedPeriodIsNoPoison(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		ctx := context.Background()
		a := newApp(t, db)
		rs := a.recoverySetup("Biuro Okres Nie Trucizna")
		gw := vatGateway(t)
		wf, err := a.wfs.Create(ctx, rs.org, actorSystem, fmt.Appendf(nil, `{"name": "Księgowanie", "settings": {"subject": "{{ input.client }} · {{ input.period }}",
		  "client": "{{ input.client }}", "period": "{{ input.period }}", "retryPolicy": {"maxRetries": 0}},
		  "steps": [{"id": "post", "name": "Księgowanie", "type": "http", "postsToPeriod": true,
		    "config": {"method": "POST", "url": "%s/vat", "body": {"nip": "{{ input.nip }}", "period": "{{ input.period }}"}}}]}`, gw.URL))
		if err != nil {
			t.Fatal(err)
		}
		if r := do(t, http.DefaultClient, "POST", a.srv.URL+"/api/v1/periods/closed", `{"period": "2026-09", "note": "Wrzesień rozliczony"}`,
			map[string]string{"Authorization": "Bearer " + rs.token, "Content-Type": "application/json"}); r.status != http.StatusCreated {
			t.Fatalf("close: %d %s", r.status, r.body)
		}
		var closed, typo []models.DeadLetter
		for i := range 3 {
			closed = append(closed, a.deadLetterOf(rs.org, wf.ID, fmt.Sprintf(`{"client": "Kowalski %d", "period": "2026-09", "nip": "5260250274"}`, i)))
			typo = append(typo, a.deadLetterOf(rs.org, wf.ID, fmt.Sprintf(`{"client": "Nowak %d", "period": "2026-10", "nip": "390036031"}`, i)))
		}
		admin, _ := a.browser(rs.tenant)
		flags := func(id string) []listDoc {
			t.Helper()
			r := do(t, admin, "GET", a.srv.URL+"/dlq/"+id, "", map[string]string{"Accept-Language": "pl"})
			if r.status != http.StatusOK {
				t.Fatalf("item: %d", r.status)
			}
			return parseListDoc(t, r.body).testID("poison-flag")
		}
		if f := flags(closed[0].ID); len(f) != 0 {
			t.Errorf("the closed period's item flags its NIP: %q", f[0].text())
		}
		if f := flags(typo[0].ID); len(f) != 1 || !strings.Contains(f[0].text(), "nie przeszedł 3 razy") {
			t.Errorf("the NIP typed wrong three times is not flagged: %v", f)
		}
	})
}
