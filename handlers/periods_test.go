package handlers_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"lifeline/models"
	"lifeline/models/modeltest"
)

// TestClosedPeriodsAPI: admins close and reopen periods (accountants and viewers 403), every
// member reads; bad input is 422 by field with nothing written, closing one again is 409
// naming who closed it and when, another organization's id is 404.
func TestClosedPeriodsAPI(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		a := newApp(t, db)
		rs := a.recoverySetup("Biuro Okresy API")
		other := a.tenant("Biuro Okresy Cudze")
		list := a.srv.URL + "/api/v1/periods/closed"
		json := map[string]string{"Content-Type": "application/json"}
		with := func(tok string) map[string]string {
			h := bearer(tok)
			for k, v := range json {
				h[k] = v
			}
			return h
		}
		body := `{"period": "2026-09", "client": null, "note": "JPK_V7M wysłany"}`
		for _, tok := range []string{rs.accountantToken, rs.viewerToken} {
			if r := do(t, http.DefaultClient, "POST", list, body, with(tok)); r.status != http.StatusForbidden {
				t.Errorf("non-admin closes: %d", r.status)
			}
		}
		for _, c := range []struct{ body, field string }{
			{`{"period": "wrzesień", "client": null, "note": "x"}`, "period"},
			{`{"period": "2026-09", "client": "5260001246", "note": ""}`, "note"},
			{fmt.Sprintf(`{"period": "2026-09", "client": %q, "note": "x"}`, strings.Repeat("k", 201)), "client"},
		} {
			r := do(t, http.DefaultClient, "POST", list, c.body, with(rs.token))
			if r.status != http.StatusUnprocessableEntity || fieldsOf(t, r)[c.field] == nil {
				t.Errorf("%s: %d %s", c.body, r.status, r.body)
			}
		}
		if r := do(t, http.DefaultClient, "GET", list, "", bearer(rs.viewerToken)); r.status != 200 || len(r.json(t)["items"].([]any)) != 0 {
			t.Fatalf("written on 422: %d %s", r.status, r.body)
		}
		r := do(t, http.DefaultClient, "POST", list, body, with(rs.token))
		if r.status != http.StatusCreated {
			t.Fatalf("close: %d %s", r.status, r.body)
		}
		made := r.json(t)
		by, _ := made["closedBy"].(map[string]any)
		if made["period"] != "2026-09" || made["client"] != nil || made["note"] != "JPK_V7M wysłany" || by["type"] != "api_token" || by["name"] != "API token ci" {
			t.Errorf("closed: %v", made)
		}
		id := made["id"].(string)
		r = do(t, http.DefaultClient, "POST", list, body, with(rs.token))
		if e, _ := r.json(t)["error"].(map[string]any); r.status != http.StatusConflict || !strings.Contains(fmt.Sprint(e["message"]), "API token ci") {
			t.Errorf("close again: %d %s", r.status, r.body)
		}
		r = do(t, http.DefaultClient, "POST", list, `{"period": "2026-q3", "client": "5260001246", "note": "kwartał"}`, with(rs.token))
		if r.status != http.StatusCreated || r.json(t)["client"] != "5260001246" || r.json(t)["period"] != "2026-Q3" {
			t.Errorf("close for a client: %d %s", r.status, r.body)
		}
		for _, tok := range []string{rs.viewerToken, rs.accountantToken} {
			r := do(t, http.DefaultClient, "GET", list, "", bearer(tok))
			if items := r.json(t)["items"].([]any); r.status != 200 || len(items) != 2 {
				t.Errorf("read: %d %s", r.status, r.body)
			}
			if r := do(t, http.DefaultClient, "DELETE", list+"/"+id, "", bearer(tok)); r.status != http.StatusForbidden {
				t.Errorf("non-admin reopens: %d", r.status)
			}
		}
		if r := do(t, http.DefaultClient, "GET", list, "", bearer(other.token)); len(r.json(t)["items"].([]any)) != 0 {
			t.Errorf("another organization reads: %s", r.body)
		}
		if r := do(t, http.DefaultClient, "DELETE", list+"/"+id, "", bearer(other.token)); r.status != http.StatusNotFound {
			t.Errorf("another organization reopens: %d", r.status)
		}
		if r := do(t, http.DefaultClient, "DELETE", list+"/"+id, "", bearer(rs.token)); r.status != http.StatusNoContent {
			t.Errorf("reopen: %d %s", r.status, r.body)
		}
		if r := do(t, http.DefaultClient, "DELETE", list+"/"+id, "", bearer(rs.token)); r.status != http.StatusNotFound {
			t.Errorf("reopen again: %d", r.status)
		}
		if r := do(t, http.DefaultClient, "DELETE", list+"/not-a-uuid", "", bearer(rs.token)); r.status != http.StatusNotFound {
			t.Errorf("reopen a bad id: %d", r.status)
		}
	})
}

