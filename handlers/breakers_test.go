package handlers_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/html"

	"lifeline/models"
	"lifeline/models/modeltest"
	"lifeline/services/engine"
)

// breakerSetup is a recovery setup (an admin, an accountant and a viewer) with a bank
// workflow whose step calls a loopback service that answers 503: five executions opened its
// breaker, and a sixth waits on it. Other breakers are rows made directly: the VAT
// workflow's "file" step (closed, failed an hour ago), a host (half-open) and another
// organization's.
type breakerSetup struct {
	*recoverySetup
	other                       *tenant
	bankWF, waitingExec         string
	open, closed, host, foreign string // breaker ids
	openedAt                    time.Time
	bankCalls                   func() int
}

func (a *app) breakerSetup(name string) *breakerSetup {
	a.t.Helper()
	t, ctx := a.t, context.Background()
	bs := &breakerSetup{recoverySetup: a.recoverySetup(name), other: a.tenant(name + " Obce")}
	calls := make(chan struct{}, 100)
	bank := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls <- struct{}{}
		http.Error(w, `{"error": "maintenance"}`, http.StatusServiceUnavailable)
	}))
	t.Cleanup(bank.Close)
	bs.bankCalls = func() int { return len(calls) }
	def := fmt.Sprintf(`{"name": "Wyciągi bankowe", "settings": {"retryPolicy": {"maxRetries": 0}, "circuitBreaker": {"resetTimeoutMs": 600000}},
	  "steps": [{"id": "fetch", "name": "Pobierz wyciąg", "type": "http", "config": {"method": "GET", "url": "%s/statements"}}]}`, bank.URL)
	wf, err := a.wfs.Create(ctx, bs.org, actorSystem, []byte(def))
	if err != nil {
		t.Fatal(err)
	}
	bs.bankWF = wf.ID
	start := func() string {
		ex, _, err := a.eng.Start(ctx, engine.StartRequest{OrganizationID: bs.org, WorkflowID: wf.ID, Input: []byte(`{}`)})
		if err != nil {
			t.Fatal(err)
		}
		return ex.ID
	}
	poll := func(what string, done func() bool) {
		deadline := time.Now().Add(20 * time.Second)
		for !done() {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s", what)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	for i := 0; i < 5; i++ {
		ex := start()
		poll("a dead letter", func() bool {
			var n int64
			a.db.Conn(ctx).Model(&models.DeadLetter{}).Where("execution_id = ?", ex).Count(&n)
			return n == 1
		})
	}
	var b models.CircuitBreaker
	if err := a.db.Conn(ctx).Where("organization_id = ? AND scope_key = ?", bs.org, "step:"+wf.ID+":fetch").First(&b).Error; err != nil || b.State != "open" {
		t.Fatalf("the breaker did not open: %+v %v", b, err)
	}
	bs.open, bs.openedAt = b.ID, *b.OpenedAt
	bs.waitingExec = start()
	poll("an attempt waiting on the breaker", func() bool {
		var n int64
		a.db.Conn(ctx).Model(&models.StepAttempt{}).Where("execution_id = ? AND waiting_breaker_id = ? AND status = ?", bs.waitingExec, b.ID, models.StepPending).Count(&n)
		return n == 1
	})

	row := func(org string, wfID, step, host *string, state string, lastFailure time.Duration) string {
		now := time.Now().UTC()
		r := models.CircuitBreaker{ID: models.NewID(), OrganizationID: org, WorkflowID: wfID, StepID: step, Host: host, State: state,
			FailureThreshold: 5, ResetTimeoutMs: 60_000, HalfOpenRequests: 3, CreatedAt: now, UpdatedAt: now}
		if host != nil {
			r.ScopeKey = "host:" + *host
		} else {
			r.ScopeKey = "step:" + *wfID + ":" + *step
		}
		lf := now.Add(-lastFailure)
		r.LastFailureAt = &lf
		if state != "closed" {
			r.OpenedAt, r.HalfOpenedAt = &lf, &now
		}
		if err := a.db.Conn(ctx).Create(&r).Error; err != nil {
			t.Fatal(err)
		}
		return r.ID
	}
	s := func(v string) *string { return &v }
	bs.closed = row(bs.org, &bs.wf, s("file"), nil, "closed", time.Hour)
	bs.host = row(bs.org, nil, nil, s("api.bank.example"), "half_open", 2*time.Hour)
	bs.foreign = row(bs.other.org, &bs.other.wfID, s("submit"), nil, "open", time.Minute)
	return bs
}

