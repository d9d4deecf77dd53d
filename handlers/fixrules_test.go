package handlers_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"

	"lifeline/models"
	"lifeline/models/modeltest"
	"lifeline/services/engine"
	"lifeline/services/notify/email"

	"golang.org/x/net/html"
)

// inbox counts the in-app notifications of kind for the organization's users of role.
func (a *app) inbox(org, role, kind string) int64 {
	a.t.Helper()
	var n int64
	if err := a.db.Conn(context.Background()).Model(&models.Notification{}).
		Joins("JOIN memberships m ON m.user_id = notifications.user_id AND m.organization_id = notifications.organization_id").
		Where("notifications.organization_id = ? AND m.role = ? AND notifications.kind = ?", org, role, kind).Count(&n).Error; err != nil {
		a.t.Fatal(err)
	}
	return n
}

// postForm posts a page form with the CSRF token.
func postForm(t *testing.T, c *http.Client, csrf, u string, v url.Values) resp {
	t.Helper()
	v.Set("_csrf", csrf)
	return do(t, c, "POST", u, v.Encode(), map[string]string{"Content-Type": "application/x-www-form-urlencoded"})
}

// TestAccountantRules: by default an accountant edits the input and retries, skips the
// failed step and closes items (with notes); when the organization turns that off, she is
// refused (403, in bulk too), the page offers "ask an admin" instead, and she still retries.
// Asking lands one entry in the admin's inbox, once while the ask is open. Both databases.
func TestAccountantRules(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		a := newApp(t, db)
		rs := a.recoverySetup("Biuro Zasad")
		other := a.tenant("Inne Biuro Zasad")
		api := func(method, path, token, body string) resp {
			return do(t, http.DefaultClient, method, a.srv.URL+path, body, bearer(token))
		}
		fixed := `{"action": "retry_modified", "modifiedInput": {"client": "K", "period": "2026-10", "nip": "5260250274", "apiToken": "[REDACTED]"}}`

		// On by default: edit and retry, close, skip the step.
		_, dl1 := a.failed(rs, "Kowalski")
		if r := api("POST", "/api/v1/dlq/"+dl1+"/actions", rs.accountantToken, fixed); r.status != http.StatusAccepted {
			t.Fatalf("default: accountant edit and retry: %d %s", r.status, r.body)
		}
		_, dl2 := a.failed(rs, "Nowak")
		if r := api("POST", "/api/v1/dlq/"+dl2+"/actions", rs.accountantToken, `{"action": "resolve", "resolutionNotes": "Klient zapłacił"}`); r.status != http.StatusOK {
			t.Fatalf("default: accountant resolves: %d %s", r.status, r.body)
		}
		acc, accCSRF := a.browser(rs.accountant)
		_, dl3 := a.failed(rs, "Wiśniewski")
		if r := postForm(t, acc, accCSRF, a.srv.URL+"/dlq/"+dl3+"/actions", url.Values{"action": {"skip_step"}, "notes": {"Złożono ręcznie"}}); r.status != http.StatusSeeOther {
			t.Fatalf("default: accountant skips the step: %d %.400s", r.status, r.body)
		}

		// The setting: admins only, both ways; bad values are 422 with the field named.
		if r := api("GET", "/api/v1/organization/settings", rs.token, ""); r.status != 200 || r.json(t)["accountantsMayFix"] != true {
			t.Fatalf("settings: %d %s", r.status, r.body)
		}
		for _, c := range []struct{ body, field string }{{`{"accountantsMayFix": "no"}`, "accountantsMayFix"}, {`{"accountantsMayFix": null}`, "accountantsMayFix"}, {`{"colour": true}`, "colour"}} {
			if r := api("PATCH", "/api/v1/organization/settings", rs.token, c.body); r.status != 422 || fieldsOf(t, r)[c.field] == nil {
				t.Errorf("PATCH %s: %d %s", c.body, r.status, r.body)
			}
		}
		if r := api("PATCH", "/api/v1/organization/settings", rs.accountantToken, `{"accountantsMayFix": false}`); r.status != 403 {
			t.Errorf("accountant changes the rule: %d", r.status)
		}
		if r := api("PATCH", "/api/v1/organization/settings", rs.token, `{"accountantsMayFix": false}`); r.status != 200 || r.json(t)["accountantsMayFix"] != false {
			t.Fatalf("turn off: %d %s", r.status, r.body)
		}
		if r := api("GET", "/api/v1/organization/settings", other.token, ""); r.json(t)["accountantsMayFix"] != true {
			t.Errorf("another organization's rule changed: %s", r.body)
		}

		// Off: edit, close and skip are refused to the accountant, nothing changes; retry runs.
		_, dl4 := a.failed(rs, "Zielińska")
		for _, body := range []string{fixed, `{"action": "resolve", "resolutionNotes": "x"}`, `{"action": "skip", "resolutionNotes": "x"}`} {
			if r := api("POST", "/api/v1/dlq/"+dl4+"/actions", rs.accountantToken, body); r.status != 403 {
				t.Errorf("off: accountant %s: %d %s", body, r.status, r.body)
			}
		}
		if r := postForm(t, acc, accCSRF, a.srv.URL+"/dlq/"+dl4+"/actions", url.Values{"action": {"skip_step"}, "notes": {"x"}}); r.status != 403 ||
			!strings.Contains(r.body, "Only an admin") && !strings.Contains(r.body, "tylko administrator") {
			t.Errorf("off: accountant skips the step from the page: %d", r.status)
		}
		if r := api("POST", "/api/v1/dlq/bulk", rs.accountantToken, `{"action": "resolve", "ids": ["`+dl4+`"], "resolutionNotes": "x"}`); r.status != 403 {
			t.Errorf("off: accountant resolves in bulk: %d %s", r.status, r.body)
		}
		if m := a.dlqStatus(rs.token, dl4); m["status"] != models.DLQPending || m["manualRetryCount"] != 0.0 {
			t.Fatalf("refused actions changed the item: %v", m)
		}
		if r := api("POST", "/api/v1/dlq/"+dl4+"/actions", rs.accountantToken, `{"action": "retry"}`); r.status != http.StatusAccepted {
			t.Errorf("off: accountant retries: %d %s", r.status, r.body)
		}
		a.dlqStatus(rs.token, dl4)
		if r := api("POST", "/api/v1/dlq/"+dl4+"/actions", rs.token, `{"action": "resolve"}`); r.status != http.StatusOK {
			t.Errorf("off: the admin still closes items: %d %s", r.status, r.body)
		}
		_, dl5 := a.failed(rs, "Lewandowska")
		page := do(t, acc, "GET", a.srv.URL+"/dlq/"+dl5, "", nil).body
		for _, want := range []string{`data-testid="admin-only"`, `data-testid="form-ask"`, `data-testid="form-retry"`} {
			if !strings.Contains(page, want) {
				t.Errorf("off: the accountant's page has no %s", want)
			}
		}
		for _, unwanted := range []string{`data-testid="form-edit"`, `data-testid="form-settle"`, `data-testid="form-skip-step"`} {
			if strings.Contains(page, unwanted) {
				t.Errorf("off: the accountant's page offers %s", unwanted)
			}
		}

		// Ask an admin: one inbox entry per admin, once while the ask is open.
		if n := a.inbox(rs.org, models.RoleAdmin, "admin_request"); n != 0 {
			t.Fatalf("inbox before asking: %d", n)
		}
		r := postForm(t, acc, accCSRF, a.srv.URL+"/dlq/"+dl5+"/ask", url.Values{"note": {"Proszę poprawić NIP"}})
		if r.status != 200 || !strings.Contains(r.body, `data-testid="ask-notice"`) {
			t.Fatalf("ask: %d %.300s", r.status, r.body)
		}
		if n := a.inbox(rs.org, models.RoleAdmin, "admin_request"); n != 1 {
			t.Fatalf("admin inbox after asking: %d entries, want 1", n)
		}
		r = postForm(t, acc, accCSRF, a.srv.URL+"/dlq/"+dl5+"/ask", url.Values{})
		if r.status != 200 || !strings.Contains(r.body, "already asked") && !strings.Contains(r.body, "Już poproszono") {
			t.Errorf("second ask does not say it was asked already: %d", r.status)
		}
		if ar := api("POST", "/api/v1/dlq/"+dl5+"/ask", rs.accountantToken, `{}`); ar.status != 200 || ar.json(t)["already"] != true {
			t.Errorf("API ask while one is open: %d %s", ar.status, ar.body)
		}
		if n := a.inbox(rs.org, models.RoleAdmin, "admin_request"); n != 1 {
			t.Errorf("asking again added inbox entries: %d", n)
		}
		if ar := api("POST", "/api/v1/dlq/"+dl5+"/ask", other.token, `{}`); ar.status != 404 {
			t.Errorf("another organization asks: %d", ar.status)
		}
		if ar := api("POST", "/api/v1/dlq/"+dl5+"/ask", rs.viewerToken, `{}`); ar.status != 403 {
			t.Errorf("a viewer asks: %d", ar.status)
		}
	})
}

