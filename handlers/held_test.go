package handlers_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"lifeline/models"
	"lifeline/models/modeltest"
	"lifeline/services/engine"
)

// invoiceService is a real HTTP receiver on loopback: it counts every call and refuses
// every invoice (400) until switched on.
func invoiceService(t testing.TB) (*httptest.Server, *atomic.Int64, *atomic.Bool) {
	var calls atomic.Int64
	var on atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		w.Header().Set("Content-Type", "application/json")
		if on.Load() {
			fmt.Fprint(w, `{"ok": true}`)
			return
		}
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprint(w, `{"error": "validation", "message": "Faktura ma zdublowaną pozycję"}`)
	}))
	t.Cleanup(srv.Close)
	return srv, &calls, &on
}

// deadLetterOf starts an execution of wf with input and waits for its dead letter.
func (a *app) deadLetterOf(org, wf, input string) models.DeadLetter {
	a.t.Helper()
	ctx := context.Background()
	ex, _, err := a.eng.Start(ctx, engine.StartRequest{OrganizationID: org, WorkflowID: wf, Input: []byte(input)})
	if err != nil {
		a.t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		var dl models.DeadLetter
		if err := a.db.Conn(ctx).Where("execution_id = ?", ex.ID).First(&dl).Error; err == nil {
			return dl
		} else if time.Now().After(deadline) {
			a.t.Fatalf("execution %s has no dead letter", ex.ID)
		}
	}
}

