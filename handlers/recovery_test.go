package handlers_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"lifeline/models"
	"lifeline/models/modeltest"
)

// vatGateway is a loopback VAT gateway: 400 {"error": "NIP must have 10 digits"} unless the
// body's nip has 10 digits.
func vatGateway(t testing.TB) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			NIP string `json:"nip"`
		}
		raw, _ := io.ReadAll(r.Body)
		_ = json.Unmarshal(raw, &body)
		w.Header().Set("Content-Type", "application/json")
		if len(body.NIP) != 10 {
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprint(w, `{"error": "NIP must have 10 digits"}`)
			return
		}
		fmt.Fprint(w, `{"filed": true}`)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// recoverySetup makes a tenant with a VAT workflow (subject from the input), an accountant
// and a viewer who can log in, and API tokens for each role.
type recoverySetup struct {
	*tenant
	wf                 string
	accountant, viewer *tenant // logins (email, password) of the same organization
	accountantToken    string
}

func (a *app) recoverySetup(name string) *recoverySetup {
	a.t.Helper()
	ctx := context.Background()
	tn := a.tenant(name)
	gw := vatGateway(a.t)
	def := fmt.Sprintf(`{"name": "Deklaracja VAT", "settings": {"subject": "{{ input.client }} · {{ input.period }}", "retryPolicy": {"maxRetries": 0}},
	  "steps": [
	    {"id": "prepare", "name": "Przygotuj deklarację", "type": "transform", "config": {"output": {"period": "{{ input.period }}"}}},
	    {"id": "file", "name": "Wyślij do bramki", "type": "http", "config": {"method": "POST", "url": "%s/vat", "body": {"nip": "{{ input.nip }}", "token": "{{ input.apiToken }}"}}}
	  ]}`, gw.URL)
	wf, err := a.wfs.Create(ctx, tn.org, actorSystem, []byte(def))
	if err != nil {
		a.t.Fatal(err)
	}
	rs := &recoverySetup{tenant: tn, wf: wf.ID}
	for _, u := range []struct {
		role string
		dst  **tenant
	}{{models.RoleAccountant, &rs.accountant}, {models.RoleViewer, &rs.viewer}} {
		login := *tn
		login.email = u.role + "." + tn.email
		if _, err := a.as.CreateUser(ctx, tn.org, login.email, login.password, u.role); err != nil {
			a.t.Fatal(err)
		}
		*u.dst = &login
	}
	if rs.accountantToken, _, err = a.as.CreateToken(ctx, tn.org, models.RoleAccountant, "accountant"); err != nil {
		a.t.Fatal(err)
	}
	return rs
}