// moneySetup adds a VAT workflow that moves money to rs.
func (a *app) moneyWorkflow(rs *recoverySetup) string {
	a.t.Helper()
	gw := vatGateway(a.t)
	def := fmt.Sprintf(`{"name": "Przelew", "settings": {"movesMoney": true, "subject": "{{ input.client }}", "retryPolicy": {"maxRetries": 0}},
	  "steps": [{"id": "pay", "name": "Zleć przelew", "type": "http", "config": {"method": "POST", "url": "%s/vat", "body": {"nip": "{{ input.nip }}", "token": "{{ input.apiToken }}"}}}]}`, gw.URL)
	wf, err := a.wfs.Create(context.Background(), rs.org, actorSystem, []byte(def))
	if err != nil {
		a.t.Fatal(err)
	}
	return wf.ID
}

// TestMoneyApproval: on a workflow that moves money an accountant's edited input waits as a
// request (nothing runs); the admin approves it (the replay runs) or rejects it with a note;
// a second approval, or one after a rejection, is 409; of two admins approving at once
// exactly one wins. Both databases.
func TestMoneyApproval(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		a := newApp(t, db)
		rs := a.recoverySetup("Biuro Przelewów")
		other := a.tenant("Inne Biuro Przelewów")
		rs.wf = a.moneyWorkflow(rs)
		api := func(method, path, token, body string) resp {
			return do(t, http.DefaultClient, method, a.srv.URL+path, body, bearer(token))
		}
		edit := `{"action": "retry_modified", "modifiedInput": {"client": "K", "period": "2026-10", "nip": "5260250274", "apiToken": "[REDACTED]"}, "resolutionNotes": "NIP z faktury"}`
		request := func(dl string) string {
			t.Helper()
			r := api("POST", "/api/v1/dlq/"+dl+"/actions", rs.accountantToken, edit)
			if r.status != http.StatusAccepted || r.json(t)["status"] != "awaiting_approval" {
				t.Fatalf("accountant's edit: %d %s", r.status, r.body)
			}
			return r.json(t)["requestId"].(string)
		}

		_, dl := a.failed(rs, "Kowalski")
		req := request(dl)
		if m := a.dlqStatus(rs.token, dl); m["status"] != models.DLQPending || m["manualRetryCount"] != 0.0 {
			t.Fatalf("the request ran the replay: %v", m)
		}
		ch := api("GET", "/api/v1/dlq/"+dl+"/changes", rs.accountantToken, "")
		if ch.status != 200 || !strings.Contains(ch.body, `"status":"pending"`) || !strings.Contains(ch.body, `"path":"nip"`) || strings.Contains(ch.body, "tok-s3cret-1") {
			t.Fatalf("changes: %d %s", ch.status, ch.body)
		}
		if n := a.inbox(rs.org, models.RoleAdmin, "input_change"); n != 1 {
			t.Errorf("admin inbox: %d entries, want 1", n)
		}
		admin, adminCSRF := a.browser(rs.tenant)
		if page := do(t, admin, "GET", a.srv.URL+"/dlq/"+dl, "", nil).body; !strings.Contains(page, `data-testid="form-approve"`) || !strings.Contains(page, `data-testid="change-diff-line"`) {
			t.Error("the admin's item page has no approval form with the diff")
		}
		approve := "/api/v1/dlq/" + dl + "/changes/" + req + "/approve"
		if r := api("POST", approve, rs.accountantToken, `{}`); r.status != 403 {
			t.Errorf("accountant approves: %d", r.status)
		}
		if r := api("POST", "/api/v1/dlq/"+dl+"/changes/"+req+"/approve", other.token, `{}`); r.status != 404 {
			t.Errorf("another organization approves: %d", r.status)
		}
		if r := api("POST", approve, rs.token, `{"notes": "OK"}`); r.status != http.StatusAccepted {
			t.Fatalf("approve: %d %s", r.status, r.body)
		}
		if m := a.dlqStatus(rs.token, dl); m["status"] != models.DLQResolved {
			t.Fatalf("after the approval the replay should succeed: %v", m)
		}
		if r := api("POST", approve, rs.token, `{}`); r.status != http.StatusConflict {
			t.Errorf("second approval: %d %s", r.status, r.body)
		}

		// Reject with a note: the item waits, the note is shown; approve after reject is 409.
		_, dl2 := a.failed(rs, "Nowak")
		req2 := request(dl2)
		reject := a.srv.URL + "/dlq/" + dl2 + "/changes/" + req2 + "/reject"
		if r := postForm(t, admin, adminCSRF, reject, url.Values{}); r.status != 422 {
			t.Errorf("reject without a note: %d", r.status)
		}
		if r := postForm(t, admin, adminCSRF, reject, url.Values{"notes": {"NIP nie zgadza się z umową"}}); r.status != http.StatusSeeOther {
			t.Fatalf("reject: %d %.300s", r.status, r.body)
		}
		if m := a.dlqStatus(rs.token, dl2); m["status"] != models.DLQPending {
			t.Errorf("after a rejection: %v", m)
		}
		acc, _ := a.browser(rs.accountant)
		if page := do(t, acc, "GET", a.srv.URL+"/dlq/"+dl2, "", nil).body; !strings.Contains(page, `data-status="rejected"`) || !strings.Contains(page, "NIP nie zgadza się z umową") {
			t.Error("the item page does not show the rejection and its note")
		}
		if r := api("POST", "/api/v1/dlq/"+dl2+"/changes/"+req2+"/approve", rs.token, `{}`); r.status != http.StatusConflict {
			t.Errorf("approve after reject: %d %s", r.status, r.body)
		}

		// Two admins approve at once: the first is held after reading the request, the second
		// approves, then the first goes on: exactly one wins.
		_, dl3 := a.failed(rs, "Wiśniewska")
		req3 := request(dl3)
		var once sync.Once
		entered, release := make(chan struct{}), make(chan struct{})
		a.eng.SetHooks(engine.Hooks{BeforeTx: func(transition, _ string) {
			if transition != engine.TransitionDecideInputChange {
				return
			}
			held := false
			once.Do(func() { held = true })
			if held {
				close(entered)
				<-release
			}
		}})
		defer a.eng.SetHooks(engine.Hooks{})
		first := make(chan resp, 1)
		path := "/api/v1/dlq/" + dl3 + "/changes/" + req3 + "/approve"
		go func() { first <- do(t, http.DefaultClient, "POST", a.srv.URL+path, `{}`, bearer(rs.token)) }()
		<-entered
		second := api("POST", path, rs.token, `{}`)
		close(release)
		held := <-first
		if second.status != http.StatusAccepted || held.status != http.StatusConflict {
			t.Errorf("two approvals at once: second %d, held first %d %s; want 202 and 409", second.status, held.status, held.body)
		}
		a.dlqStatus(rs.token, dl3)

		// An admin's own edit on such a workflow runs at once.
		_, dl4 := a.failed(rs, "Zając")
		if r := api("POST", "/api/v1/dlq/"+dl4+"/actions", rs.token, edit); r.status != http.StatusAccepted || r.json(t)["status"] != models.DLQProcessing {
			t.Errorf("admin's edit: %d %s", r.status, r.body)
		}
		a.dlqStatus(rs.token, dl4)
	})
}