// TestQuarantine: an invoice number that failed three times is flagged on its item's and
// its group's pages (admins get the quarantine form, accountants are told an admin can);
// an admin quarantines it with a note; a new execution carrying it is dead-lettered as
// quarantined (the reason names the value and the admin) with no call made, and a retry of
// it while held comes back the same way; after release a retry calls the service and
// succeeds. The API lists, quarantines (422 with field messages, 409 twice) and releases;
// accountants and viewers get 403 on both actions; another organization's hold is 404;
// both changes are audited.
func TestQuarantine(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		a := newApp(t, db)
		rs := a.recoverySetup("Biuro Kwarantanna")
		other := a.tenant("Biuro Obce Kwarantanna")
		svc, calls, on := invoiceService(t)
		ctx := context.Background()
		wf, err := a.wfs.Create(ctx, rs.org, actorSystem, fmt.Appendf(nil, `{"name": "Faktury", "settings": {"subject": "{{ input.client }}", "retryPolicy": {"maxRetries": 0}},
		  "steps": [{"id": "post", "type": "http", "config": {"method": "POST", "url": "%s/post", "body": {"invoice": "{{ input.invoice }}"}}}]}`, svc.URL))
		if err != nil {
			t.Fatal(err)
		}
		const invoice = "FV/2026/10/77"
		input := func(client string) string {
			return fmt.Sprintf(`{"client": %q, "invoice": %q, "apiToken": "tok-s3cret-1"}`, client, invoice)
		}
		var items []models.DeadLetter
		for _, c := range []string{"Kowalski", "Nowak", "Wiśniewski"} {
			items = append(items, a.deadLetterOf(rs.org, wf.ID, input(c)))
		}
		if n := calls.Load(); n != 3 {
			t.Fatalf("calls before the quarantine: %d", n)
		}
		item := items[0]
		itemPath := "/dlq/" + item.ID

		// The flag: admins may quarantine; accountants see it and are told an admin can.
		admin, adminCSRF := a.browser(rs.tenant)
		page := do(t, admin, "GET", a.srv.URL+itemPath, "", nil)
		search := `href="/dlq/items?q=` + url.QueryEscape(invoice) + `"`
		if page.status != 200 || !strings.Contains(page.body, `data-testid="poison-flag" data-value="`+invoice+`" data-held="false"`) ||
			!strings.Contains(page.body, "This document has failed 3 times in 1 workflow.") || !strings.Contains(page.body, `data-testid="poison-hold"`) ||
			!strings.Contains(page.body, search) {
			t.Fatalf("item page's flag (admin): %d %s", page.status, page.body)
		}
		acc, _ := a.browser(rs.accountant)
		page = do(t, acc, "GET", a.srv.URL+itemPath, "", nil)
		if !strings.Contains(page.body, `data-testid="poison-flag"`) || strings.Contains(page.body, `data-testid="poison-hold"`) ||
			!strings.Contains(page.body, `data-testid="poison-admin-only"`) {
			t.Errorf("item page's flag (accountant): %s", page.body)
		}
		if item.GroupID == nil {
			t.Fatal("the item has no group")
		}
		page = do(t, admin, "GET", a.srv.URL+"/dlq/groups/"+*item.GroupID, "", nil)
		if page.status != 200 || !strings.Contains(page.body, `data-testid="poison-flag" data-value="`+invoice+`"`) || !strings.Contains(page.body, `data-testid="poison-hold"`) {
			t.Errorf("group page's flag: %d %s", page.status, page.body)
		}

		// Quarantine from the item's flag: back on the item, held, with Release.
		form := url.Values{"_csrf": {adminCSRF}, "value": {invoice}, "note": {"Zdublowana pozycja w systemie źródłowym"}, "back": {itemPath}}
		r := do(t, admin, "POST", a.srv.URL+"/settings/quarantine", form.Encode(), map[string]string{"Content-Type": "application/x-www-form-urlencoded"})
		if r.status != http.StatusSeeOther || r.header.Get("Location") != itemPath {
			t.Fatalf("quarantine from the flag: %d %s %s", r.status, r.header.Get("Location"), r.body)
		}
		page = do(t, admin, "GET", a.srv.URL+itemPath, "", nil)
		if !strings.Contains(page.body, `data-held="true"`) || !strings.Contains(page.body, `data-testid="poison-release"`) ||
			!strings.Contains(page.body, "Zdublowana pozycja w systemie źródłowym") {
			t.Errorf("item page once held: %s", page.body)
		}

		get := func(token, path string) resp {
			return do(t, http.DefaultClient, "GET", a.srv.URL+path, "", bearer(token))
		}
		post := func(token, path, body string) resp {
			h := bearer(token)
			h["Content-Type"] = "application/json"
			return do(t, http.DefaultClient, "POST", a.srv.URL+path, body, h)
		}
		r = get(rs.viewerToken, "/api/v1/quarantine")
		list, _ := r.json(t)["items"].([]any)
		if r.status != 200 || len(list) != 1 || list[0].(map[string]any)["value"] != invoice || list[0].(map[string]any)["heldBy"] != rs.email {
			t.Fatalf("list (viewer): %d %s", r.status, r.body)
		}
		holdID := list[0].(map[string]any)["id"].(string)
		if r := get(other.token, "/api/v1/quarantine"); len(r.json(t)["items"].([]any)) != 0 {
			t.Errorf("another organization lists: %s", r.body)
		}

		// A new execution carrying it: straight to the DLQ, nothing called.
		held := a.deadLetterOf(rs.org, wf.ID, input("Zielińska"))
		var rec models.ExecutionError
		if err := db.Conn(ctx).Where("id = ?", held.ErrorID).First(&rec).Error; err != nil {
			t.Fatal(err)
		}
		if n := calls.Load(); n != 3 {
			t.Errorf("a quarantined execution called the service: %d calls", n)
		}
		if rec.ErrorCode == nil || *rec.ErrorCode != engine.CodeQuarantined || held.ErrorType != "validation" || held.GroupID == nil ||
			!strings.Contains(held.Reason, invoice) || !strings.Contains(held.Reason, rs.email) || held.Status != models.DLQPending {
			t.Errorf("the quarantined dead letter: code %v, %+v", rec.ErrorCode, held)
		}
		// Its retry while held comes straight back.
		if r := post(rs.token, "/api/v1/dlq/"+held.ID+"/actions", `{"action": "retry"}`); r.status >= 300 {
			t.Fatalf("retry while held: %d %s", r.status, r.body)
		}
		if st := a.dlqStatus(rs.token, held.ID); st["status"] != models.DLQPending {
			t.Errorf("retried while held: %v", st)
		}
		if n := calls.Load(); n != 3 {
			t.Errorf("a retry while held called the service: %d calls", n)
		}

		// The API: bad input, twice, roles, tenancy.
		for _, c := range []struct {
			name, token, body string
			status            int
			fields            []string
		}{
			{"accountant", rs.accountantToken, `{"value": "FV/2026/10/78", "note": "x"}`, 403, nil},
			{"viewer", rs.viewerToken, `{"value": "FV/2026/10/78", "note": "x"}`, 403, nil},
			{"empty", rs.token, `{"value": "", "note": " "}`, 422, []string{"value", "note"}},
			{"not an identifier", rs.token, `{"value": "Kowalski", "note": "x"}`, 422, []string{"value"}},
			{"unknown field", rs.token, `{"value": "FV/2026/10/78", "note": "x", "force": true}`, 422, []string{"body"}},
			{"twice", rs.token, `{"value": "fv/2026/10/77", "note": "again"}`, 409, nil},
		} {
			r := post(c.token, "/api/v1/quarantine", c.body)
			if r.status != c.status {
				t.Errorf("%s: %d %s", c.name, r.status, r.body)
				continue
			}
			e, _ := r.json(t)["error"].(map[string]any)
			fields, _ := e["fields"].(map[string]any)
			for _, f := range c.fields {
				if fields[f] == nil {
					t.Errorf("%s: no message for %s: %s", c.name, f, r.body)
				}
			}
		}
		var n int64
		db.Conn(ctx).Model(&models.HeldValue{}).Where("organization_id = ?", rs.org).Count(&n)
		if n != 1 {
			t.Errorf("refused holds wrote rows: %d", n)
		}
		for _, c := range []struct {
			name, token string
			status      int
		}{{"accountant", rs.accountantToken, 403}, {"viewer", rs.viewerToken, 403}, {"another organization", other.token, 404}} {
			if r := post(c.token, "/api/v1/quarantine/"+holdID+"/release", `{}`); r.status != c.status {
				t.Errorf("release by %s: %d %s", c.name, r.status, r.body)
			}
		}

		// Released: a retry calls the service and succeeds.
		on.Store(true)
		r = post(rs.token, "/api/v1/quarantine/"+holdID+"/release", `{}`)
		if r.status != 200 || r.json(t)["releasedAt"] == nil {
			t.Fatalf("release: %d %s", r.status, r.body)
		}
		if r := post(rs.token, "/api/v1/quarantine/"+holdID+"/release", `{}`); r.status != 409 {
			t.Errorf("released twice: %d %s", r.status, r.body)
		}
		if r := get(rs.token, "/api/v1/quarantine"); len(r.json(t)["items"].([]any)) != 0 {
			t.Errorf("listed after release: %s", r.body)
		}
		if r := post(rs.token, "/api/v1/dlq/"+held.ID+"/actions", `{"action": "retry"}`); r.status >= 300 {
			t.Fatalf("retry after release: %d %s", r.status, r.body)
		}
		if st := a.dlqStatus(rs.token, held.ID); st["status"] != models.DLQResolved {
			t.Errorf("retried after release: %v", st)
		}
		if n := calls.Load(); n != 4 {
			t.Errorf("calls after release and retry: %d, want 4", n)
		}

		var actions []string
		db.Conn(ctx).Model(&models.AuditEntry{}).Where("organization_id = ? AND entity_id = ?", rs.org, holdID).Order("created_at, action").Pluck("action", &actions)
		if strings.Join(actions, ",") != "poison.quarantined,poison.released" {
			t.Errorf("audit of the hold: %v", actions)
		}
	})
}