// TestClosedPeriodsPage: the admins' settings tab lists closed periods ("wszyscy klienci"
// for every client), closes one from the form (422 in Polish by field; 409 over the form
// when already closed) and reopens one after its confirmation; others get 403.
func TestClosedPeriodsPage(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		a := newApp(t, db)
		rs := a.recoverySetup("Biuro Okresy Strona")
		admin, csrf := a.browser(rs.tenant)
		page := a.srv.URL + "/settings/periods"
		for _, tn := range []*tenant{rs.accountant, rs.viewer} {
			b, tok := a.browser(tn)
			if r := do(t, b, "GET", page, "", nil); r.status != http.StatusForbidden {
				t.Errorf("%s: page %d", tn.email, r.status)
			}
			body, hdr := formPost(tok, url.Values{"period": {"2026-09"}, "note": {"x"}})
			if r := do(t, b, "POST", page, body, hdr); r.status != http.StatusForbidden {
				t.Errorf("%s: close %d", tn.email, r.status)
			}
		}
		pl := map[string]string{"Accept-Language": "pl"}
		r := do(t, admin, "GET", page, "", pl)
		doc := parseListDoc(t, r.body)
		if tab := doc.testID("tab-periods"); r.status != 200 || len(tab) != 1 || tab[0].attr("aria-current") != "page" || len(doc.testID("empty-state")) != 1 {
			t.Fatalf("page: %d %.300s", r.status, r.body)
		}
		body, hdr := formPost(csrf, url.Values{"period": {"wrzesień"}, "client": {""}, "note": {" "}})
		hdr["Accept-Language"] = "pl"
		r = do(t, admin, "POST", page, body, hdr)
		doc = parseListDoc(t, r.body)
		if r.status != 422 || len(doc.testID("field-error")) != 2 || !strings.Contains(r.body, "musi być okresem") || !strings.Contains(r.body, "jest wymagane") {
			t.Errorf("invalid form: %d %d", r.status, len(doc.testID("field-error")))
		}
		if in := doc.testID("period-period-input"); len(in) != 1 || in[0].attr("value") != "wrzesień" {
			t.Errorf("the form does not keep the period: %v", in)
		}
		body, hdr = formPost(csrf, url.Values{"period": {"2026-09"}, "client": {""}, "note": {"JPK_V7M za wrzesień wysłany"}})
		r = do(t, admin, "POST", page, body, hdr)
		if loc := r.header.Get("Location"); r.status != http.StatusSeeOther || !strings.HasPrefix(loc, "/settings/periods?done=closed&period=2026-09&id=") {
			t.Fatalf("close: %d %s", r.status, loc)
		}
		r = do(t, admin, "GET", a.srv.URL+r.header.Get("Location"), "", pl)
		doc = parseListDoc(t, r.body)
		rows := doc.testID("period-row")
		if len(rows) != 1 || len(doc.testID("period-done")) != 1 || rows[0].attr("class") != "row--tested" {
			t.Fatalf("rows: %d %.500s", len(rows), r.body)
		}
		row := rows[0]
		if row.testID("period-period")[0].text() != "2026-09" || row.testID("period-client")[0].text() != "wszyscy klienci" ||
			row.testID("period-note")[0].text() != "JPK_V7M za wrzesień wysłany" || row.testID("period-by")[0].text() != strings.Split(rs.email, "@")[0] {
			t.Errorf("row: %s", row.text())
		}
		r = do(t, admin, "POST", page, body, map[string]string{"Content-Type": "application/x-www-form-urlencoded", "Accept-Language": "pl"})
		if r.status != http.StatusConflict || !strings.Contains(r.body, "jest już zamknięty dla wszystkich klientów") {
			t.Errorf("close again: %d", r.status)
		}
		reopen := row.testID("period-reopen-form")
		if len(reopen) != 1 || len(row.testID("period-reopen-confirm")) != 1 {
			t.Fatalf("no reopen confirmation")
		}
		body, hdr = formPost(csrf, url.Values{})
		r = do(t, admin, "POST", a.srv.URL+reopen[0].attr("action"), body, hdr)
		if r.status != http.StatusSeeOther || r.header.Get("Location") != "/settings/periods?done=reopened&period=2026-09" {
			t.Fatalf("reopen: %d %s", r.status, r.header.Get("Location"))
		}
		r = do(t, admin, "GET", page, "", nil)
		if doc := parseListDoc(t, r.body); len(doc.testID("period-row")) != 0 {
			t.Errorf("reopened period still listed")
		}
	})
}