// TestReopen: an admin reopens an item closed by hand, with a note, within its retention: it
// is pending again and its history keeps the closure; reopening twice, or an item a
// successful replay closed, is 409. Both databases.
func TestReopen(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		a := newApp(t, db)
		rs := a.recoverySetup("Biuro Ponowne")
		other := a.tenant("Inne Biuro Ponowne")
		api := func(method, path, token, body string) resp {
			return do(t, http.DefaultClient, method, a.srv.URL+path, body, bearer(token))
		}
		exID, dl := a.failed(rs, "Kowalski")
		if r := api("POST", "/api/v1/dlq/"+dl+"/actions", rs.token, `{"action": "skip", "resolutionNotes": "Złożono papierowo"}`); r.status != 200 {
			t.Fatalf("skip: %d %s", r.status, r.body)
		}
		admin, csrf := a.browser(rs.tenant)
		if page := do(t, admin, "GET", a.srv.URL+"/dlq/"+dl, "", nil).body; !strings.Contains(page, `data-testid="form-reopen"`) {
			t.Error("the closed item's page offers the admin no reopen")
		}
		reopen := "/api/v1/dlq/" + dl + "/reopen"
		if r := api("POST", reopen, rs.token, `{}`); r.status != 422 || fieldsOf(t, r)["notes"] == nil {
			t.Errorf("reopen without a note: %d %s", r.status, r.body)
		}
		if r := api("POST", reopen, rs.accountantToken, `{"notes": "x"}`); r.status != 403 {
			t.Errorf("accountant reopens: %d", r.status)
		}
		if r := api("POST", "/api/v1/dlq/"+dl+"/reopen", other.token, `{"notes": "x"}`); r.status != 404 {
			t.Errorf("another organization reopens: %d", r.status)
		}
		if r := postForm(t, admin, csrf, a.srv.URL+"/dlq/"+dl+"/reopen", url.Values{"notes": {"Klient jednak chce wysyłki"}}); r.status != http.StatusSeeOther {
			t.Fatalf("reopen: %d %.300s", r.status, r.body)
		}
		item := api("GET", "/api/v1/dlq/"+dl, rs.token, "").json(t)
		if item["status"] != models.DLQPending {
			t.Fatalf("after reopening: %v", item["status"])
		}
		var events []string
		for _, h := range item["history"].([]any) {
			events = append(events, h.(map[string]any)["event"].(string))
		}
		if s := strings.Join(events, " "); !strings.Contains(s, "dlq.skipped dlq.reopened") {
			t.Errorf("history %v: want the closure, then the reopening", events)
		}
		if ex := api("GET", "/api/v1/executions/"+exID, rs.token, "").json(t); ex["status"] != models.ExecDLQPending {
			t.Errorf("the execution after reopening: %v", ex["status"])
		}
		// Its group, resolved when the item was skipped, is open again and says why.
		group := api("GET", "/api/v1/dlq/groups/"+item["groupId"].(string), rs.token, "").json(t)
		if counts, _ := group["counts"].(map[string]any); group["state"] != models.GroupOpen || group["reopenCause"] != models.GroupReopenedByItem ||
			group["resolvedBefore"] == nil || counts["pending"] != 1.0 || counts["closed"] != 0.0 {
			t.Errorf("the reopened item's group: %v", group)
		}
		problems := parseListDoc(t, do(t, admin, "GET", a.srv.URL+"/dlq", "", nil).body)
		var why []string
		for _, p := range problems.testID("problem-cameback") {
			why = append(why, p.text())
		}
		if len(why) != 1 || !strings.Contains(why[0], "an admin reopened one of its items closed by hand") {
			t.Errorf("the Problems page does not say the group is open again because an item was reopened: %q", why)
		}
		if r := api("POST", reopen, rs.token, `{"notes": "again"}`); r.status != 409 {
			t.Errorf("reopen twice: %d", r.status)
		}
		// The reopened item is fixed like any other; closed by that replay, it stays closed.
		if r := api("POST", "/api/v1/dlq/"+dl+"/actions", rs.token, `{"action": "retry_modified", "modifiedInput": {"client": "K", "period": "2026-10", "nip": "5260250274", "apiToken": "[REDACTED]"}}`); r.status != 202 {
			t.Fatalf("retry after reopening: %d %s", r.status, r.body)
		}
		if m := a.dlqStatus(rs.token, dl); m["status"] != models.DLQResolved {
			t.Fatalf("replay: %v", m)
		}
		if r := api("POST", reopen, rs.token, `{"notes": "x"}`); r.status != 409 || !strings.Contains(r.body, "replay") {
			t.Errorf("reopen an item a replay closed: %d %s", r.status, r.body)
		}
	})
}

