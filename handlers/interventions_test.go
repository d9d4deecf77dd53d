package handlers_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
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

// filings is a loopback "tax office" that records every body it is sent.
type filings struct {
	*httptest.Server
	mu     sync.Mutex
	bodies []map[string]any
}

func newFilings(t testing.TB) *filings {
	f := &filings{}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		var body map[string]any
		_ = json.Unmarshal(raw, &body)
		f.mu.Lock()
		f.bodies = append(f.bodies, body)
		f.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"referenceNumber": "UPO-2026-10-001"}`)
	}))
	t.Cleanup(f.Close)
	return f
}

func (f *filings) all() []map[string]any {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]map[string]any(nil), f.bodies...)
}

// askSetup is a tenant (recoverySetup: an admin who logs in, an accountant, a viewer and
// their tokens) with a partner (a second admin) and workflows with an ask step of each kind,
// filing to a recording service.
type askSetup struct {
	*recoverySetup
	partner      *tenant
	partnerToken string
	filed        *filings
	// approval, input and decision are the workflows' ids.
	approval, input, decision string
}

func (a *app) askSetup(name string) *askSetup {
	a.t.Helper()
	ctx := context.Background()
	as := &askSetup{recoverySetup: a.recoverySetup(name), filed: newFilings(a.t)}
	partner := *as.tenant
	partner.email = "wspolnik." + as.email
	if _, err := a.as.CreateUser(ctx, as.org, partner.email, partner.password, models.RoleAdmin); err != nil {
		a.t.Fatal(err)
	}
	as.partner = &partner
	var err error
	if as.partnerToken, _, err = a.as.CreateToken(ctx, as.org, models.RoleAdmin, "wspólnik"); err != nil {
		a.t.Fatal(err)
	}
	file := fmt.Sprintf(`{"id": "file", "name": "Wysyłka do urzędu", "type": "http", "config": {"method": "POST", "url": "%s/file", "body": {"client": "{{ input.client }}", "asked": "{{ steps.ask.output }}"}}}`, as.filed.URL)
	settings := `"settings": {"subject": "{{ input.client }} · {{ input.period }}", "retryPolicy": {"maxRetries": 0}}`
	prepare := `{"id": "prepare", "name": "Walidacja", "type": "transform", "config": {"output": {"vatDue": "{{ input.vatDue }}", "period": "{{ input.period }}"}}}`
	for _, w := range []struct {
		dst  *string
		name string
		ask  string
	}{
		{&as.approval, "Deklaracja VAT z akceptacją", `{"kind": "approval", "title": "Zatwierdź VAT {{ input.period }} – {{ input.client }}",
		  "message": "VAT do zapłaty: {{ input.vatDue }} zł", "assignees": ["role:admin"], "timeoutMs": 172800000, "fourEyes": true}`},
		{&as.input, "Brakująca faktura", `{"kind": "input", "title": "Uzupełnij fakturę – {{ input.client }}", "assignees": ["role:accountant"], "timeoutMs": 172800000,
		  "schema": {"fields": [{"name": "invoiceNo", "label": "Numer faktury", "type": "string", "required": true, "pattern": "^FV/"},
		    {"name": "amount", "label": "Kwota", "type": "amount", "min": "0.01"}, {"name": "category", "label": "Rodzaj", "type": "enum", "options": ["cost", "transfer"]},
		    {"name": "paidOn", "label": "Zapłacono", "type": "date"}, {"name": "n", "label": "Pozycje", "type": "number", "min": 1, "max": 10},
		    {"name": "ok", "label": "Sprawdzone", "type": "boolean"}]}}`},
		{&as.decision, "Niedopasowana transakcja", `{"kind": "decision", "title": "Co to za przelew – {{ input.client }}?", "assignees": ["role:accountant"], "timeoutMs": 172800000,
		  "options": [{"id": "cost", "label": "Koszt"}, {"id": "storno", "label": "Storno", "destructive": true}], "defaultOption": "cost"}`},
	} {
		def := fmt.Sprintf(`{"name": %q, %s, "steps": [%s, {"id": "ask", "name": "Pytanie", "type": "ask", "config": %s}, %s]}`, w.name, settings, prepare, w.ask, file)
		wf, err := a.wfs.Create(ctx, as.org, actorSystem, []byte(def))
		if err != nil {
			a.t.Fatalf("%s: %v", w.name, err)
		}
		*w.dst = wf.ID
	}
	return as
}

// startAsk starts wf by the API (token) and waits until it waits for its request: the
// execution's id and the request's (from the execution's interventionId).
func (a *app) startAsk(token, wf, client string) (string, string) {
	a.t.Helper()
	r := do(a.t, http.DefaultClient, "POST", a.srv.URL+"/api/v1/workflows/"+wf+"/executions",
		fmt.Sprintf(`{"input": {"client": %q, "period": "2026-10", "vatDue": "64890.27"}}`, client), bearer(token))
	if r.status != http.StatusCreated {
		a.t.Fatalf("start: %d %s", r.status, r.body)
	}
	exID := r.json(a.t)["id"].(string)
	return exID, a.waitingOn(token, exID)
}

// waitingOn polls the execution until it is WAITING and returns its request's id.
func (a *app) waitingOn(token, exID string) string {
	a.t.Helper()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		m := do(a.t, http.DefaultClient, "GET", a.srv.URL+"/api/v1/executions/"+exID, "", bearer(token)).json(a.t)
		if id, _ := m["interventionId"].(string); m["status"] == models.ExecWaiting && id != "" {
			return id
		}
		if time.Now().After(deadline) {
			a.t.Fatalf("execution %s does not wait for a request: %v", exID, m)
		}
	}
}

// finalStatus polls the execution until it has finished and returns its status.
func (a *app) finalStatus(token, exID string) string {
	a.t.Helper()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		m := do(a.t, http.DefaultClient, "GET", a.srv.URL+"/api/v1/executions/"+exID, "", bearer(token)).json(a.t)
		if m["finishedAt"] != nil {
			return m["status"].(string)
		}
		if time.Now().After(deadline) {
			a.t.Fatalf("execution %s has not finished: %v", exID, m)
		}
	}
}

func postJSON(t testing.TB, u, token, body string, extra map[string]string) resp {
	t.Helper()
	h := bearer(token)
	h["Content-Type"] = "application/json"
	for k, v := range extra {
		h[k] = v
	}
	return do(t, http.DefaultClient, "POST", u, body, h)
}

func sendForm(t testing.TB, c *http.Client, u string, form url.Values) resp {
	t.Helper()
	return do(t, c, "POST", u, form.Encode(), map[string]string{"Content-Type": "application/x-www-form-urlencoded"})
}

// TestInterventionsAPI: an approval through the API. The waiting execution shows WAITING
// with its request's id; the request is listed (status, mine) and read; another
// organization's is 404 to read, list and answer; a bad filter is 422 naming it; a viewer's
// token is 403, an accountant who does not hold it 403, a bad answer 422 with the field
// named; the partner's approval is 200 and the filing runs with it (SUCCEEDED); the same
// Idempotency-Key again gets the same answer, another answer 409 naming who answered (the
// partner's API token).
func TestInterventionsAPI(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		a := newApp(t, db)
		as := a.askSetup("Biuro Akceptacji API")
		other := a.tenant("Biuro Obce Akceptacji")
		exID, ivID := a.startAsk(as.token, as.approval, "Mazur Budownictwo")
		base := a.srv.URL + "/api/v1/interventions"

		list := do(t, http.DefaultClient, "GET", base+"?status=open&mine=true", "", bearer(as.partnerToken))
		items, _ := list.json(t)["items"].([]any)
		if list.status != 200 || len(items) != 1 {
			t.Fatalf("list: %d %s", list.status, list.body)
		}
		it := items[0].(map[string]any)
		if it["id"] != ivID || it["executionId"] != exID || it["stepId"] != "ask" || it["kind"] != "approval" || it["status"] != "open" ||
			it["title"] != "Zatwierdź VAT 2026-10 – Mazur Budownictwo" || it["expiresAt"] == nil {
			t.Errorf("listed: %v", it)
		}
		if asg, _ := it["assignees"].([]any); len(asg) != 1 || asg[0] != "role:admin" {
			t.Errorf("assignees: %v", it["assignees"])
		}
		if r := do(t, http.DefaultClient, "GET", base+"?status=answered", "", bearer(as.token)); len(r.json(t)["items"].([]any)) != 0 {
			t.Errorf("answered before any answer: %s", r.body)
		}
		for _, q := range []string{"status=maybe", "mine=perhaps"} {
			r := do(t, http.DefaultClient, "GET", base+"?"+q, "", bearer(as.token))
			if key := strings.Split(q, "=")[0]; r.status != 422 || fieldsOf(t, r)[key] == nil {
				t.Errorf("%s: %d %s", q, r.status, r.body)
			}
		}
		if r := do(t, http.DefaultClient, "GET", base+"/"+ivID, "", bearer(as.viewerToken)); r.status != 200 || r.json(t)["message"] != "VAT do zapłaty: 64890.27 zł" {
			t.Errorf("get (viewer): %d %s", r.status, r.body)
		}

		// Another organization: not found, nothing listed, nothing answered.
		if r := do(t, http.DefaultClient, "GET", base+"/"+ivID, "", bearer(other.token)); r.status != 404 {
			t.Errorf("another organization reads: %d", r.status)
		}
		if r := do(t, http.DefaultClient, "GET", base+"?status=open", "", bearer(other.token)); len(r.json(t)["items"].([]any)) != 0 {
			t.Errorf("another organization lists: %s", r.body)
		}
		if r := postJSON(t, base+"/"+ivID+"/answer", other.token, `{"answer": "approved"}`, nil); r.status != 404 {
			t.Errorf("another organization answers: %d %s", r.status, r.body)
		}
		if r := do(t, http.DefaultClient, "GET", a.srv.URL+"/api/v1/executions/"+exID, "", bearer(other.token)); r.status != 404 {
			t.Errorf("another organization's execution: %d", r.status)
		}

		// Roles, then a bad answer: nothing recorded.
		if r := postJSON(t, base+"/"+ivID+"/answer", as.viewerToken, `{"answer": "approved"}`, nil); r.status != 403 {
			t.Errorf("viewer answers: %d %s", r.status, r.body)
		}
		if r := postJSON(t, base+"/"+ivID+"/answer", as.accountantToken, `{"answer": "approved"}`, nil); r.status != 403 {
			t.Errorf("an accountant who does not hold it answers: %d %s", r.status, r.body)
		}
		for body, field := range map[string]string{`{"answer": "maybe"}`: "answer", `{"answer": 1}`: "body", `{"answer": "approved", "extra": 1}`: "body", `[]`: "body"} {
			if r := postJSON(t, base+"/"+ivID+"/answer", as.partnerToken, body, nil); r.status != 422 || fieldsOf(t, r)[field] == nil {
				t.Errorf("%s: %d %s", body, r.status, r.body)
			}
		}
		if r := do(t, http.DefaultClient, "GET", base+"/"+ivID, "", bearer(as.token)); r.json(t)["status"] != "open" {
			t.Fatalf("after refusals: %s", r.body)
		}

		// The partner approves: 200, and the filing runs with the answer.
		key := map[string]string{"Idempotency-Key": "approve-2026-10-mazur"}
		r := postJSON(t, base+"/"+ivID+"/answer", as.partnerToken, `{"answer": "approved", "note": "Kwoty zgodne z rejestrem"}`, key)
		if r.status != 200 || r.json(t)["status"] != "answered" {
			t.Fatalf("approve: %d %s", r.status, r.body)
		}
		if st := a.finalStatus(as.token, exID); st != models.ExecSucceeded {
			t.Fatalf("after the approval the execution ended %s", st)
		}
		filed := as.filed.all()
		if len(filed) != 1 {
			t.Fatalf("filings: %v", filed)
		}
		asked, _ := filed[0]["asked"].(map[string]any)
		if asked["answer"] != "approved" || asked["note"] != "Kwoty zgodne z rejestrem" {
			t.Errorf("the filing read the answer as %v", filed[0])
		}
		// The same key again: the same answer, not a conflict; another answer: 409 naming who.
		again := postJSON(t, base+"/"+ivID+"/answer", as.partnerToken, `{"answer": "approved", "note": "Kwoty zgodne z rejestrem"}`, key)
		if again.status != 200 || again.json(t)["status"] != "answered" {
			t.Errorf("the same Idempotency-Key again: %d %s", again.status, again.body)
		}
		late := postJSON(t, base+"/"+ivID+"/answer", as.token, `{"answer": "rejected", "note": "za późno"}`, nil)
		if late.status != 409 || !strings.Contains(late.body, "API token") {
			t.Errorf("a later answer: %d %s", late.status, late.body)
		}
		if len(as.filed.all()) != 1 {
			t.Error("the filing ran twice")
		}
		if r := do(t, http.DefaultClient, "GET", base+"?status=answered", "", bearer(as.token)); len(r.json(t)["items"].([]any)) != 1 {
			t.Errorf("answered list: %s", r.body)
		}
	})
}

// TestInterventionPages: "Czeka na Ciebie" and a request's page in Polish. The nav counts
// what waits for the user; an input request's form has the schema's fields with their types
// and limits; a bad answer comes back 422 with the fields' messages and what was typed; a
// good one goes back to the list with a flash and the execution goes on with typed values; a
// decision marks its destructive option and asks first; the viewer reads the request without
// a form and is refused (403) if she posts; the admin who started an approval is barred by
// four eyes (403) while the partner approves; an answered request's page says who answered
// and when, and a second answer is 409 saying so; another organization's request is 404.
func TestInterventionPages(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		a := newApp(t, db)
		as := a.askSetup("Biuro Stron Próśb")
		other := a.tenant("Biuro Obce Stron")
		ctx := context.Background()
		for _, u := range []string{as.email, as.accountant.email, as.viewer.email, as.partner.email} {
			if err := db.Conn(ctx).Model(&models.User{}).Where("email = ?", u).Update("language", "pl").Error; err != nil {
				t.Fatal(err)
			}
		}
		acc, accCSRF := a.browser(as.accountant)
		exInput, ivInput := a.startAsk(as.token, as.input, "Piekarnia Zielińscy")
		_, ivDecision := a.startAsk(as.token, as.decision, "Transport Lewandowski")

		// The list: both requests the accountant holds, with the count in the nav.
		page := do(t, acc, "GET", a.srv.URL+"/waiting", "", nil)
		if page.status != 200 || !strings.Contains(page.body, "Czeka na Ciebie") || strings.Count(page.body, `data-testid="ask-item"`) != 2 ||
			!strings.Contains(page.body, "Uzupełnij fakturę – Piekarnia Zielińscy") || !strings.Contains(page.body, `data-testid="ask-countdown"`) ||
			!strings.Contains(page.body, "księgowe") || !strings.Contains(page.body, `data-testid="ask-item-output" data-key="vatDue">64890.27<`) {
			t.Fatalf("waiting list: %d %s", page.status, page.body)
		}
		if !strings.Contains(page.body, `data-testid="nav-waiting"`) || !navBadge(page.body, "waiting", "2") {
			t.Errorf("nav has no waiting count of 2: %s", page.body)
		}
		// It refreshes itself (the list and the nav's count) from the page's own address.
		if !strings.Contains(page.body, `id="asks-live" hidden data-live hx-get="/waiting"`) || !strings.Contains(page.body, `id="asks-requests"`) ||
			!strings.Contains(page.body, `data-live-toggle="asks-live"`) {
			t.Error("the waiting list does not refresh itself")
		}
		if live := do(t, acc, "GET", a.srv.URL+"/waiting", "", map[string]string{"X-Live": "1", "HX-Request": "true"}); live.status != 200 ||
			strings.Count(live.body, `data-testid="ask-item"`) != 2 || !strings.Contains(live.body, `id="topnav"`) {
			t.Errorf("the live refresh: %d", live.status)
		}

		// The input form: typed fields.
		ivPath := a.srv.URL + "/interventions/" + ivInput
		page = do(t, acc, "GET", ivPath, "", nil)
		for _, want := range []string{`name="values.invoiceNo"`, `pattern="^FV/"`, `inputmode="decimal"`, `type="date"`, `type="number"`, `min="1"`, `max="10"`,
			`type="checkbox"`, `<option value="transfer"`, `data-testid="ask-form"`} {
			if !strings.Contains(page.body, want) {
				t.Errorf("input form lacks %s", want)
			}
		}
		if t.Failed() {
			t.Fatalf("input page: %s", page.body)
		}
		answer := ivPath + "/answer"
		bad := url.Values{"_csrf": {accCSRF}, "values.invoiceNo": {"123/10"}, "values.amount": {"-5"}, "values.category": {"cost"}, "values.n": {"42"}}
		r := sendForm(t, acc, answer, bad)
		if r.status != 422 || !strings.Contains(r.body, `value="123/10"`) || strings.Count(r.body, `data-testid="field-error"`) < 2 ||
			!strings.Contains(r.body, `aria-describedby="ask-invoiceNo-error"`) {
			t.Fatalf("bad input: %d %s", r.status, r.body)
		}
		good := url.Values{"_csrf": {accCSRF}, "values.invoiceNo": {"FV/2026/10/77"}, "values.amount": {"1 234,5"}, "values.category": {"transfer"},
			"values.paidOn": {"2026-11-20"}, "values.n": {"3"}, "values.ok": {"true"}}
		r = sendForm(t, acc, answer, good)
		if r.status != http.StatusSeeOther || r.header.Get("Location") != "/waiting?done=answered" {
			t.Fatalf("good input: %d %s %s", r.status, r.header.Get("Location"), r.body)
		}
		page = do(t, acc, "GET", a.srv.URL+"/waiting?done=answered", "", nil)
		if !strings.Contains(page.body, "Odpowiedź zapisana") || strings.Count(page.body, `data-testid="ask-item"`) != 1 {
			t.Errorf("after the answer: %s", page.body)
		}
		if st := a.finalStatus(as.token, exInput); st != models.ExecSucceeded {
			t.Fatalf("input execution ended %s", st)
		}
		var values map[string]any
		for _, b := range as.filed.all() {
			if b["client"] == "Piekarnia Zielińscy" {
				values, _ = b["asked"].(map[string]any)
			}
		}
		if values["invoiceNo"] != "FV/2026/10/77" || values["amount"] != "1234.50" || values["n"] != float64(3) || values["ok"] != true || values["paidOn"] != "2026-11-20" {
			t.Errorf("typed values: %v", values)
		}
		// Answered: the page says who and when; a second answer is 409 and says so.
		page = do(t, acc, "GET", ivPath, "", nil)
		if !strings.Contains(page.body, `data-testid="ask-outcome" data-status="answered"`) || !strings.Contains(page.body, as.accountant.email) ||
			strings.Contains(page.body, `data-testid="ask-form"`) {
			t.Errorf("answered page: %s", page.body)
		}
		r = sendForm(t, acc, answer, good)
		if r.status != 409 || !strings.Contains(r.body, `data-testid="ask-conflict"`) || !strings.Contains(r.body, "Ktoś odpowiedział pierwszy: "+as.accountant.email) {
			t.Errorf("second answer: %d %s", r.status, r.body)
		}

		// The decision: the destructive option is marked and asks first.
		page = do(t, acc, "GET", a.srv.URL+"/interventions/"+ivDecision, "", nil)
		if !strings.Contains(page.body, `data-option="storno" data-destructive="true"`) || !strings.Contains(page.body, "data-confirm=\"Wybrać „Storno”?") {
			t.Errorf("decision form: %s", page.body)
		}

		// The viewer reads it, without a form, and cannot post.
		viewer, viewerCSRF := a.browser(as.viewer)
		page = do(t, viewer, "GET", a.srv.URL+"/interventions/"+ivDecision, "", nil)
		if page.status != 200 || strings.Contains(page.body, `data-testid="ask-form"`) || !strings.Contains(page.body, `data-testid="ask-cannot"`) {
			t.Errorf("viewer's page: %d %s", page.status, page.body)
		}
		if r := sendForm(t, viewer, a.srv.URL+"/interventions/"+ivDecision+"/answer", url.Values{"_csrf": {viewerCSRF}, "option": {"cost"}}); r.status != 403 {
			t.Errorf("viewer posts: %d", r.status)
		}
		r = sendForm(t, acc, a.srv.URL+"/interventions/"+ivDecision+"/answer", url.Values{"_csrf": {accCSRF}, "option": {"nothing"}})
		if r.status != 422 {
			t.Errorf("unknown option: %d %s", r.status, r.body)
		}

		// Four eyes: the admin who started the filing from its page may not approve it.
		admin, adminCSRF := a.browser(as.tenant)
		r = sendForm(t, admin, a.srv.URL+"/workflows/"+as.approval+"/executions", url.Values{"_csrf": {adminCSRF},
			"input": {`{"client": "Mazur Budownictwo", "period": "2026-10", "vatDue": "64890.27"}`}})
		if r.status != http.StatusSeeOther && r.status != http.StatusOK {
			t.Fatalf("start from the page: %d %s", r.status, r.body)
		}
		var ex models.Execution
		if err := db.Conn(ctx).Where("organization_id = ? AND workflow_id = ?", as.org, as.approval).First(&ex).Error; err != nil {
			t.Fatal(err)
		}
		ivApproval := a.waitingOn(as.token, ex.ID)
		page = do(t, admin, "GET", a.srv.URL+"/interventions/"+ivApproval, "", nil)
		if strings.Contains(page.body, `data-testid="ask-form"`) || !strings.Contains(page.body, `data-testid="ask-cannot"`) {
			t.Errorf("the starter's page offers the form: %s", page.body)
		}
		if r := sendForm(t, admin, a.srv.URL+"/interventions/"+ivApproval+"/answer", url.Values{"_csrf": {adminCSRF}, "answer": {"approved"}}); r.status != 403 {
			t.Errorf("the starter approves: %d %s", r.status, r.body)
		}
		partner, partnerCSRF := a.browser(as.partner)
		page = do(t, partner, "GET", a.srv.URL+"/interventions/"+ivApproval, "", nil)
		if !strings.Contains(page.body, `data-testid="ask-approve"`) || !strings.Contains(page.body, `data-testid="ask-reject"`) {
			t.Fatalf("the partner's page: %s", page.body)
		}
		if r := sendForm(t, partner, a.srv.URL+"/interventions/"+ivApproval+"/answer", url.Values{"_csrf": {partnerCSRF}, "answer": {"approved"},
			"note": {"OK"}}); r.status != http.StatusSeeOther {
			t.Errorf("the partner approves: %d %s", r.status, r.body)
		}
		if st := a.finalStatus(as.token, ex.ID); st != models.ExecSucceeded {
			t.Errorf("approved execution ended %s", st)
		}

		// Another organization's request: 404.
		stranger, _ := a.browser(other)
		if r := do(t, stranger, "GET", a.srv.URL+"/interventions/"+ivDecision, "", nil); r.status != 404 {
			t.Errorf("another organization's request: %d", r.status)
		}
	})
}

// navBadge reports whether the nav item id shows count n.
func navBadge(body, id, n string) bool {
	i := strings.Index(body, `data-testid="nav-`+id+`"`)
	if i < 0 {
		return false
	}
	end := strings.Index(body[i:], "</a>")
	return end > 0 && strings.Contains(body[i:i+end], `data-testid="nav-badge">`+n+`</span>`)
}

// linkFor makes an e-mail link's token for the user to the request, as the engine stores it
// (hashed), and returns the token.
func linkFor(t *testing.T, db *models.DB, org, ivID, email string, expires time.Time) string {
	t.Helper()
	ctx := context.Background()
	var u models.User
	if err := db.Conn(ctx).Where("email = ?", email).First(&u).Error; err != nil {
		t.Fatal(err)
	}
	token := strings.ReplaceAll(models.NewID()+models.NewID(), "-", "")
	sum := sha256.Sum256([]byte(token))
	if err := db.Conn(ctx).Create(&models.InterventionLink{ID: models.NewID(), OrganizationID: org, InterventionID: ivID, UserID: u.ID,
		TokenHash: hex.EncodeToString(sum[:]), ExpiresAt: expires, CreatedAt: time.Now().UTC()}).Error; err != nil {
		t.Fatal(err)
	}
	return token
}

// TestInterventionEmailLink: the e-mail link opens the request after login (the login
// comes back to it) and acts on nothing by GET; the form carries the token and the answer
// uses it once: opened again it says it was used; a link sent to someone else and an
// expired one say so in words and carry no token.
func TestInterventionEmailLink(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		a := newApp(t, db)
		as := a.askSetup("Biuro Linków")
		ctx := context.Background()
		for _, u := range []string{as.accountant.email, as.partner.email} {
			if err := db.Conn(ctx).Model(&models.User{}).Where("email = ?", u).Update("language", "pl").Error; err != nil {
				t.Fatal(err)
			}
		}
		exID, ivID := a.startAsk(as.token, as.approval, "Kowalski Sp. z o.o.")
		var iv models.Intervention
		if err := db.Conn(ctx).Where("id = ?", ivID).First(&iv).Error; err != nil {
			t.Fatal(err)
		}
		token := linkFor(t, db, as.org, ivID, as.partner.email, iv.ExpiresAt)
		link := "/interventions/" + ivID + "?link=" + token

		// Not logged in: the login page, which comes back to the link.
		anon := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		r := do(t, anon, "GET", a.srv.URL+link, "", nil)
		if r.status != http.StatusSeeOther || r.header.Get("Location") != "/login?next="+url.QueryEscape(link) {
			t.Fatalf("the link before login: %d %s", r.status, r.header.Get("Location"))
		}
		partner, csrf := a.browser(as.partner)
		for range 2 { // opening it (twice) acts on nothing
			page := do(t, partner, "GET", a.srv.URL+link, "", nil)
			if page.status != 200 || !strings.Contains(page.body, `name="link" value="`+token+`"`) || strings.Contains(page.body, `data-testid="ask-link-note"`) {
				t.Fatalf("the link after login: %d %s", page.status, page.body)
			}
		}
		if r := do(t, http.DefaultClient, "GET", a.srv.URL+"/api/v1/interventions/"+ivID, "", bearer(as.token)); r.json(t)["status"] != "open" {
			t.Fatalf("opening the link acted: %s", r.body)
		}

		// Someone else's link: said in words, no token in the form.
		acc, _ := a.browser(as.accountant)
		page := do(t, acc, "GET", a.srv.URL+link, "", nil)
		if !strings.Contains(page.body, "wysłano innej osobie") || strings.Contains(page.body, `name="link"`) {
			t.Errorf("another user's link: %s", page.body)
		}
		// An expired link.
		old := linkFor(t, db, as.org, ivID, as.accountant.email, time.Now().Add(-time.Hour))
		page = do(t, acc, "GET", a.srv.URL+"/interventions/"+ivID+"?link="+old, "", nil)
		if !strings.Contains(page.body, "wygasł") {
			t.Errorf("an expired link: %s", page.body)
		}

		// The answer through the link uses it: once.
		r = sendForm(t, partner, a.srv.URL+"/interventions/"+ivID+"/answer", url.Values{"_csrf": {csrf}, "link": {token}, "answer": {"approved"}})
		if r.status != http.StatusSeeOther {
			t.Fatalf("answer through the link: %d %s", r.status, r.body)
		}
		var used models.InterventionLink
		sum := sha256.Sum256([]byte(token))
		if err := db.Conn(ctx).Where("token_hash = ?", hex.EncodeToString(sum[:])).First(&used).Error; err != nil || used.UsedAt == nil {
			t.Errorf("the link was not used up: %v %+v", err, used)
		}
		page = do(t, partner, "GET", a.srv.URL+link, "", nil)
		if !strings.Contains(page.body, "został już użyty") || strings.Contains(page.body, `name="link"`) {
			t.Errorf("the used link: %s", page.body)
		}
		if st := a.finalStatus(as.token, exID); st != models.ExecSucceeded {
			t.Errorf("execution ended %s", st)
		}
	})
}

// TestCancelWaitingExecution: an admin cancels a waiting execution with a note (API and
// page): a note is required (422), accountants are refused (403), another organization's is
// 404, the execution ends FAILED and its request cancelled; cancelling it again is 409. The
// waiting execution's page shows its request with a link and, for admins only, the cancel.
func TestCancelWaitingExecution(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		a := newApp(t, db)
		as := a.askSetup("Biuro Anulowania")
		other := a.tenant("Biuro Obce Anulowania")
		exID, ivID := a.startAsk(as.token, as.approval, "Jankowski Auto Serwis")
		cancel := a.srv.URL + "/api/v1/executions/" + exID + "/cancel"

		admin, adminCSRF := a.browser(as.tenant)
		page := do(t, admin, "GET", a.srv.URL+"/executions/"+exID, "", nil)
		if !strings.Contains(page.body, `data-testid="execution-waiting"`) || !strings.Contains(page.body, "/interventions/"+ivID) ||
			!strings.Contains(page.body, `data-testid="execution-cancel-form"`) {
			t.Fatalf("waiting execution's page (admin): %s", page.body)
		}
		acc, _ := a.browser(as.accountant)
		page = do(t, acc, "GET", a.srv.URL+"/executions/"+exID, "", nil)
		if !strings.Contains(page.body, `data-testid="execution-waiting"`) || strings.Contains(page.body, `data-testid="execution-cancel-form"`) {
			t.Errorf("waiting execution's page (accountant): %s", page.body)
		}

		if r := postJSON(t, cancel, as.token, `{"note": ""}`, nil); r.status != 422 || fieldsOf(t, r)["note"] == nil {
			t.Errorf("no note: %d %s", r.status, r.body)
		}
		if r := postJSON(t, cancel, as.accountantToken, `{"note": "klient wycofał"}`, nil); r.status != 403 {
			t.Errorf("accountant cancels: %d", r.status)
		}
		if r := postJSON(t, a.srv.URL+"/api/v1/executions/"+exID+"/cancel", other.token, `{"note": "obcy"}`, nil); r.status != 404 {
			t.Errorf("another organization cancels: %d %s", r.status, r.body)
		}
		if r := sendForm(t, admin, a.srv.URL+"/executions/"+exID+"/cancel", url.Values{"_csrf": {adminCSRF}, "note": {""}}); r.status != 422 {
			t.Errorf("the page's cancel without a note: %d", r.status)
		}
		r := sendForm(t, admin, a.srv.URL+"/executions/"+exID+"/cancel", url.Values{"_csrf": {adminCSRF}, "note": {"Klient wycofał deklarację"}})
		if r.status != http.StatusSeeOther || r.header.Get("Location") != "/executions/"+exID {
			t.Fatalf("cancel from the page: %d %s", r.status, r.body)
		}
		if st := a.finalStatus(as.token, exID); st != models.ExecFailed {
			t.Errorf("cancelled execution ended %s", st)
		}
		if r := do(t, http.DefaultClient, "GET", a.srv.URL+"/api/v1/interventions/"+ivID, "", bearer(as.token)); r.json(t)["status"] != "cancelled" {
			t.Errorf("the request after the cancel: %s", r.body)
		}
		if r := postJSON(t, cancel, as.token, `{"note": "jeszcze raz"}`, nil); r.status != 409 {
			t.Errorf("cancel twice: %d %s", r.status, r.body)
		}
		if len(as.filed.all()) != 0 {
			t.Error("a cancelled execution filed")
		}

		// The API's cancel of another waiting one: 200.
		ex2, _ := a.startAsk(as.token, as.approval, "Nowak i Wspólnicy")
		if r := postJSON(t, a.srv.URL+"/api/v1/executions/"+ex2+"/cancel", as.token, `{"note": "duplikat"}`, nil); r.status != 200 || r.json(t)["status"] != models.ExecFailed {
			t.Errorf("API cancel: %d %s", r.status, r.body)
		}
	})
}

// TestInterventionErrorResolutionPage: a failed step handed to an error_resolution request
// shows its error on the request's page with "continue" and "abort" (abort marked and asking
// first); an accountant continues with a note and the execution goes on at the handler's
// next step and succeeds.
func TestInterventionErrorResolutionPage(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		a := newApp(t, db)
		rs := a.recoverySetup("Biuro Rozwiązań")
		ctx := context.Background()
		if err := db.Conn(ctx).Model(&models.User{}).Where("email = ?", rs.accountant.email).Update("language", "pl").Error; err != nil {
			t.Fatal(err)
		}
		wf, err := a.wfs.Create(ctx, rs.org, actorSystem, fmt.Appendf(nil, `{"name": "Wysyłka z rozwiązaniem", "settings": {"retryPolicy": {"maxRetries": 0}}, "steps": [
		  {"id": "file", "name": "Wysyłka", "type": "http", "config": {"method": "POST", "url": "%s/bad", "body": {"nip": "{{ input.nip }}"}},
		   "onFailure": {"handlerStepId": "resolve"}},
		  {"id": "email", "name": "Powiadomienie", "type": "transform", "config": {"output": {"sent": true}}},
		  {"id": "resolve", "name": "Rozwiązanie", "type": "ask", "handler": true, "next": "email",
		   "config": {"kind": "error_resolution", "title": "Popraw wysyłkę", "assignees": ["role:accountant"], "timeoutMs": 60000}}]}`, a.ext.URL))
		if err != nil {
			t.Fatal(err)
		}
		r := do(t, http.DefaultClient, "POST", a.srv.URL+"/api/v1/workflows/"+wf.ID+"/executions", `{"input": {"nip": "526"}}`, bearer(rs.token))
		if r.status != 201 {
			t.Fatalf("start: %d %s", r.status, r.body)
		}
		exID := r.json(t)["id"].(string)
		ivID := a.waitingOn(rs.token, exID)
		acc, csrf := a.browser(rs.accountant)
		page := do(t, acc, "GET", a.srv.URL+"/interventions/"+ivID, "", nil)
		if !strings.Contains(page.body, `data-testid="ask-failed"`) || !strings.Contains(page.body, "Krok „Wysyłka” zakończył się błędem") ||
			!strings.Contains(page.body, `data-option="continue"`) || !strings.Contains(page.body, `data-option="abort" data-destructive="true"`) {
			t.Fatalf("error resolution page: %s", page.body)
		}
		if strings.Contains(page.body, `data-testid="ask-message"`) {
			t.Errorf("the page says the error twice: as the request's message and in the failure box: %s", page.body[strings.Index(page.body, `data-testid="ask-message"`):][:300])
		}
		r = sendForm(t, acc, a.srv.URL+"/interventions/"+ivID+"/answer", url.Values{"_csrf": {csrf}, "option": {"continue"}, "note": {"NIP sprawdzony"}})
		if r.status != http.StatusSeeOther {
			t.Fatalf("continue: %d %s", r.status, r.body)
		}
		if st := a.finalStatus(rs.token, exID); st != models.ExecSucceeded {
			t.Errorf("after continue the execution ended %s", st)
		}
	})
}

// TestAdminWaitingListsTheirsFirst: an admin may answer any request, but "Czeka na Ciebie"
// (and its count in the nav) is what was assigned to them; the requests assigned to others
// follow apart, each still one click from its form. An accountant's list has no such part.
func TestAdminWaitingListsTheirsFirst(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		a := newApp(t, db)
		as := a.askSetup("Biuro Prośby Administratora")
		if err := db.Conn(context.Background()).Model(&models.User{}).Where("email IN ?", []string{as.partner.email, as.accountant.email}).
			Update("language", "pl").Error; err != nil {
			t.Fatal(err)
		}
		_, ivApproval := a.startAsk(as.token, as.approval, "Mazur Budownictwo")
		_, ivInput := a.startAsk(as.token, as.input, "Piekarnia Zielińscy")
		partner, _ := a.browser(as.partner)
		page := do(t, partner, "GET", a.srv.URL+"/waiting", "", nil).body
		mine, others := strings.Index(page, `data-testid="asks-list"`), strings.Index(page, `data-testid="asks-others"`)
		if mine < 0 || others < mine {
			t.Fatalf("the admin's list: no own part before the others' part: %s", page)
		}
		if !strings.Contains(page[mine:others], `data-id="`+ivApproval+`"`) || strings.Contains(page[mine:others], `data-id="`+ivInput+`"`) {
			t.Error("the admin's own part does not hold just the approval assigned to admins")
		}
		if !strings.Contains(page[others:], `data-id="`+ivInput+`"`) || !strings.Contains(page[others:], "Inne otwarte prośby") ||
			!strings.Contains(page[others:], `href="/interventions/`+ivInput+`"`) {
			t.Error("the others' part does not hold the accountants' input request with its link")
		}
		if !navBadge(page, "waiting", "1") {
			t.Error("the admin's nav count is not 1 (the approval alone)")
		}
		// The accountant: the input request, counted; no others' part.
		acc, _ := a.browser(as.accountant)
		page = do(t, acc, "GET", a.srv.URL+"/waiting", "", nil).body
		if strings.Contains(page, `data-testid="asks-others"`) || !strings.Contains(page, `data-id="`+ivInput+`"`) ||
			strings.Contains(page, `data-id="`+ivApproval+`"`) || !navBadge(page, "waiting", "1") {
			t.Errorf("the accountant's list: %s", page)
		}
	})
}