func apiItems(t *testing.T, r resp) []map[string]any {
	t.Helper()
	if r.status != http.StatusOK {
		t.Fatalf("list: %d %s", r.status, r.body)
	}
	var out []map[string]any
	for _, it := range r.json(t)["items"].([]any) {
		out = append(out, it.(map[string]any))
	}
	return out
}

func itemIDs(items []map[string]any) []string {
	var out []string
	for _, it := range items {
		out = append(out, it["id"].(string))
	}
	return out
}

func TestBreakersAPI(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		a := newApp(t, db)
		bs := a.breakerSetup("Biuro Bezpieczniki API")
		list := a.srv.URL + "/api/v1/breakers"

		// Everyone who reads sees the list: open first, then half-open, then closed.
		items := apiItems(t, do(t, http.DefaultClient, "GET", list, "", bearer(bs.viewerToken)))
		if want := []string{bs.open, bs.host, bs.closed}; !slices.Equal(itemIDs(items), want) {
			t.Fatalf("list %v, want %v", itemIDs(items), want)
		}
		open := items[0]
		halfOpen := bs.openedAt.Add(10 * time.Minute).UTC().Format(time.RFC3339)
		for k, want := range map[string]any{"workflowId": bs.bankWF, "stepId": "fetch", "host": nil, "scope": "step", "state": "open",
			"failureCount": 5.0, "waiting": 1.0, "forced": false, "reason": nil, "halfOpenAt": halfOpen,
			"openedAt": bs.openedAt.UTC().Format(time.RFC3339)} {
			if open[k] != want {
				t.Errorf("open breaker %s = %v, want %v", k, open[k], want)
			}
		}
		if open["lastFailureAt"] == nil {
			t.Error("open breaker has no last failure")
		}
		if h := items[1]; h["scope"] != "host" || h["host"] != "api.bank.example" || h["workflowId"] != nil || h["halfOpenAt"] == nil {
			t.Errorf("host breaker %v", h)
		}
		if c := items[2]; c["openedAt"] != nil || c["halfOpenAt"] != nil || c["failureCount"] != 0.0 {
			t.Errorf("closed breaker %v", c)
		}

		// Filters, by the keys the page's form sends.
		for _, c := range []struct {
			query string
			want  []string
		}{
			{"state=closed", []string{bs.closed}},
			{"state=half_open", []string{bs.host}},
			{"workflowId=" + bs.bankWF, []string{bs.open}},
			{"workflowId=" + bs.wf + "&state=closed", []string{bs.closed}},
			{"workflowId=" + bs.other.wfID, nil},
		} {
			if got := itemIDs(apiItems(t, do(t, http.DefaultClient, "GET", list+"?"+c.query, "", bearer(bs.token)))); !slices.Equal(got, c.want) {
				t.Errorf("?%s: %v, want %v", c.query, got, c.want)
			}
		}
		for query, field := range map[string]string{"state=broken": "state", "workflowId=nope": "workflowId"} {
			r := do(t, http.DefaultClient, "GET", list+"?"+query, "", bearer(bs.token))
			if r.status != http.StatusUnprocessableEntity || fieldsOf(t, r)[field] == nil {
				t.Errorf("?%s: %d %s", query, r.status, r.body)
			}
		}

		// Reset and force open: admins only, with a reason; another organization's is a 404.
		post := func(id, action, token, body string) resp {
			return do(t, http.DefaultClient, "POST", list+"/"+id+"/"+action, body, bearer(token))
		}
		reason := `{"reason": "Bank potwierdził koniec prac serwisowych"}`
		for _, c := range []struct {
			name, id, action, token, body string
			status                        int
			field                         string
		}{
			{"viewer", bs.open, "reset", bs.viewerToken, reason, 403, ""},
			{"accountant", bs.open, "reset", bs.accountantToken, reason, 403, ""},
			{"accountant opens", bs.closed, "open", bs.accountantToken, reason, 403, ""},
			{"another organization's", bs.foreign, "reset", bs.token, reason, 404, ""},
			{"another organization's, no reason", bs.foreign, "open", bs.token, `{}`, 404, ""},
			{"no such breaker", models.NewID(), "reset", bs.token, reason, 404, ""},
			{"not an id", "nope", "reset", bs.token, reason, 404, ""},
			{"no reason", bs.open, "reset", bs.token, `{}`, 422, "reason"},
			{"blank reason", bs.open, "open", bs.token, `{"reason": "  "}`, 422, "reason"},
			{"unknown field", bs.open, "reset", bs.token, `{"reason": "x", "force": true}`, 422, "body"},
		} {
			r := post(c.id, c.action, c.token, c.body)
			if r.status != c.status {
				t.Errorf("%s: %d %s, want %d", c.name, r.status, r.body, c.status)
			} else if c.field != "" && fieldsOf(t, r)[c.field] == nil {
				t.Errorf("%s: no message on %s: %s", c.name, c.field, r.body)
			}
		}
		if r := post(bs.open, "reset", bs.token, `{}`); !strings.Contains(r.body, "is required") {
			t.Errorf("the missing reason's message: %s", r.body)
		}
		if r := do(t, http.DefaultClient, "POST", list+"/"+bs.open+"/reset", `{}`, map[string]string{"Authorization": "Bearer " + bs.token, "Accept-Language": "pl"}); !strings.Contains(r.body, "jest wymagane") {
			t.Errorf("the missing reason's message in Polish: %s", r.body)
		}

		r := post(bs.open, "reset", bs.token, reason)
		if r.status != http.StatusOK {
			t.Fatalf("reset: %d %s", r.status, r.body)
		}
		if b := r.json(t); b["id"] != bs.open || b["state"] != "closed" || b["forced"] != false || b["reason"] != "Bank potwierdził koniec prac serwisowych" ||
			b["openedAt"] != nil || b["halfOpenAt"] != nil || (b["failureCount"] != 0.0 && b["failureCount"] != 1.0) {
			// The reset empties the window; the execution it released may already have
			// failed again (1) by the time the answer counts it.
			t.Errorf("after reset: %v", b)
		}
		// The reset released the waiting execution: it called the bank again (and failed).
		deadline := time.Now().Add(15 * time.Second)
		for bs.bankCalls() < 6 {
			if time.Now().After(deadline) {
				t.Fatalf("the waiting execution was not released: %d calls", bs.bankCalls())
			}
			time.Sleep(50 * time.Millisecond)
		}
		r = post(bs.closed, "open", bs.token, `{"reason": "Przerwa techniczna w bramce"}`)
		if b := r.json(t); r.status != http.StatusOK || b["state"] != "open" || b["forced"] != true || b["openedAt"] == nil || b["halfOpenAt"] != nil {
			t.Errorf("force open: %d %v", r.status, b)
		}
		var actions []string
		db.Conn(context.Background()).Model(&models.AuditEntry{}).Where("organization_id = ? AND entity_type = ? AND actor_type = ?",
			bs.org, "circuit_breaker_state", "api_token").Order("created_at").Pluck("action", &actions)
		if !slices.Equal(actions, []string{"circuit.closed", "circuit.opened"}) {
			t.Errorf("audited %v", actions)
		}
	})
}