// TestDecisionToldToRequester: when an admin approves or rejects an accountant's input
// change on a workflow that moves money, the accountant who asked (and no one else) gets an
// inbox entry in her language with the admin's note and a link to the item, and an email
// (the settings' channels include email); with email off in the settings, only the inbox.
// Both databases.
func TestDecisionToldToRequester(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		ca := newCanaryApp(t, db, io.Discard)
		a, ctx := ca.app, context.Background()
		rs := a.recoverySetup("Biuro Decyzji")
		rs.wf = a.moneyWorkflow(rs)
		setLang := func(lang string) {
			t.Helper()
			if err := db.Conn(ctx).Model(&models.User{}).Where("LOWER(email) = ?", strings.ToLower(rs.accountant.email)).Update("language", lang).Error; err != nil {
				t.Fatal(err)
			}
		}
		setLang("pl")
		acc, accCSRF := a.browser(rs.accountant)
		admin, adminCSRF := a.browser(rs.tenant)
		edited := `{"client": "K", "period": "2026-10", "nip": "5260250274", "apiToken": "[REDACTED]"}`
		// request: the accountant edits the input on the page; it waits as a request.
		request := func(dl string) string {
			t.Helper()
			if r := postForm(t, acc, accCSRF, a.srv.URL+"/dlq/"+dl+"/actions", url.Values{"action": {"edit"}, "input": {edited}}); r.status != http.StatusSeeOther {
				t.Fatalf("accountant's edit: %d %.300s", r.status, r.body)
			}
			var ch models.InputChangeRequest
			if err := db.Conn(ctx).Where("dead_letter_id = ? AND status = ?", dl, models.ChangePending).First(&ch).Error; err != nil {
				t.Fatal(err)
			}
			return ch.ID
		}
		dispatch := func() {
			t.Helper()
			if _, err := ca.ns.Dispatch(ctx); err != nil {
				t.Fatal(err)
			}
		}
		mailsTo := func(to string) []email.Read {
			var out []email.Read
			for _, m := range ca.sink.Messages() {
				if r := m.Read(); strings.EqualFold(r.To, to) {
					out = append(out, r)
				}
			}
			return out
		}
		entries := func(c *http.Client) []listDoc {
			return parseListDoc(t, do(t, c, "GET", a.srv.URL+"/notifications", "", nil).body).testID("notify-item")
		}
		decided := func(c *http.Client, kind string) []listDoc {
			var out []listDoc
			for _, it := range entries(c) {
				if len(it.testID("notify-kind")) == 1 && strings.Contains(it.testID("notify-kind")[0].text(), kind) {
					out = append(out, it)
				}
			}
			return out
		}

		// Approved: in Polish (the organization's language), with the note and a link.
		_, dl := a.failed(rs, "Kowalski")
		req := request(dl)
		dispatch()
		before := len(mailsTo(rs.accountant.email))
		if r := postForm(t, admin, adminCSRF, a.srv.URL+"/dlq/"+dl+"/changes/"+req+"/approve", url.Values{"notes": {"Zgodne z umową"}}); r.status != http.StatusSeeOther {
			t.Fatalf("approve: %d %.300s", r.status, r.body)
		}
		dispatch()
		got := decided(acc, "Zmiana zatwierdzona")
		if len(got) != 1 || !strings.Contains(got[0].text(), "Zatwierdzono Twoją zmianę danych: Kowalski") ||
			!strings.Contains(got[0].text(), "Notatka administratora: Zgodne z umową") || !strings.Contains(got[0].text(), rs.tenant.email) {
			t.Fatalf("the accountant's inbox after the approval: %d entries %v", len(got), texts(entries(acc)))
		}
		// Unread, the link goes through "open" (which marks it read) to the item's page.
		if links := got[0].testID("notify-link"); len(links) != 1 || !strings.Contains(links[0].attr("href"), url.QueryEscape("/dlq/"+dl)) {
			t.Errorf("the entry does not link to the item /dlq/%s", dl)
		}
		if n := a.inbox(rs.org, models.RoleAdmin, "change_approved"); n != 0 {
			t.Errorf("the admins were told of their own decision: %d", n)
		}
		mails := mailsTo(rs.accountant.email)
		if len(mails) != before+1 || !strings.Contains(mails[len(mails)-1].Subject, "Zatwierdzono zmianę danych: Kowalski") ||
			!strings.Contains(mails[len(mails)-1].Text, "Zgodne z umową") || !strings.Contains(mails[len(mails)-1].Text, "http://lifeline.test/dlq/"+dl) {
			t.Fatalf("the accountant's emails: %d (before %d) %+v", len(mails), before, mails)
		}

		// Rejected, read in English (her own language now): the inbox says it in English.
		setLang("en")
		_, dl2 := a.failed(rs, "Nowak")
		req2 := request(dl2)
		dispatch()
		before = len(mailsTo(rs.accountant.email))
		if r := postForm(t, admin, adminCSRF, a.srv.URL+"/dlq/"+dl2+"/changes/"+req2+"/reject", url.Values{"notes": {"NIP nie zgadza się z umową"}}); r.status != http.StatusSeeOther {
			t.Fatalf("reject: %d %.300s", r.status, r.body)
		}
		dispatch()
		acc, accCSRF = a.browser(rs.accountant) // a new session reads her language
		got = decided(acc, "Change rejected")
		if len(got) != 1 || !strings.Contains(got[0].text(), "Your data change was rejected: Nowak") || !strings.Contains(got[0].text(), "NIP nie zgadza się z umową") {
			t.Fatalf("the accountant's inbox after the rejection: %d entries", len(got))
		}
		mails = mailsTo(rs.accountant.email)
		if len(mails) != before+1 || !strings.Contains(mails[len(mails)-1].Subject, "Data change rejected: Nowak") {
			t.Fatalf("the rejection's email: %d (before %d) %+v", len(mails), before, mails)
		}

		// Email off in the organization's settings: the inbox only.
		if _, err := ca.ns.SaveOrgSettings(ctx, rs.org, actorSystem, []byte(`{"channels": ["app"]}`)); err != nil {
			t.Fatal(err)
		}
		_, dl3 := a.failed(rs, "Zając")
		req3 := request(dl3)
		before = len(mailsTo(rs.accountant.email))
		if r := postForm(t, admin, adminCSRF, a.srv.URL+"/dlq/"+dl3+"/changes/"+req3+"/reject", url.Values{"notes": {"Nie"}}); r.status != http.StatusSeeOther {
			t.Fatalf("reject: %d", r.status)
		}
		dispatch()
		if n := len(mailsTo(rs.accountant.email)); n != before {
			t.Errorf("an email with email off: %d, want %d", n, before)
		}
		if got := decided(acc, "Change rejected"); len(got) != 2 {
			t.Errorf("inbox entries of rejections: %d, want 2", len(got))
		}
	})
}