// failed starts a VAT execution whose NIP is wrong and returns its execution and dead letter ids.
func (a *app) failed(rs *recoverySetup, client string) (string, string) {
	a.t.Helper()
	r := do(a.t, http.DefaultClient, "POST", a.srv.URL+"/api/v1/workflows/"+rs.wf+"/executions",
		fmt.Sprintf(`{"input": {"client": %q, "period": "2026-10", "nip": "526", "apiToken": "tok-s3cret-1"}}`, client), bearer(rs.token))
	if r.status != http.StatusCreated {
		a.t.Fatalf("start: %d %s", r.status, r.body)
	}
	exID := r.json(a.t)["id"].(string)
	deadline := time.Now().Add(15 * time.Second)
	for {
		var dl models.DeadLetter
		if err := a.db.Conn(context.Background()).Where("execution_id = ?", exID).First(&dl).Error; err == nil {
			return exID, dl.ID
		}
		if time.Now().After(deadline) {
			a.t.Fatalf("execution %s has no dead letter", exID)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// dlqStatus polls the API until the item leaves processing.
func (a *app) dlqStatus(token, id string) map[string]any {
	a.t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		r := do(a.t, http.DefaultClient, "GET", a.srv.URL+"/api/v1/dlq/"+id, "", bearer(token))
		m := r.json(a.t)
		if m["status"] != models.DLQProcessing {
			return m
		}
		if time.Now().After(deadline) {
			a.t.Fatalf("dead letter %s still processing", id)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestRecoveryAPI(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		a := newApp(t, db)
		rs := a.recoverySetup("Biuro Recovery API")
		other := a.tenant("Inne Biuro")
		exID, dlID := a.failed(rs, "Kowalski")
		actions := a.srv.URL + "/api/v1/dlq/" + dlID + "/actions"
		post := func(u, token, body string, hdr map[string]string) resp {
			h := bearer(token)
			for k, v := range hdr {
				h[k] = v
			}
			return do(t, http.DefaultClient, "POST", u, body, h)
		}

		// The item as the API lists it: subject and reason.
		item := do(t, http.DefaultClient, "GET", a.srv.URL+"/api/v1/dlq/"+dlID, "", bearer(rs.token)).json(t)
		if item["subject"] != "Kowalski · 2026-10" || item["reason"] != "NIP must have 10 digits (400 Bad Request)" {
			t.Errorf("item %v", item)
		}

		fixed := `{"action": "retry_modified", "modifiedInput": {"client": "Kowalski", "period": "2026-10", "nip": "5260250274", "apiToken": "[REDACTED]"}, "resolutionNotes": "NIP poprawiony"}`
		refused := []struct {
			name, token, body string
			status            int
			field             string
		}{
			{"viewer cannot retry", rs.viewerToken, `{"action": "retry"}`, 403, ""},
			// An accountant fixes data (seed 000 scenarios 3 and 4), but closes an item only
			// with a note saying why, and leaves the retry policy to admins.
			{"accountant resolves without a note", rs.accountantToken, `{"action": "resolve"}`, 422, "resolutionNotes"},
			{"accountant skips without a note", rs.accountantToken, `{"action": "skip", "resolutionNotes": "  "}`, 422, "resolutionNotes"},
			{"accountant overrides the policy", rs.accountantToken, `{"action": "retry", "retryPolicy": {"maxRetries": 2}}`, 403, ""},
			{"another organization", other.token, `{"action": "retry"}`, 404, ""},
			{"unknown action", rs.token, `{"action": "again"}`, 422, "action"},
			{"edit without input", rs.token, `{"action": "retry_modified"}`, 422, "modifiedInput"},
			{"input not an object", rs.token, `{"action": "retry_modified", "modifiedInput": [1]}`, 422, "modifiedInput"},
			{"notes too long", rs.token, `{"action": "resolve", "resolutionNotes": "` + strings.Repeat("x", 2001) + `"}`, 422, "resolutionNotes"},
			{"unknown field", rs.token, `{"action": "retry", "force": true}`, 422, "body"},
			{"resume from a later step", rs.token, `{"action": "retry", "fromStepId": "nope"}`, 422, "fromStepId"},
			{"bad override", rs.token, `{"action": "retry", "retryPolicy": {"maxRetries": 99}}`, 422, "retryPolicy.maxRetries"},
		}
		for _, c := range refused {
			r := post(actions, c.token, c.body, nil)
			if r.status != c.status {
				t.Errorf("%s: %d %s, want %d", c.name, r.status, r.body, c.status)
				continue
			}
			if c.field != "" {
				if f := fieldsOf(t, r); f[c.field] == nil {
					t.Errorf("%s: no message on %s: %s", c.name, c.field, r.body)
				}
			}
		}
		if m := a.dlqStatus(rs.token, dlID); m["status"] != models.DLQPending || m["manualRetryCount"] != 0.0 {
			t.Fatalf("refused requests changed the item: %v", m)
		}

		// The admin fixes the NIP and retries, with an Idempotency-Key: a repeat is answered
		// the same, a different action conflicts.
		key := map[string]string{"Idempotency-Key": "fix-nip-1"}
		r := post(actions, rs.token, fixed, key)
		if r.status != http.StatusAccepted || r.json(t)["executionId"] != exID {
			t.Fatalf("retry_modified: %d %s", r.status, r.body)
		}
		if again := post(actions, rs.token, fixed, key); again.status != http.StatusOK || again.header.Get("Idempotency-Replayed") != "true" {
			t.Errorf("repeat: %d %s", again.status, again.body)
		}
		if c := post(actions, rs.token, `{"action": "resolve"}`, nil); c.status != http.StatusConflict || !strings.Contains(c.body, "already") {
			t.Errorf("second action: %d %s", c.status, c.body)
		}
		if m := a.dlqStatus(rs.token, dlID); m["status"] != models.DLQResolved {
			t.Fatalf("after the replay: %v", m)
		}
		ex := do(t, http.DefaultClient, "GET", a.srv.URL+"/api/v1/executions/"+exID, "", bearer(rs.token)).json(t)
		if ex["status"] != models.ExecSucceeded {
			t.Errorf("replayed execution %v", ex["status"])
		}
		// Its page tells of the earlier failure as recovered, not as an alarm.
		admin, _ := a.browser(rs.tenant)
		if page := do(t, admin, "GET", a.srv.URL+"/executions/"+exID, "", nil).body; !strings.Contains(page, `data-testid="recovered-failure"`) ||
			strings.Contains(page, `data-testid="failure"`) {
			t.Error("the recovered execution's page still raises its old failure as an alarm")
		}

		// POST /executions/{id}/retry: an accountant retries the entire workflow; the answer
		// names the new execution. An execution not in the DLQ conflicts.
		ex2, dl2 := a.failed(rs, "Nowak")
		retryURL := a.srv.URL + "/api/v1/executions/" + ex2 + "/retry"
		if r := post(retryURL, rs.accountantToken, `{"retryType": "sometimes"}`, nil); r.status != 422 || fieldsOf(t, r)["retryType"] == nil {
			t.Errorf("bad retryType: %d %s", r.status, r.body)
		}
		if r := post(retryURL, rs.accountantToken, `{"retryType": "skip_failed"}`, nil); r.status != 422 || fieldsOf(t, r)["resolutionNotes"] == nil {
			t.Errorf("accountant skips the step without a note: %d %s", r.status, r.body)
		}
		r = post(retryURL, rs.accountantToken, `{"retryType": "full"}`, nil)
		newID, _ := r.json(t)["executionId"].(string)
		if r.status != http.StatusAccepted || newID == "" || newID == ex2 {
			t.Fatalf("full retry: %d %s", r.status, r.body)
		}
		if m := a.dlqStatus(rs.token, dl2); m["status"] != models.DLQPending || m["executionId"] != newID {
			t.Errorf("the full retry failed again: the item should follow it: %v", m)
		}
		browser, _ := a.browser(rs.tenant)
		// The item page that follows a replay says how it ended: failed again, or succeeded.
		if page := do(t, browser, "GET", a.srv.URL+"/dlq/"+dl2+"?done=full", "", nil).body; !strings.Contains(page, `data-testid="action-done" data-done="failedagain"`) ||
			!strings.Contains(page, "the retry failed again") {
			t.Error("the item page (and its history) does not say the full retry failed again")
		}
		if page := do(t, browser, "GET", a.srv.URL+"/dlq/"+dlID+"?done=edit", "", nil).body; !strings.Contains(page, `data-testid="action-done" data-done="succeeded"`) {
			t.Error("the item page does not say the edited retry succeeded")
		}
		if page := do(t, browser, "GET", a.srv.URL+"/executions/"+ex2, "", nil); !strings.Contains(page.body, `href="/executions/`+newID+`" data-testid="retried-as"`) {
			t.Errorf("the original does not link to its full retry")
		}
		if page := do(t, browser, "GET", a.srv.URL+"/executions/"+newID, "", nil); !strings.Contains(page.body, `href="/executions/`+ex2+`" data-testid="retry-of"`) {
			t.Errorf("the full retry does not link to the original")
		}
		if r := post(a.srv.URL+"/api/v1/executions/"+exID+"/retry", rs.token, `{"retryType": "from_failed"}`, nil); r.status != http.StatusConflict {
			t.Errorf("retry of a succeeded execution: %d %s", r.status, r.body)
		}
		if r := post(a.srv.URL+"/api/v1/executions/"+ex2+"/retry", other.token, `{"retryType": "full"}`, nil); r.status != 404 {
			t.Errorf("other organization's execution: %d", r.status)
		}
	})
}

func TestRecoveryPages(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		a := newApp(t, db)
		rs := a.recoverySetup("Biuro Recovery Pages")
		exID, dlID := a.failed(rs, "Kowalski")
		itemURL := a.srv.URL + "/dlq/" + dlID
		form := func(c *http.Client, csrf string, v url.Values) resp {
			v.Set("_csrf", csrf)
			return do(t, c, "POST", itemURL+"/actions", v.Encode(), map[string]string{"Content-Type": "application/x-www-form-urlencoded"})
		}

		// Roles: the viewer sees no actions; the accountant fixes data (edit, skip, close with a
		// note) but does not override the retry policy.
		viewer, _ := a.browser(rs.viewer)
		if r := do(t, viewer, "GET", itemURL, "", nil); r.status != 200 || strings.Contains(r.body, `data-testid="recovery"`) {
			t.Errorf("viewer page: %d, actions shown", r.status)
		}
		// The failed execution's page has the subject as its title and the same actions.
		if r := do(t, viewer, "GET", a.srv.URL+"/executions/"+exID, "", nil); r.status != 200 || strings.Contains(r.body, `data-testid="recovery"`) ||
			!strings.Contains(r.body, "Kowalski · 2026-10") {
			t.Errorf("viewer's execution page: %d", r.status)
		}
		acc, accCSRF := a.browser(rs.accountant)
		if r := do(t, acc, "GET", a.srv.URL+"/executions/"+exID, "", nil); !strings.Contains(r.body, `data-testid="action-retry"`) ||
			!strings.Contains(r.body, `action="/dlq/`+dlID+`/actions"`) {
			t.Errorf("accountant's execution page has no recovery actions")
		}
		r := do(t, acc, "GET", itemURL, "", nil)
		if !strings.Contains(r.body, `data-testid="action-retry"`) || !strings.Contains(r.body, `data-testid="edit-section"`) ||
			!strings.Contains(r.body, `data-testid="action-resolve"`) || !strings.Contains(r.body, `data-testid="skip-notes"`) ||
			strings.Contains(r.body, `data-testid="policy-section"`) {
			t.Errorf("accountant page shows the wrong actions")
		}
		if r := form(acc, accCSRF, url.Values{"action": {"resolve"}}); r.status != 422 || !strings.Contains(r.body, "A note is required") {
			t.Errorf("accountant resolves without a note: %d", r.status)
		}

		admin, csrf := a.browser(rs.tenant)
		r = do(t, admin, "GET", itemURL, "", nil)
		for _, want := range []string{`data-testid="recovery"`, `data-testid="edit-section"`, `data-testid="form-settle"`, "Kowalski · 2026-10",
			"NIP must have 10 digits", "Wyślij do bramki", `data-testid="timeline-step"`, "[REDACTED]"} {
			if !strings.Contains(r.body, want) {
				t.Errorf("admin item page lacks %q", want)
			}
		}
		if strings.Contains(r.body, "tok-s3cret-1") {
			t.Error("the page shows a secret")
		}

		// Edit: bad JSON is a 422 with the field's message; a preview shows the diff and keeps
		// the masked secret out of it; the retry runs with the edited input.
		edited := `{"client": "Kowalski", "period": "2026-10", "nip": "5260250274", "apiToken": "[REDACTED]"}`
		if r := form(admin, csrf, url.Values{"action": {"edit"}, "input": {`{"nip": `}, "preview": {"1"}}); r.status != 422 || !strings.Contains(r.body, "not valid JSON") {
			t.Errorf("bad JSON preview: %d", r.status)
		}
		r = form(admin, csrf, url.Values{"action": {"edit"}, "input": {edited}, "preview": {"1"}})
		if r.status != 200 || strings.Count(r.body, `data-testid="diff-line"`) != 1 || !strings.Contains(r.body, "5260250274") || !strings.Contains(r.body, `data-testid="action-edit"`) {
			t.Fatalf("preview: %d %s", r.status, r.body)
		}
		r = form(admin, csrf, url.Values{"action": {"edit"}, "input": {edited}})
		if r.status != http.StatusSeeOther || !strings.HasSuffix(r.header.Get("Location"), "/dlq/"+dlID+"?done=edit") {
			t.Fatalf("edit: %d %s", r.status, r.header.Get("Location"))
		}
		if m := a.dlqStatus(rs.token, dlID); m["status"] != models.DLQResolved {
			t.Fatalf("after the edited retry: %v", m)
		}
		// Acting on a resolved item is a 409 that says why.
		if r := form(admin, csrf, url.Values{"action": {"retry"}}); r.status != http.StatusConflict || !strings.Contains(r.body, "already resolved") {
			t.Errorf("retry of a resolved item: %d", r.status)
		}

		// Resolve another with notes; the page shows them.
		_, dl2 := a.failed(rs, "Nowak")
		itemURL = a.srv.URL + "/dlq/" + dl2
		if r := form(admin, csrf, url.Values{"action": {"resolve"}, "notes": {"Złożono ręcznie w e-Deklaracjach."}}); r.status != http.StatusSeeOther {
			t.Fatalf("resolve: %d %s", r.status, r.body)
		}
		r = do(t, admin, "GET", itemURL, "", nil)
		if !strings.Contains(r.body, `data-testid="resolution-notes"`) || !strings.Contains(r.body, "Złożono ręcznie") || strings.Contains(r.body, `data-testid="recovery"`) {
			t.Errorf("resolved page")
		}
		// It says how and by whom it was closed, and its history lists what happened, oldest
		// first, with a link to the audit log filtered to it.
		history := regexp.MustCompile(`data-testid="history-entry" data-event="([a-z._]+)"`)
		for _, want := range []string{`data-testid="closed-how">Closed as resolved<`, `data-testid="closed-by">by ` + rs.tenant.email + `<`,
			`data-testid="history-note"> · “Złożono ręcznie w e-Deklaracjach.”`,
			`href="/audit?entityId=` + dl2 + `&amp;entityType=dead_letter_queue" data-testid="history-audit"`} {
			if !strings.Contains(r.body, want) {
				t.Errorf("resolved page lacks %s", want)
			}
		}
		if got := history.FindAllStringSubmatch(r.body, -1); len(got) != 2 || got[0][1] != "dlq.created" || got[1][1] != "dlq.resolved" {
			t.Errorf("history %v, want dlq.created then dlq.resolved", got)
		}
		m := a.dlqStatus(rs.token, dl2)
		if m["resolutionNotes"] != "Złożono ręcznie w e-Deklaracjach." || m["resolvedBy"] == nil || m["resolvedBy"] == "" {
			t.Errorf("the API does not say who closed it and why: %v %v", m["resolutionNotes"], m["resolvedBy"])
		}
		// The API gives the same history, oldest first.
		hist, _ := m["history"].([]any)
		if len(hist) != 2 {
			t.Fatalf("API history %v, want 2 entries", m["history"])
		}
		last, _ := hist[1].(map[string]any)
		if first, _ := hist[0].(map[string]any); first["event"] != "dlq.created" || last["event"] != "dlq.resolved" || last["actorType"] != "user" ||
			last["actor"] != rs.tenant.email || last["note"] != "“Złożono ręcznie w e-Deklaracjach.”" || last["label"] == "" || last["at"] == "" {
			t.Errorf("API history %v", hist)
		}
		// The item the edited retry resolved: the engine closed it, after the admin's retry.
		r = do(t, admin, "GET", a.srv.URL+"/dlq/"+dlID, "", nil)
		if !strings.Contains(r.body, `data-testid="closed-how">Resolved: the retry succeeded<`) || strings.Contains(r.body, `data-testid="closed-by"`) ||
			!strings.Contains(r.body, "from the failed step Wyślij do bramki") || !strings.Contains(r.body, "with an edited input") || !strings.Contains(r.body, "NIP must have 10 digits") {
			t.Errorf("the replayed item's page does not say the retry resolved it")
		}
		// Resolved looks resolved: how it was closed comes first, in green, with the execution
		// that succeeded; the original failure is folded away below.
		if res, fail := strings.Index(r.body, `data-testid="resolution"`), strings.Index(r.body, `data-testid="original-failure"`); res < 0 || fail < res ||
			!regexp.MustCompile(`class="notice notice-success"[^>]*data-testid="resolution"`).MatchString(r.body) ||
			!strings.Contains(r.body, `data-testid="succeeded-link"`) || !strings.Contains(r.body, `<details class="disclosure" data-testid="original-failure">`) {
			t.Errorf("the resolved item's page does not lead with its resolution (%d, %d)", res, fail)
		}
		if got := history.FindAllStringSubmatch(r.body, -1); len(got) != 3 || got[1][1] != "dlq.retry" || got[2][1] != "dlq.resolved" {
			t.Errorf("history %v, want dlq.created, dlq.retry, dlq.resolved", got)
		}
		// The audit log shows the notes and the details of each entry.
		r = do(t, admin, "GET", a.srv.URL+"/audit?entityType=dead_letter_queue&entityId="+dl2, "", nil)
		if r.status != 200 || !strings.Contains(r.body, `data-testid="audit-note">“Złożono ręcznie w e-Deklaracjach.”<`) || !strings.Contains(r.body, `data-testid="audit-details"`) {
			t.Errorf("audit log: %d, no note or details", r.status)
		}
		// A viewer sees the history but no link to the audit log, which is for admins.
		if r := do(t, viewer, "GET", itemURL, "", nil); !strings.Contains(r.body, `data-testid="dlq-history"`) || strings.Contains(r.body, `data-testid="history-audit"`) {
			t.Errorf("viewer's history")
		}
	})
}