// TestDLQItemInClosedPeriod: a filing that failed (a bad NIP) while 2026-09 was open; then an
// admin closes 2026-09 for the client. The item page says which period, who closed it and
// when, and offers editing the input, asking an admin (accountants) or reopening it
// (admins), and closing the item; a retry through the API is 409 period_closed and runs
// nothing; the input edited to an open period (and a good NIP) runs and resolves the item.
// periodWorkflow makes, in the organization, a JPK_V7M filing whose one step posts to the
// input's period for its client (postsToPeriod), against vatGateway, never retried.
func periodWorkflow(t *testing.T, a *app, org string) *models.Workflow {
	t.Helper()
	gw := vatGateway(t)
	def := fmt.Sprintf(`{"name": "JPK_V7M", "settings": {"subject": "{{ input.client }} · {{ input.period }}", "client": "{{ input.client }}",
	  "period": "{{ input.period }}", "retryPolicy": {"maxRetries": 0}},
	  "steps": [{"id": "file", "name": "Wyślij deklarację", "type": "http", "postsToPeriod": true,
	    "config": {"method": "POST", "url": "%s/vat", "body": {"nip": "{{ input.nip }}", "period": "{{ input.period }}"}}}]}`, gw.URL)
	wf, err := a.wfs.Create(context.Background(), org, actorSystem, []byte(def))
	if err != nil {
		t.Fatal(err)
	}
	return wf
}