// TestWorkflowMovesMoneyField: the workflow's page offers admins a "moves money" checkbox
// with its help; saving it makes a new version, audited with the setting's old and new
// value, and from then an accountant's edited input waits for an approval (and no longer
// once it is unticked). Accountants see the value in words and are refused the form (403);
// a value other than "true" is a 422 with the field's message and nothing stored; another
// organization's workflow is 404. Both databases.
func TestWorkflowMovesMoneyField(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		a := newApp(t, db)
		ctx := context.Background()
		rs := a.recoverySetup("Biuro Pieniędzy")
		other := a.tenant("Biuro Obce")
		admin, adminCSRF := a.browser(rs.tenant)
		acc, accCSRF := a.browser(rs.accountant)
		page := a.srv.URL + "/workflows/" + rs.wf
		save := page + "/money"
		version := func() int {
			t.Helper()
			wf, err := db.GetWorkflow(ctx, rs.org, rs.wf)
			if err != nil {
				t.Fatal(err)
			}
			return wf.Version
		}
		edit := `{"action": "retry_modified", "modifiedInput": {"client": "K", "period": "2026-10", "nip": "5260250274", "apiToken": "[REDACTED]"}, "resolutionNotes": "NIP"}`

		doc := parseListDoc(t, do(t, admin, "GET", page, "", nil).body)
		box := doc.byID("workflow-moves-money")
		if box == nil || hasAttr(box, "checked") || len(doc.testID("money-form")) != 1 ||
			!strings.Contains(doc.testID("money-card")[0].text(), "an accountant's change of the data waits for an admin's approval") {
			t.Fatal("the admin's page has no unticked \"moves money\" checkbox with its help")
		}
		if f := doc.formKey(t, "workflow-moves-money"); f != "movesMoney" {
			t.Fatalf("the checkbox sends %q", f)
		}
		accDoc := parseListDoc(t, do(t, acc, "GET", page, "", nil).body)
		if len(accDoc.testID("money-form")) != 0 || len(accDoc.testID("money-value")) != 1 || accDoc.testID("money-value")[0].attr("data-moves-money") != "false" {
			t.Error("the accountant's page: a form, or no value")
		}
		if r := postForm(t, acc, accCSRF, save, url.Values{"movesMoney": {"true"}}); r.status != http.StatusForbidden {
			t.Errorf("the accountant saves: %d", r.status)
		}
		v0 := version()
		if r := postForm(t, admin, adminCSRF, save, url.Values{"movesMoney": {"maybe"}}); r.status != http.StatusUnprocessableEntity ||
			len(parseListDoc(t, r.body).testID("field-error")) != 1 {
			t.Errorf("a bad value: %d", r.status)
		}
		if version() != v0 {
			t.Fatal("a refused form stored a version")
		}
		oc, ocCSRF := a.browser(other)
		if r := postForm(t, oc, ocCSRF, a.srv.URL+"/workflows/"+rs.wf+"/money", url.Values{"movesMoney": {"true"}}); r.status != http.StatusNotFound {
			t.Errorf("another organization's workflow: %d", r.status)
		}

		// Ticked: a new version, audited; the accountant's edit waits for an approval.
		r := postForm(t, admin, adminCSRF, save, url.Values{"movesMoney": {"true"}})
		if r.status != http.StatusSeeOther || version() != v0+1 {
			t.Fatalf("save: %d, version %d (was %d)", r.status, version(), v0)
		}
		doc = parseListDoc(t, do(t, admin, "GET", page+"?done=money", "", nil).body)
		if box := doc.byID("workflow-moves-money"); box == nil || !hasAttr(box, "checked") || len(doc.testID("money-saved")) != 1 {
			t.Error("the saved page does not show the box ticked")
		}
		var details []string
		if err := db.Conn(ctx).Raw("SELECT CAST(details AS TEXT) FROM audit_log WHERE organization_id = ? AND action = ? AND entity_id = ?",
			rs.org, "workflow.updated", rs.wf).Scan(&details).Error; err != nil {
			t.Fatal(err)
		}
		var entry struct {
			MovesMoney *struct{ From, To bool } `json:"movesMoney"`
		}
		if len(details) != 1 || json.Unmarshal([]byte(details[0]), &entry) != nil || entry.MovesMoney == nil || entry.MovesMoney.From || !entry.MovesMoney.To {
			t.Errorf("audit: %v", details)
		}
		_, dl := a.failed(rs, "Kowalski")
		if r := do(t, http.DefaultClient, "POST", a.srv.URL+"/api/v1/dlq/"+dl+"/actions", edit, bearer(rs.accountantToken)); r.status != http.StatusAccepted ||
			r.json(t)["status"] != "awaiting_approval" {
			t.Errorf("the accountant's edit on a money-moving workflow: %d %s", r.status, r.body)
		}
		// Saved again as it is: nothing stored.
		if r := postForm(t, admin, adminCSRF, save, url.Values{"movesMoney": {"true"}}); r.status != http.StatusSeeOther || version() != v0+1 {
			t.Errorf("an unchanged save: %d, version %d", r.status, version())
		}

		// Unticked (the box sends nothing): the accountant's edit runs at once.
		if r := postForm(t, admin, adminCSRF, save, url.Values{}); r.status != http.StatusSeeOther || version() != v0+2 {
			t.Fatalf("untick: %d, version %d", r.status, version())
		}
		_, dl2 := a.failed(rs, "Nowak")
		if r := do(t, http.DefaultClient, "POST", a.srv.URL+"/api/v1/dlq/"+dl2+"/actions", edit, bearer(rs.accountantToken)); r.status != http.StatusAccepted ||
			r.json(t)["status"] != models.DLQProcessing {
			t.Errorf("the accountant's edit once unticked: %d %s", r.status, r.body)
		}
		a.dlqStatus(rs.token, dl2)
	})
}