func TestBreakersPage(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		a := newApp(t, db)
		bs := a.breakerSetup("Biuro Bezpieczniki")
		admin, csrf := a.browser(bs.tenant)
		page := a.srv.URL + "/breakers"

		r := do(t, admin, "GET", page, "", nil)
		if r.status != http.StatusOK {
			t.Fatalf("page: %d", r.status)
		}
		doc := parseListDoc(t, r.body)
		if nav := doc.testID("nav-breakers"); len(nav) != 1 || nav[0].attr("aria-current") != "page" {
			t.Errorf("nav item %v", len(nav))
		}
		if got, want := doc.rowIDs("breaker-row"), []string{bs.open, bs.host, bs.closed}; !slices.Equal(got, want) {
			t.Fatalf("rows %v, want %v", got, want)
		}
		row := doc.testID("breaker-row")[0]
		// The relative times are rendered against the wall clock: a slow setup may have
		// taken a minute off them.
		for id, want := range map[string][]string{"breaker-state": {"Open"}, "breaker-scope": {"Pobierz wyciąg Wyciągi bankowe"}, "breaker-failures": {"5 / 5"},
			"breaker-waiting": {"1"}, "breaker-half-open": {"in 10 minutes", "in 9 minutes"}, "breaker-last-failure": {"just now", "1 minute ago"}} {
			if got := row.testID(id); len(got) != 1 || !slices.Contains(want, got[0].text()) {
				t.Errorf("open row %s: %v, want one of %q", id, got, want)
			}
		}
		if len(row.testID("breaker-actions")) != 1 || len(row.testID("breaker-reset")) != 1 || len(row.testID("breaker-open")) != 1 {
			t.Errorf("the open row's actions")
		}
		// The actions are kept across the list's refreshes (hx-preserve): the same in every state.
		if rows := doc.testID("breaker-row"); len(rows[2].testID("breaker-reset")) != 1 || len(rows[2].testID("breaker-open")) != 1 ||
			rows[2].testID("breaker-actions")[0].attr("hx-preserve") != "true" {
			t.Errorf("a closed breaker's actions")
		}

		// The filter form sends the keys the list reads.
		stateKey, wfKey := doc.formKey(t, "filter-breakers-state"), doc.formKey(t, "filter-breakers-workflow")
		for _, c := range []struct {
			query url.Values
			want  []string
		}{
			{url.Values{stateKey: {"open"}}, []string{bs.open}},
			{url.Values{wfKey: {bs.wf}}, []string{bs.closed}},
			{url.Values{wfKey: {bs.bankWF}, stateKey: {"closed"}}, nil},
		} {
			r := do(t, admin, "GET", page+"?"+c.query.Encode(), "", nil)
			if got := parseListDoc(t, r.body).rowIDs("breaker-row"); r.status != 200 || !slices.Equal(got, c.want) {
				t.Errorf("?%s: %d %v, want %v", c.query.Encode(), r.status, got, c.want)
			}
		}
		// htmx (the filter, the live refresh) gets the table alone, which refreshes itself; a
		// row's form comes back to the filtered list (its filter is sent from outside the form,
		// which is kept across refreshes).
		r = do(t, admin, "GET", page+"?state=open", "", map[string]string{"HX-Request": "true"})
		if r.status != 200 || strings.Contains(r.body, "<html") || !strings.Contains(r.body, `hx-get="/breakers?state=open"`) ||
			!strings.Contains(r.body, `<input type="hidden" name="state" value="open" form="breaker-form-`+bs.open+`">`) {
			t.Errorf("htmx table: %d %.200s", r.status, r.body)
		}
		r = do(t, admin, "GET", page+"?state=broken&workflowId=nope", "", nil)
		if d := parseListDoc(t, r.body); r.status != 422 || len(d.testID("filter-refused")) != 1 || len(d.testID("field-error")) != 2 {
			t.Errorf("bad filter: %d", r.status)
		}

		// The workflow page shows each step's breaker and links to the breakers page.
		r = do(t, admin, "GET", a.srv.URL+"/workflows/"+bs.bankWF, "", nil)
		if d := parseListDoc(t, r.body); len(d.testID("breaker-state")) != 1 || d.testID("breaker-state")[0].attr("data-state") != "open" ||
			d.testID("workflow-breakers")[0].attr("href") != "/breakers?workflowId="+bs.bankWF {
			t.Errorf("bank workflow page: breaker state or link missing")
		}
		r = do(t, admin, "GET", a.srv.URL+"/workflows/"+bs.wf, "", nil)
		var states []string
		for _, b := range parseListDoc(t, r.body).testID("breaker-state") {
			states = append(states, b.attr("data-state"))
		}
		if !slices.Equal(states, []string{"closed", "closed"}) { // "prepare" never failed: no row
			t.Errorf("VAT workflow page breakers %v", states)
		}

		// The waiting execution's page says until when, not an error.
		inMinutes, zaMinut := regexp.MustCompile(`\(in (9|10) minutes\)`), regexp.MustCompile(`\(za (9|10) minut\)`)
		r = do(t, admin, "GET", a.srv.URL+"/executions/"+bs.waitingExec, "", nil)
		d := parseListDoc(t, r.body)
		if w := d.testID("breaker-wait"); len(w) != 1 || !strings.HasPrefix(w[0].text(), "Waiting on the circuit breaker until ") ||
			!inMinutes.MatchString(w[0].text()) || len(d.testID("attempt-error")) != 0 || len(d.testID("next-retry")) != 0 {
			t.Errorf("waiting execution page: %v", d.testID("breaker-wait"))
		}
		if l := d.testID("breaker-wait-link"); len(l) != 1 || l[0].attr("href") != "/breakers?workflowId="+bs.bankWF {
			t.Errorf("waiting execution page: no link to the breakers")
		}
		// In Polish (the browser's language, as the user has chosen none).
		pl := map[string]string{"Accept-Language": "pl"}
		d = parseListDoc(t, do(t, admin, "GET", a.srv.URL+"/executions/"+bs.waitingExec, "", pl).body)
		if w := d.testID("breaker-wait"); len(w) != 1 || !strings.HasPrefix(w[0].text(), "Czeka na bezpiecznik do ") || !zaMinut.MatchString(w[0].text()) {
			t.Errorf("waiting execution page in Polish: %v", w)
		}
		d = parseListDoc(t, do(t, admin, "GET", page, "", pl).body)
		if n := d.testID("nav-breakers"); len(n) != 1 || n[0].text() != "Bezpieczniki" || d.testID("breaker-state")[0].text() != "Otwarty" ||
			d.testID("breaker-waiting")[0].attr("title") != "1 wykonanie czeka na ten bezpiecznik" {
			t.Errorf("the page in Polish")
		}

		// Viewers and accountants read the page without actions, and cannot act.
		for _, who := range []*tenant{bs.viewer, bs.accountant} {
			c, tok := a.browser(who)
			r := do(t, c, "GET", page, "", nil)
			if d := parseListDoc(t, r.body); r.status != 200 || len(d.testID("breaker-row")) != 3 || len(d.testID("breaker-actions")) != 0 {
				t.Errorf("%s page: %d, actions shown", who.email, r.status)
			}
			form := url.Values{"_csrf": {tok}, "reason": {"x"}}
			if r := do(t, c, "POST", page+"/"+bs.open+"/reset", form.Encode(), map[string]string{"Content-Type": "application/x-www-form-urlencoded"}); r.status != 403 {
				t.Errorf("%s reset: %d", who.email, r.status)
			}
		}

		submit := func(id, action string, v url.Values) resp {
			v.Set("_csrf", csrf)
			return do(t, admin, "POST", page+"/"+id+"/"+action, v.Encode(), map[string]string{"Content-Type": "application/x-www-form-urlencoded"})
		}
		if r := submit(bs.foreign, "reset", url.Values{"reason": {"x"}}); r.status != 404 {
			t.Errorf("another organization's breaker: %d", r.status)
		}
		// No reason: the list again, 422, the row's form open with the message.
		r = submit(bs.open, "reset", url.Values{"reason": {" "}, "state": {"open"}})
		d = parseListDoc(t, r.body)
		if r.status != 422 || len(d.testID("breaker-row")) != 1 {
			t.Fatalf("no reason: %d", r.status)
		}
		if f := d.byID("breaker-actions-" + bs.open); f == nil || !slices.ContainsFunc(f.Attr, func(a html.Attribute) bool { return a.Key == "open" }) {
			t.Errorf("the refused row's form is not open")
		}
		if e := d.testID("field-error"); len(e) != 1 || e[0].text() != "Give a reason: it is kept in the audit log." {
			t.Errorf("the refusal's message: %v", e)
		}
		// With a reason: back to the list (its filter kept) with a confirmation.
		r = submit(bs.open, "reset", url.Values{"reason": {"Bank działa"}, "state": {"open"}})
		if r.status != http.StatusSeeOther || r.header.Get("Location") != "/breakers?done=reset&state=open" {
			t.Fatalf("reset: %d %s", r.status, r.header.Get("Location"))
		}
		r = do(t, admin, "GET", a.srv.URL+"/breakers?done=reset", "", nil)
		d = parseListDoc(t, r.body)
		if n := d.byID("breaker-" + bs.open); len(d.testID("breaker-done")) != 1 || n == nil || listAttr(n, "data-state") != "closed" {
			t.Errorf("no confirmation after the reset, or the breaker is not closed")
		}
		r = submit(bs.closed, "open", url.Values{"reason": {"Przerwa w bramce"}})
		if r.status != http.StatusSeeOther || r.header.Get("Location") != "/breakers?done=open" {
			t.Fatalf("force open: %d %s", r.status, r.header.Get("Location"))
		}
		d = parseListDoc(t, do(t, admin, "GET", a.srv.URL+"/breakers?state=open", "", nil).body)
		if rows := d.testID("breaker-row"); len(rows) != 1 || rows[0].attr("data-id") != bs.closed || len(rows[0].testID("breaker-forced")) != 1 ||
			rows[0].testID("breaker-reason")[0].text() != "„Przerwa w bramce”" || rows[0].testID("breaker-half-open")[0].text() != "when reset" {
			t.Errorf("the forced breaker's row")
		}

		// The audit filter offers the half-open event.
		r = do(t, admin, "GET", a.srv.URL+"/audit", "", nil)
		if !strings.Contains(r.body, `value="circuit.half_opened"`) || !strings.Contains(r.body, "Circuit breaker half-opened") {
			t.Errorf("the audit filter does not offer circuit.half_opened")
		}
	})
}