func TestDLQItemInClosedPeriod(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		ctx := context.Background()
		a := newApp(t, db)
		rs := a.recoverySetup("Biuro Okres Zamknięty")
		wf := periodWorkflow(t, a, rs.org)
		rs.wf = wf.ID
		r := do(t, http.DefaultClient, "POST", a.srv.URL+"/api/v1/workflows/"+wf.ID+"/executions",
			`{"input": {"client": "5260001246", "period": "2026-09", "nip": "526"}}`, bearer(rs.token))
		if r.status != http.StatusCreated {
			t.Fatalf("start: %d %s", r.status, r.body)
		}
		exID := r.json(t)["id"].(string)
		var dlID string
		for deadline := time.Now().Add(15 * time.Second); dlID == ""; {
			var dl models.DeadLetter
			if err := db.Conn(ctx).Where("execution_id = ?", exID).First(&dl).Error; err == nil {
				dlID = dl.ID
			} else if time.Now().After(deadline) {
				t.Fatal("no dead letter")
			} else {
				time.Sleep(50 * time.Millisecond)
			}
		}
		item := a.srv.URL + "/dlq/" + dlID

		// Open: no notice.
		acc, accCSRF := a.browser(rs.accountant)
		if doc := parseListDoc(t, do(t, acc, "GET", item, "", nil).body); len(doc.testID("period-closed")) != 0 {
			t.Errorf("a notice while the period is open")
		}
		r = do(t, http.DefaultClient, "POST", a.srv.URL+"/api/v1/periods/closed", `{"period": "2026-09", "client": "5260001246", "note": "JPK wysłany"}`,
			map[string]string{"Authorization": "Bearer " + rs.token, "Content-Type": "application/json"})
		if r.status != http.StatusCreated {
			t.Fatalf("close: %d %s", r.status, r.body)
		}

		r = do(t, acc, "GET", item, "", map[string]string{"Accept-Language": "pl"})
		doc := parseListDoc(t, r.body)
		notice := doc.testID("period-closed")
		if len(notice) != 1 {
			t.Fatalf("no closed-period notice: %.400s", r.body)
		}
		n := notice[0]
		if txt := n.text(); !strings.Contains(txt, "Okres 2026-09 jest zamknięty dla klienta 5260001246") || !strings.Contains(txt, "API token ci") || len(n.testID("period-closed-at")) != 1 {
			t.Errorf("notice: %s", txt)
		}
		for id, want := range map[string]int{"period-closed-edit": 1, "period-closed-ask": 1, "period-closed-settle": 1, "period-closed-reopen": 0} {
			if got := len(n.testID(id)); got != want {
				t.Errorf("accountant: %s ×%d, want %d", id, got, want)
			}
		}
		if len(doc.testID("edit-input")) != 1 || len(doc.testID("form-ask")) != 1 || len(doc.testID("form-settle")) != 1 {
			t.Errorf("the offered forms are not on the page")
		}
		admin, _ := a.browser(rs.tenant)
		doc = parseListDoc(t, do(t, admin, "GET", item, "", nil).body)
		if n := doc.testID("period-closed"); len(n) != 1 || len(n[0].testID("period-closed-reopen")) != 1 || len(n[0].testID("period-closed-ask")) != 0 ||
			!strings.HasPrefix(n[0].testID("period-closed-reopen")[0].attr("href"), "/settings/periods#period-") {
			t.Errorf("admin's notice: %v", n)
		}

		// The page's retry: 409, the refusal over the form, in Polish, with the notice.
		body, hdr := formPost(accCSRF, url.Values{"action": {"retry"}})
		hdr["Accept-Language"] = "pl"
		r = do(t, acc, "POST", a.srv.URL+"/dlq/"+dlID+"/actions", body, hdr)
		if doc := parseListDoc(t, r.body); r.status != http.StatusConflict || !strings.Contains(r.body, "ponowienie wykonałoby krok") || len(doc.testID("period-closed")) != 1 {
			t.Errorf("the page's retry: %d %.500s", r.status, r.body)
		}
		actions := a.srv.URL + "/api/v1/dlq/" + dlID + "/actions"
		h := map[string]string{"Authorization": "Bearer " + rs.accountantToken, "Content-Type": "application/json"}
		r = do(t, http.DefaultClient, "POST", actions, `{"action": "retry"}`, h)
		e, _ := r.json(t)["error"].(map[string]any)
		if r.status != http.StatusConflict || e["code"] != "period_closed" || !strings.Contains(fmt.Sprint(e["message"]), "2026-09") {
			t.Fatalf("retry into the closed period: %d %s", r.status, r.body)
		}
		if st := a.dlqStatus(rs.token, dlID); st["status"] != models.DLQPending {
			t.Errorf("after the refusal: %v", st["status"])
		}
		r = do(t, http.DefaultClient, "POST", actions,
			`{"action": "retry_modified", "modifiedInput": {"client": "5260001246", "period": "2026-10", "nip": "5260001246"}, "resolutionNotes": "korekta w październiku"}`, h)
		if r.status >= 300 {
			t.Fatalf("edited retry: %d %s", r.status, r.body)
		}
		if st := a.dlqStatus(rs.token, dlID); st["status"] != models.DLQResolved || st["period"] != "2026-10" {
			t.Errorf("edited retry: %v period %v", st["status"], st["period"])
		}
	})
}