// TestBulkCloseAdminOnly: with the organization's rule off, the DLQ list's bulk bar, the
// Problems page and a group's page offer an accountant no resolve, skip or correction that
// would be refused: they say an admin can close, and the group's page asks an admin (one
// inbox entry per admin while the ask is open); the API still refuses a bulk or group close
// with 403 and a message that says why. Admins keep every action; with the rule on the
// accountant does too. Both databases.
func TestBulkCloseAdminOnly(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		a := newApp(t, db)
		ctx := context.Background()
		rs := a.recoverySetup("Biuro Zamykania")
		other := a.tenant("Biuro Obce Zamykania")
		_, dl := a.failed(rs, "Kowalski")
		var item models.DeadLetter
		if err := db.Conn(ctx).First(&item, "id = ?", dl).Error; err != nil || item.GroupID == nil {
			t.Fatalf("the item has no group: %v", err)
		}
		group := *item.GroupID
		acc, accCSRF := a.browser(rs.accountant)
		admin, _ := a.browser(rs.tenant)
		options := func(c *http.Client) []string {
			var out []string
			for _, o := range parseListDoc(t, do(t, c, "GET", a.srv.URL+"/dlq/items", "", nil).body).all(func(n *html.Node) bool {
				return n.Data == "option" && n.Parent != nil && listAttr(n.Parent, "id") == "bulk-action"
			}) {
				out = append(out, listAttr(o, "value"))
			}
			return out
		}
		groupPage := func(c *http.Client) listDoc {
			return parseListDoc(t, do(t, c, "GET", a.srv.URL+"/dlq/groups/"+group, "", nil).body)
		}

		// On (the default): the accountant is offered closing.
		if got := strings.Join(options(acc), ","); got != "retry,retry_full,resolve,skip" {
			t.Errorf("rule on, the accountant's bulk actions: %s", got)
		}
		if d := groupPage(acc); len(d.testID("group-resolve")) != 1 || len(d.testID("group-admin-only")) != 0 {
			t.Error("rule on: the group's page refuses the accountant closing")
		}

		if r := do(t, http.DefaultClient, "PATCH", a.srv.URL+"/api/v1/organization/settings", `{"accountantsMayFix": false}`, bearer(rs.token)); r.status != 200 {
			t.Fatalf("turn off: %d", r.status)
		}
		// Off: the list's bar offers retries only and says who can close.
		if got := strings.Join(options(acc), ","); got != "retry,retry_full" {
			t.Errorf("rule off, the accountant's bulk actions: %s", got)
		}
		list := parseListDoc(t, do(t, acc, "GET", a.srv.URL+"/dlq/items", "", nil).body)
		if n := list.testID("bulk-admin-only"); len(n) != 1 || !strings.Contains(n[0].text(), "An admin can close these") {
			t.Error("the bulk bar does not say who can close")
		}
		if got := strings.Join(options(admin), ","); got != "retry,retry_full,resolve,skip" {
			t.Errorf("the admin's bulk actions: %s", got)
		}
		if len(parseListDoc(t, do(t, admin, "GET", a.srv.URL+"/dlq/items", "", nil).body).testID("bulk-admin-only")) != 0 {
			t.Error("the admin is told an admin can close")
		}
		// The Problems page: no "fix the data" for a validation problem, an ask instead.
		probs := parseListDoc(t, do(t, acc, "GET", a.srv.URL+"/dlq", "", nil).body)
		if n := len(probs.testID("problem-admin-only")); len(probs.testID("problem-fix")) != 0 || n == 0 || len(probs.testID("problem-ask")) != n {
			t.Errorf("Problems: fix %d, admin-only %d, ask %d", len(probs.testID("problem-fix")), len(probs.testID("problem-admin-only")), len(probs.testID("problem-ask")))
		}
		// The group's page: no resolve, skip or correction; who can, and ask an admin.
		d := groupPage(acc)
		if len(d.testID("group-resolve")) != 0 || len(d.testID("group-skip")) != 0 || len(d.testID("group-edit")) != 0 ||
			len(d.testID("group-admin-only")) != 1 || len(d.testID("group-ask")) != 1 || len(d.testID("group-retry")) != 1 ||
			len(d.testID("group-fix-hint")) != 0 {
			t.Error("rule off: the group's page offers the accountant what would be refused, or no ask")
		}
		if d := groupPage(admin); len(d.testID("group-resolve")) != 1 || len(d.testID("group-ask")) != 0 {
			t.Error("the admin's group page lost closing")
		}
		ask := a.srv.URL + "/dlq/groups/" + group + "/ask"
		if r := postForm(t, acc, accCSRF, ask, url.Values{"note": {"Proszę zamknąć: klient zapłacił"}}); r.status != http.StatusSeeOther ||
			!strings.HasSuffix(r.header.Get("Location"), "?done=asked") {
			t.Fatalf("ask: %d %s", r.status, r.header.Get("Location"))
		}
		if r := postForm(t, acc, accCSRF, ask, url.Values{}); r.status != http.StatusSeeOther || !strings.HasSuffix(r.header.Get("Location"), "?done=already") {
			t.Errorf("ask again: %d %s", r.status, r.header.Get("Location"))
		}
		if n := a.inbox(rs.org, models.RoleAdmin, "admin_request"); n != 1 {
			t.Errorf("admin inbox: %d entries, want 1", n)
		}
		oc, ocCSRF := a.browser(other)
		if r := postForm(t, oc, ocCSRF, ask, url.Values{}); r.status != http.StatusNotFound {
			t.Errorf("another organization asks about the group: %d", r.status)
		}
		viewer, viewerCSRF := a.browser(rs.viewer)
		if r := postForm(t, viewer, viewerCSRF, ask, url.Values{}); r.status != http.StatusForbidden {
			t.Errorf("a viewer asks: %d", r.status)
		}

		// The API still refuses, with a message that says why.
		for _, c := range []struct{ path, body string }{
			{"/api/v1/dlq/bulk", `{"action": "skip", "ids": ["` + dl + `"], "resolutionNotes": "x"}`},
			{"/api/v1/dlq/groups/" + group + "/actions", `{"action": "resolve", "resolutionNotes": "x"}`},
		} {
			r := do(t, http.DefaultClient, "POST", a.srv.URL+c.path, c.body, map[string]string{"Authorization": "Bearer " + rs.accountantToken, "Idempotency-Key": models.NewID()})
			if r.status != http.StatusForbidden || !strings.Contains(r.body, "only an admin") {
				t.Errorf("%s: %d %s", c.path, r.status, r.body)
			}
		}
	})
}
