package pages_test

import (
	"bytes"
	"context"
	"encoding/json"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/a-h/templ"
	"golang.org/x/net/html"

	"lifeline/views/components"
	"lifeline/views/i18n"
	"lifeline/views/layouts"
	"lifeline/views/pages"
)

// ---------- helpers ----------

func render(t *testing.T, c templ.Component) (*html.Node, string) {
	t.Helper()
	return renderIn(t, context.Background(), c)
}

// renderIn renders with ctx (which may carry a localizer).
func renderIn(t *testing.T, ctx context.Context, c templ.Component) (*html.Node, string) {
	t.Helper()
	var buf bytes.Buffer
	if err := c.Render(ctx, &buf); err != nil {
		t.Fatalf("render: %v", err)
	}
	doc, err := html.Parse(strings.NewReader(buf.String()))
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	return doc, buf.String()
}

func findAll(n *html.Node, pred func(*html.Node) bool) []*html.Node {
	var out []*html.Node
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.ElementNode && pred(n) {
			out = append(out, n)
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(n)
	return out
}

func byTestID(n *html.Node, id string) []*html.Node {
	return findAll(n, func(n *html.Node) bool { return attr(n, "data-testid") == id })
}

func byTag(n *html.Node, tag string) []*html.Node {
	return findAll(n, func(n *html.Node) bool { return n.Data == tag })
}

func byID(t *testing.T, n *html.Node, id string) *html.Node {
	t.Helper()
	found := findAll(n, func(n *html.Node) bool { return attr(n, "id") == id })
	if len(found) != 1 {
		t.Fatalf("want exactly one #%s, got %d", id, len(found))
	}
	return found[0]
}

func one(t *testing.T, n *html.Node, testID string) *html.Node {
	t.Helper()
	found := byTestID(n, testID)
	if len(found) != 1 {
		t.Fatalf("want exactly one [data-testid=%s], got %d", testID, len(found))
	}
	return found[0]
}

func none(t *testing.T, n *html.Node, testID string) {
	t.Helper()
	if found := byTestID(n, testID); len(found) != 0 {
		t.Fatalf("want no [data-testid=%s], got %d", testID, len(found))
	}
}

func attr(n *html.Node, key string) string {
	for _, a := range n.Attr {
		if a.Key == key {
			return a.Val
		}
	}
	return ""
}

func hasAttr(n *html.Node, key string) bool {
	for _, a := range n.Attr {
		if a.Key == key {
			return true
		}
	}
	return false
}

// text is the whitespace-normalised text content of n.
func text(n *html.Node) string {
	var b strings.Builder
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.TextNode {
			b.WriteString(n.Data)
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(n)
	return strings.Join(strings.Fields(b.String()), " ")
}

func texts(ns []*html.Node) []string {
	out := make([]string, len(ns))
	for i, n := range ns {
		out[i] = text(n)
	}
	return out
}

func inputNamed(t *testing.T, form *html.Node, name string) *html.Node {
	t.Helper()
	found := findAll(form, func(n *html.Node) bool {
		return (n.Data == "input" || n.Data == "textarea" || n.Data == "select") && attr(n, "name") == name
	})
	if len(found) != 1 {
		t.Fatalf("want one control named %q, got %d", name, len(found))
	}
	return found[0]
}

// assertLabelled checks every visible form control has a <label for=id>.
func assertLabelled(t *testing.T, doc *html.Node) {
	t.Helper()
	labels := map[string]bool{}
	for _, l := range byTag(doc, "label") {
		labels[attr(l, "for")] = true
	}
	controls := findAll(doc, func(n *html.Node) bool {
		return (n.Data == "input" && attr(n, "type") != "hidden") || n.Data == "textarea" || n.Data == "select"
	})
	for _, c := range controls {
		if id := attr(c, "id"); id == "" || !labels[id] {
			t.Errorf("control name=%q id=%q has no <label for>", attr(c, "name"), id)
		}
	}
}

// ---------- fixtures ----------

const vatName = "Miesięczna deklaracja VAT (JPK_V7)"

func page(title string) layouts.Page {
	return layouts.Page{
		Title:     title,
		OrgName:   "Biuro Rachunkowe Nowak i Wspólnicy",
		UserEmail: "anna.kowalska@nowak-ksiegowosc.pl",
		Role:      "editor",
		CSRFToken: "csrf-123",
		LogoutURL: "/logout",
		Nav: []layouts.NavItem{
			{ID: "workflows", Label: "Workflows", URL: "/workflows"},
			{ID: "executions", Label: "Executions", URL: "/executions", Active: true},
			{ID: "dead-letters", Label: "Dead letters", URL: "/dlq", Badge: 40},
		},
	}
}

func execRows() []pages.ExecutionRow {
	return []pages.ExecutionRow{
		{ID: "01J9ZQ4X7M2K8N3P5R6S7T8V9W", ShortID: "01J9ZQ4X", URL: "/executions/01J9ZQ4X7M2K8N3P5R6S7T8V9W", WorkflowName: vatName, WorkflowURL: "/workflows/wf_vat", Status: "DLQ", Trigger: "schedule", CreatedAt: "2025-03-25T07:00:02Z", CreatedAtText: "2025-03-25 07:00 UTC", Duration: "6m 12s", CurrentStep: "Wysyłka do e-Deklaracji", ErrorType: "authorization", ErrorMessage: "Certyfikat kwalifikowany wygasł 2025-03-21."},
		{ID: "01J9ZQ3A1B2C3D4E5F6G7H8J9K", ShortID: "01J9ZQ3A", URL: "/executions/01J9ZQ3A1B2C3D4E5F6G7H8J9K", WorkflowName: "Dopasowanie faktur z KSeF", WorkflowURL: "/workflows/wf_ksef", Status: "RETRYING", Trigger: "webhook", CreatedAt: "2025-03-25T06:58:40Z", CreatedAtText: "2025-03-25 06:58 UTC", CurrentStep: "Pobranie faktur z KSeF", ErrorType: "rate_limit", ErrorMessage: "429 Too Many Requests"},
		{ID: "01J9ZPZZ0000AAAABBBBCCCCDD", ShortID: "01J9ZPZZ", URL: "/executions/01J9ZPZZ0000AAAABBBBCCCCDD", WorkflowName: "Import wyciągu bankowego (mBank MT940)", WorkflowURL: "/workflows/wf_bank", Status: "SUCCEEDED", Trigger: "schedule", CreatedAt: "2025-03-25T06:30:00Z", CreatedAtText: "2025-03-25 06:30 UTC", Duration: "41s"},
	}
}

func executionVM(live bool) pages.ExecutionVM {
	vm := pages.ExecutionVM{
		ID: "01J9ZQ4X7M2K8N3P5R6S7T8V9W", ShortID: "01J9ZQ4X", Status: "DLQ",
		WorkflowName: vatName, WorkflowURL: "/workflows/wf_vat", Trigger: "schedule",
		CorrelationID: "jpk-2025-02-NIP5213456789",
		CreatedAt:     "2025-03-25T07:00:02Z", CreatedAtText: "2025-03-25 07:00:02 UTC",
		FinishedAt: "2025-03-25T07:06:14Z", FinishedAtText: "2025-03-25 07:06:14 UTC",
		Duration: "6m 12s", DLQURL: "/dlq/dl_7f3a9c", RefreshURL: "/executions/01J9ZQ4X/body",
		InputJSON: `{"nip":"5213456789","okres":"2025-02"}`,
		Failure:   &pages.FailureVM{StepID: "submit", StepName: "Wysyłka do e-Deklaracji", ErrorType: "authorization", ErrorCode: "EDEKL_SIG_401", Message: "Bramka e-Deklaracje odrzuciła podpis."},
		Steps: []pages.StepVM{
			{Index: 1, ID: "fetch-ledger", Name: "Pobranie rejestrów VAT", Type: "http", Status: "SUCCEEDED", Attempts: []pages.AttemptVM{
				{Number: 1, Status: "SUCCEEDED", StartedAt: "2025-03-25T07:00:03Z", StartedAtText: "2025-03-25 07:00:03 UTC", Duration: "1.8s", OutputJSON: `{"sprzedaz":112}`},
			}},
			{Index: 2, ID: "submit", Name: "Wysyłka do e-Deklaracji", Type: "http", Status: "FAILED", Attempts: []pages.AttemptVM{
				{Number: 1, Status: "FAILED", Duration: "2.1s", ErrorType: "timeout", ErrorCode: "HTTP_TIMEOUT", ErrorMessage: "Brak odpowiedzi w ciągu 30 s."},
				{Number: 2, Status: "FAILED", Duration: "1.2s", ErrorType: "external_service", ErrorMessage: "503 Service Unavailable"},
				{Number: 3, Status: "FAILED", Duration: "0.9s", ErrorType: "authorization", ErrorCode: "EDEKL_SIG_401", ErrorMessage: "Bramka e-Deklaracje odrzuciła podpis.", StackTrace: "goroutine 48 [running]:\nengine.(*HTTPStep).Run()", InputJSON: `{"plik":"JPK_V7M_2025_02.xml"}`, IdempotencyKey: "01J9ZQ4X:submit:3"},
			}},
			{Index: 3, ID: "fetch-upo", Name: "Pobranie UPO", Type: "http", Status: "SKIPPED"},
		},
	}
	if live {
		vm.Status = "RETRYING"
		vm.Failure = nil
		vm.DLQURL = ""
		vm.Live = true
		vm.Steps[1].Status = "RETRYING"
		vm.Steps[1].NextRetryAt = "2025-03-25T07:00:50Z"
		vm.Steps[1].NextRetryAtText = "2025-03-25 07:00:50 UTC"
		vm.Steps[2].Status = "PENDING"
	}
	return vm
}

func dlqRows() []pages.DLQRow {
	return []pages.DLQRow{
		{ID: "dl_1", URL: "/dlq/dl_1", ExecutionURL: "/executions/1", WorkflowName: vatName, WorkflowURL: "/workflows/wf_vat", FailedStep: "Wysyłka do e-Deklaracji", ErrorType: "authorization", ErrorMessage: "Certyfikat wygasł.", Status: "pending", CreatedAt: "2025-03-25T07:06:14Z", CreatedAtText: "2025-03-25 07:06 UTC", ExpiresAt: "2025-04-24T07:06:14Z", ExpiresAtText: "2025-04-24 07:06 UTC"},
		{ID: "dl_2", URL: "/dlq/dl_2", ExecutionURL: "/executions/2", WorkflowName: "Import wyciągu bankowego (mBank MT940)", FailedStep: "Pobranie wyciągu", ErrorType: "timeout", ErrorMessage: "Brak odpowiedzi z api.mbank.pl.", Status: "resolved", CreatedAt: "2025-03-24T22:10:00Z", CreatedAtText: "2025-03-24 22:10 UTC"},
	}
}

// ---------- layout ----------

func TestBaseNavUserAndAssets(t *testing.T) {
	t.Parallel()
	doc, _ := render(t, pages.Error(page("Executions"), pages.ErrorVM{Status: 404}))

	for _, id := range []string{"nav-workflows", "nav-executions", "nav-dead-letters"} {
		one(t, doc, id)
	}
	if got := attr(one(t, doc, "nav-executions"), "aria-current"); got != "page" {
		t.Errorf("active nav aria-current = %q, want page", got)
	}
	if hasAttr(one(t, doc, "nav-workflows"), "aria-current") {
		t.Error("inactive nav item has aria-current")
	}
	if got := text(one(t, doc, "nav-badge")); got != "40" {
		t.Errorf("nav badge = %q, want 40", got)
	}
	if got := text(one(t, doc, "user-email")); got != "anna.kowalska@nowak-ksiegowosc.pl" {
		t.Errorf("user email = %q", got)
	}
	if got := text(one(t, doc, "user-role")); got != "editor" {
		t.Errorf("role = %q", got)
	}
	one(t, doc, "org-name")

	logout := one(t, doc, "logout-form")
	if attr(logout, "method") != "post" || attr(logout, "action") != "/logout" {
		t.Errorf("logout form method=%q action=%q", attr(logout, "method"), attr(logout, "action"))
	}
	if v := attr(inputNamed(t, logout, "_csrf"), "value"); v != "csrf-123" {
		t.Errorf("logout _csrf = %q", v)
	}

	var css, scripts []string
	for _, l := range byTag(doc, "link") {
		css = append(css, attr(l, "href"))
	}
	for _, s := range byTag(doc, "script") {
		scripts = append(scripts, attr(s, "src"))
	}
	if strings.Join(css, ",") != "/static/css/app.css,/static/css/recovery.css,/static/css/breakers.css,/static/css/connections.css,/static/css/notifications.css,/static/css/forms.css" {
		t.Errorf("stylesheets = %v", css)
	}
	if strings.Join(scripts, ",") != "/static/js/htmx.min.js,/static/js/app.js,/static/js/forms.js" {
		t.Errorf("scripts = %v", scripts)
	}
	if got := text(byTag(doc, "title")[0]); got != "Executions · Lifeline" {
		t.Errorf("title = %q", got)
	}
	live := byID(t, doc, "toasts")
	if attr(live, "aria-live") == "" {
		t.Error("toast region has no aria-live")
	}
}

func TestBaseNoBadgeWhenZero(t *testing.T) {
	t.Parallel()
	p := page("x")
	p.Nav[2].Badge = 0
	doc, _ := render(t, pages.Error(p, pages.ErrorVM{Status: 500}))
	none(t, doc, "nav-badge")
}

func TestBaseLoggedOutHasNoNav(t *testing.T) {
	t.Parallel()
	p := layouts.Page{Title: "Sign in", CSRFToken: "t", Nav: page("").Nav}
	doc, _ := render(t, pages.Login(p, pages.LoginVM{Action: "/login"}))
	none(t, doc, "topbar")
	none(t, doc, "logout-form")
	if n := len(byTag(doc, "nav")); n != 0 {
		t.Errorf("logged-out page has %d <nav>", n)
	}
}

func TestBaseCSRFHeaderIsEscapedJSON(t *testing.T) {
	t.Parallel()
	token := `a"b'</script><img src=x onerror=alert(1)>&\`
	p := page("x")
	p.CSRFToken = token
	doc, raw := render(t, pages.Error(p, pages.ErrorVM{Status: 500}))

	body := byTag(doc, "body")[0]
	var headers map[string]string
	if err := json.Unmarshal([]byte(attr(body, "hx-headers")), &headers); err != nil {
		t.Fatalf("hx-headers is not JSON: %v (%q)", err, attr(body, "hx-headers"))
	}
	if headers["X-CSRF-Token"] != token {
		t.Errorf("X-CSRF-Token = %q, want %q", headers["X-CSRF-Token"], token)
	}
	if strings.Contains(raw, "<img src=x") || strings.Contains(raw, "</script><img") {
		t.Error("token leaked into the markup unescaped")
	}
	if n := len(byTag(doc, "img")); n != 0 {
		t.Errorf("token produced %d <img> elements", n)
	}
	if got := layouts.CSRFHeaders(`<x>`); got != `{"X-CSRF-Token":"\u003cx\u003e"}` {
		t.Errorf("CSRFHeaders = %s", got)
	}
}

func TestBaseFlash(t *testing.T) {
	t.Parallel()
	p := page("x")
	p.Flash = "Execution 01J9ZQ5B started."
	doc, _ := render(t, pages.Error(p, pages.ErrorVM{Status: 404}))
	if got := text(one(t, doc, "flash")); got != p.Flash {
		t.Errorf("flash = %q", got)
	}
}

// ---------- login ----------

func TestLogin(t *testing.T) {
	t.Parallel()
	p := layouts.Page{Title: "Sign in", CSRFToken: "csrf-login"}
	vm := pages.LoginVM{Email: "anna.kowalska@nowak-ksiegowosc.pl", Error: "Incorrect email or password.", Next: "/dlq?status=pending", Action: "/login"}
	doc, _ := render(t, pages.Login(p, vm))

	form := one(t, doc, "login-form")
	if attr(form, "method") != "post" || attr(form, "action") != "/login" {
		t.Errorf("form method=%q action=%q", attr(form, "method"), attr(form, "action"))
	}
	if v := attr(inputNamed(t, form, "_csrf"), "value"); v != "csrf-login" {
		t.Errorf("_csrf = %q", v)
	}
	if v := attr(inputNamed(t, form, "email"), "value"); v != vm.Email {
		t.Errorf("email = %q", v)
	}
	if typ := attr(inputNamed(t, form, "password"), "type"); typ != "password" {
		t.Errorf("password type = %q", typ)
	}
	if hasAttr(inputNamed(t, form, "password"), "value") {
		t.Error("password is echoed back")
	}
	if v := attr(inputNamed(t, form, "next"), "value"); v != vm.Next {
		t.Errorf("next = %q", v)
	}
	alert := one(t, doc, "login-error")
	if attr(alert, "role") != "alert" || text(alert) != vm.Error {
		t.Errorf("error role=%q text=%q", attr(alert, "role"), text(alert))
	}
	assertLabelled(t, doc)
}

func TestLoginWithoutError(t *testing.T) {
	t.Parallel()
	doc, _ := render(t, pages.Login(layouts.Page{}, pages.LoginVM{Action: "/login"}))
	none(t, doc, "login-error")
}

// ---------- workflows ----------

func workflowsVM() pages.WorkflowsVM {
	return pages.WorkflowsVM{
		CanCreate: true,
		CreateForm: pages.WorkflowCreateForm{
			Action:     "/workflows",
			Definition: `{"name":"Eksport do KSeF","steps":[]}`,
		},
		Rows: []pages.WorkflowRow{
			{ID: "wf_vat", Name: vatName, Description: "Generuje JPK_V7M i wysyła przez e-Deklaracje.", URL: "/workflows/wf_vat", Version: 4, Steps: 4, LastStatus: "FAILED", LastRunAt: "2025-03-25T07:00:02Z", LastRunAtText: "2025-03-25 07:00 UTC", Executions: 1284},
			{ID: "wf_bank", Name: "Import wyciągu bankowego (mBank MT940)", URL: "/workflows/wf_bank", Version: 2, Steps: 3, LastStatus: "SUCCEEDED", LastRunAt: "2025-03-25T06:30:00Z", LastRunAtText: "2025-03-25 06:30 UTC", Executions: 5210},
			{ID: "wf_zus", Name: "Przypomnienie o płatności ZUS", URL: "/workflows/wf_zus", Version: 1, Steps: 2},
		},
	}
}

func TestWorkflows(t *testing.T) {
	t.Parallel()
	doc, _ := render(t, pages.Workflows(page("Workflows"), workflowsVM()))

	rows := byTestID(doc, "workflow-row")
	if len(rows) != 3 {
		t.Fatalf("rows = %d, want 3", len(rows))
	}
	if got := texts(byTestID(rows[0], "status")); len(got) != 1 || got[0] != "Failed" {
		t.Errorf("first row badge = %v", got)
	}
	if got := attr(byTag(rows[0], "a")[0], "href"); got != "/workflows/wf_vat" {
		t.Errorf("first row link = %q", got)
	}
	if !strings.Contains(text(rows[2]), "Never run") {
		t.Errorf("never-run row = %q", text(rows[2]))
	}
	none(t, doc, "empty-state")

	form := one(t, doc, "workflow-form")
	if got := text(inputNamed(t, form, "definition")); got != `{"name":"Eksport do KSeF","steps":[]}` {
		t.Errorf("definition = %q", got)
	}
	if attr(form, "hx-post") != "/workflows" || attr(form, "hx-target") != "this" || attr(form, "hx-swap") != "outerHTML" {
		t.Errorf("form hx-post=%q hx-target=%q hx-swap=%q", attr(form, "hx-post"), attr(form, "hx-target"), attr(form, "hx-swap"))
	}
	if attr(form, "id") != "workflow-form" {
		t.Errorf("form id = %q", attr(form, "id"))
	}
	if v := attr(inputNamed(t, form, "_csrf"), "value"); v != "csrf-123" {
		t.Errorf("_csrf = %q", v)
	}
	// The form sits in a <details> that is closed when there is nothing to fix.
	if hasAttr(one(t, doc, "new-workflow"), "open") {
		t.Error("New workflow details open without errors")
	}
	assertLabelled(t, doc)
}

func TestWorkflowsCannotCreate(t *testing.T) {
	t.Parallel()
	vm := workflowsVM()
	vm.CanCreate = false
	doc, _ := render(t, pages.Workflows(page("Workflows"), vm))
	none(t, doc, "workflow-form")
	none(t, doc, "new-workflow")
}

func TestWorkflowsEmpty(t *testing.T) {
	t.Parallel()
	doc, _ := render(t, pages.Workflows(page("Workflows"), pages.WorkflowsVM{}))
	none(t, doc, "workflow-row")
	if got := text(one(t, doc, "empty-state")); !strings.Contains(got, "No workflows yet") {
		t.Errorf("empty state = %q", got)
	}
}

func TestWorkflowCreateForm422ShowsFieldErrors(t *testing.T) {
	t.Parallel()
	f := pages.WorkflowCreateForm{
		Action:     "/workflows",
		Definition: `{"steps":[{},{}]}`,
		FormError:  "The definition has 3 problems.",
		Errors: map[string]string{
			"steps[10].id":        "is required",
			"steps[1].config.url": "must be an http or https URL",
			"name":                "is required",
			"steps[2].type":       `unknown step type "<ftp>"`,
		},
	}
	doc, raw := render(t, pages.WorkflowCreateFormFragment(f, "csrf-x"))

	form := byID(t, doc, "workflow-form")
	if attr(form, "data-testid") != "workflow-form" {
		t.Error("fragment root is not the workflow form")
	}
	if got := text(one(t, doc, "form-error")); got != f.FormError {
		t.Errorf("form error = %q", got)
	}
	var fields []string
	for _, e := range byTestID(doc, "field-error") {
		fields = append(fields, attr(e, "data-field"))
	}
	want := []string{"name", "steps[1].config.url", "steps[2].type", "steps[10].id"}
	if strings.Join(fields, " ") != strings.Join(want, " ") {
		t.Errorf("field errors order = %v, want %v", fields, want)
	}
	if got := text(byTestID(doc, "field-error")[1]); got != "steps[1].config.url must be an http or https URL" {
		t.Errorf("field error text = %q", got)
	}
	ta := inputNamed(t, form, "definition")
	if attr(ta, "aria-invalid") != "true" || !strings.Contains(attr(ta, "aria-describedby"), "workflow-definition-errors") {
		t.Errorf("textarea aria-invalid=%q describedby=%q", attr(ta, "aria-invalid"), attr(ta, "aria-describedby"))
	}
	if strings.Contains(raw, `"<ftp>"`) {
		t.Error("error message not escaped")
	}
}

func TestWorkflowsDetailsOpenWhenFormHasErrors(t *testing.T) {
	t.Parallel()
	vm := workflowsVM()
	vm.CreateForm.Errors = map[string]string{"name": "is required"}
	doc, _ := render(t, pages.Workflows(page("Workflows"), vm))
	if !hasAttr(one(t, doc, "new-workflow"), "open") {
		t.Error("New workflow details closed although the form has errors")
	}
}

// ---------- workflow ----------

func workflowVM() pages.WorkflowVM {
	return pages.WorkflowVM{
		ID: "wf_vat", Name: vatName, Description: "Generuje JPK_V7M.", Version: "4",
		CreatedAt: "2024-11-04T09:15:00Z", CreatedAtText: "2024-11-04 09:15 UTC",
		UnknownErrors: "retried as transient",
		PolicyJSON:    `{"max_attempts":5}`,
		Steps: []pages.StepDefRow{
			{Index: 1, ID: "fetch-ledger", Name: "Pobranie rejestrów VAT", Type: "http", Summary: "GET https://optima.local/api/rejestry", Timeout: "30s", Policy: "5 attempts · 5s ×2 · max 5m", PolicySource: "workflow"},
			{Index: 2, ID: "submit", Name: "Wysyłka do e-Deklaracji", Type: "http", Summary: "POST https://e-deklaracje.mf.gov.pl/api", Timeout: "60s", Policy: "3 retries · 30s ×2 · max 10m", PolicySource: "step"},
		},
		Start:         pages.StartForm{Action: "/workflows/wf_vat/executions", CanStart: true},
		Recent:        execRows()[:1],
		ExecutionsURL: "/executions?workflow=wf_vat",
	}
}

func TestWorkflow(t *testing.T) {
	t.Parallel()
	doc, _ := render(t, pages.Workflow(page(vatName), workflowVM()))

	steps := byTestID(doc, "step")
	if len(steps) != 2 {
		t.Fatalf("steps = %d, want 2", len(steps))
	}
	if got := texts(byTestID(doc, "policy-source")); strings.Join(got, "|") != "workflow default|set on step" {
		t.Errorf("policy sources = %v", got)
	}
	if !strings.Contains(text(steps[1]), "POST https://e-deklaracje.mf.gov.pl/api") {
		t.Errorf("step summary missing: %q", text(steps[1]))
	}
	if n := len(byTestID(doc, "execution-row")); n != 1 {
		t.Errorf("recent executions = %d", n)
	}
	if got := attr(one(t, doc, "all-executions"), "href"); got != "/executions?workflow=wf_vat" {
		t.Errorf("all executions link = %q", got)
	}
	form := one(t, doc, "start-form")
	if got := text(inputNamed(t, form, "input")); got != "{}" {
		t.Errorf("default input = %q, want {}", got)
	}
	if attr(form, "hx-post") != "/workflows/wf_vat/executions" || attr(form, "id") != "start-form" {
		t.Errorf("start form hx-post=%q id=%q", attr(form, "hx-post"), attr(form, "id"))
	}
	none(t, doc, "start-disabled")
	none(t, doc, "webhook-url")
	if got := text(one(t, doc, "unknown-errors")); got != "retried as transient" {
		t.Errorf("unknown errors = %q", got)
	}
	assertLabelled(t, doc)
}

func TestWorkflowWebhook(t *testing.T) {
	t.Parallel()
	vm := workflowVM()
	vm.WebhookURL = "https://lifeline.example.pl/hooks/wf_vat/abc"
	doc, _ := render(t, pages.Workflow(page(vatName), vm))
	if got := text(one(t, doc, "webhook-url")); got != vm.WebhookURL {
		t.Errorf("webhook = %q", got)
	}
}

func TestWorkflowViewerCannotStart(t *testing.T) {
	t.Parallel()
	vm := workflowVM()
	vm.Start.CanStart = false
	doc, _ := render(t, pages.Workflow(page(vatName), vm))
	none(t, doc, "start-form")
	if got := text(one(t, doc, "start-disabled")); !strings.Contains(got, "Viewers cannot start workflows") {
		t.Errorf("viewer note = %q", got)
	}
}

func TestStartForm422(t *testing.T) {
	t.Parallel()
	f := pages.StartForm{Action: "/workflows/wf_vat/executions", CanStart: true, Input: `{"okres": "2025-02"`, Errors: map[string]string{"input": "not valid JSON: unexpected end of input"}}
	doc, _ := render(t, pages.StartFormFragment(f, "csrf-x"))
	form := byID(t, doc, "start-form")
	if got := text(inputNamed(t, form, "input")); got != f.Input {
		t.Errorf("input kept = %q", got)
	}
	errs := byTestID(doc, "field-error")
	if len(errs) != 1 || text(errs[0]) != "not valid JSON: unexpected end of input" {
		t.Errorf("field errors = %v", texts(errs))
	}
	if attr(inputNamed(t, form, "input"), "aria-invalid") != "true" {
		t.Error("input not marked aria-invalid")
	}
}

// ---------- executions ----------

func executionsVM() pages.ExecutionsVM {
	return pages.ExecutionsVM{
		Filter: pages.ExecutionFilter{
			Action: "/executions", Status: "FAILED",
			Statuses:  []pages.Option{{Value: "RUNNING", Label: "Running"}, {Value: "FAILED", Label: "Failed", Selected: true}, {Value: "DLQ", Label: "Dead letter"}},
			Workflows: []pages.Option{{Value: "wf_vat", Label: vatName}, {Value: "wf_bank", Label: "Import wyciągu bankowego"}},
		},
		Table: pages.ExecutionTable{Rows: execRows(), NextURL: "/executions?status=FAILED&cursor=01J9ZPZZ", Filtered: true},
	}
}

func TestExecutions(t *testing.T) {
	t.Parallel()
	doc, _ := render(t, pages.Executions(page("Executions"), executionsVM()))

	rows := byTestID(doc, "execution-row")
	if len(rows) != 3 {
		t.Fatalf("rows = %d, want 3", len(rows))
	}
	var badges []string
	for _, r := range rows {
		badges = append(badges, texts(byTestID(r, "status"))...)
	}
	if strings.Join(badges, "|") != "Failed, to the DLQ|Failed, retried|Succeeded" {
		t.Errorf("badges = %v", badges)
	}
	if got := texts(byTestID(rows[1], "error-type")); len(got) != 1 || got[0] != "Rate limit" {
		t.Errorf("error chip = %v", got)
	}
	if got := attr(byTestID(rows[1], "error-type")[0], "data-error-type"); got != "rate_limit" {
		t.Errorf("error chip data-error-type = %q", got)
	}
	times := byTag(rows[0], "time")
	if len(times) != 1 || attr(times[0], "datetime") != "2025-03-25T07:00:02Z" || text(times[0]) != "2025-03-25 07:00 UTC" {
		t.Errorf("time element wrong: %v", texts(times))
	}

	filter := one(t, doc, "executions-filter")
	for k, want := range map[string]string{
		"method": "get", "action": "/executions", "hx-get": "/executions",
		"hx-target": "#executions-table", "hx-push-url": "true", "hx-trigger": "change, submit, input changed delay:300ms from:find .filter-q",
	} {
		if got := attr(filter, k); got != want {
			t.Errorf("filter %s = %q, want %q", k, got, want)
		}
	}
	status := inputNamed(t, filter, "status")
	var selected []string
	for _, o := range byTag(status, "option") {
		if hasAttr(o, "selected") {
			selected = append(selected, attr(o, "value"))
		}
	}
	if strings.Join(selected, ",") != "FAILED" {
		t.Errorf("selected statuses = %v", selected)
	}
	inputNamed(t, filter, "workflowId") // the query key the server reads
	one(t, doc, "clear-filters")
	assertLabelled(t, doc)

	table := byID(t, doc, "executions-table")
	if attr(table, "aria-live") != "polite" {
		t.Error("executions table is not a polite live region")
	}
	more := one(t, doc, "load-more")
	if attr(more, "href") != "/executions?status=FAILED&cursor=01J9ZPZZ" || attr(more, "hx-get") != attr(more, "href") {
		t.Errorf("load more href=%q hx-get=%q", attr(more, "href"), attr(more, "hx-get"))
	}
}

func TestExecutionTableFragment(t *testing.T) {
	t.Parallel()
	doc, _ := render(t, pages.ExecutionTableFragment(pages.ExecutionTable{Rows: execRows()[:2]}))
	if n := len(byTestID(byID(t, doc, "executions-table"), "execution-row")); n != 2 {
		t.Errorf("rows = %d", n)
	}
	none(t, doc, "load-more")
	none(t, doc, "executions-filter")
	if n := len(byTag(doc, "nav")); n != 0 {
		t.Error("fragment renders the layout")
	}
}

func TestExecutionsEmptyStates(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		filtered bool
		want     string
	}{
		{false, "No executions yet"},
		{true, "No executions match these filters"},
	} {
		doc, _ := render(t, pages.ExecutionTableFragment(pages.ExecutionTable{Filtered: tc.filtered}))
		if got := text(one(t, doc, "empty-state")); !strings.HasPrefix(got, tc.want) {
			t.Errorf("filtered=%v: empty state = %q", tc.filtered, got)
		}
		none(t, doc, "execution-row")
	}
}

// ---------- execution ----------

func TestExecutionFailed(t *testing.T) {
	t.Parallel()
	doc, _ := render(t, pages.Execution(page("Execution 01J9ZQ4X"), executionVM(false)))

	body := byID(t, doc, "execution-body")
	for _, a := range []string{"hx-get", "hx-trigger", "hx-swap"} {
		if hasAttr(body, a) {
			t.Errorf("finished execution has %s", a)
		}
	}
	none(t, doc, "live-indicator")

	failure := one(t, doc, "failure")
	if attr(failure, "role") != "alert" {
		t.Error("failure banner is not role=alert")
	}
	ft := text(failure)
	for _, want := range []string{"Wysyłka do e-Deklaracji", "EDEKL_SIG_401", "Bramka e-Deklaracje odrzuciła podpis."} {
		if !strings.Contains(ft, want) {
			t.Errorf("failure banner %q lacks %q", ft, want)
		}
	}
	if got := texts(byTestID(failure, "error-type")); len(got) != 1 || got[0] != "Authorization" {
		t.Errorf("failure chip = %v", got)
	}
	if got := attr(one(t, doc, "dlq-link"), "href"); got != "/dlq/dl_7f3a9c" {
		t.Errorf("dlq link = %q", got)
	}

	steps := byTestID(doc, "step")
	if len(steps) != 3 {
		t.Fatalf("steps = %d, want 3", len(steps))
	}
	wantAttempts := []int{1, 3, 0}
	for i, s := range steps {
		if n := len(byTestID(s, "attempt")); n != wantAttempts[i] {
			t.Errorf("step %d attempts = %d, want %d", i+1, n, wantAttempts[i])
		}
	}
	// The failed step is expanded; the succeeded and skipped ones are not.
	wantOpen := []bool{false, true, false}
	for i, s := range steps {
		d := byTag(s, "details")[0]
		if hasAttr(d, "open") != wantOpen[i] {
			t.Errorf("step %d open = %v, want %v", i+1, hasAttr(d, "open"), wantOpen[i])
		}
	}
	if got := texts(byTestID(steps[1], "attempt-error")); len(got) != 3 || got[2] != "Bramka e-Deklaracje odrzuciła podpis." {
		t.Errorf("attempt errors = %v", got)
	}
	// Attempt 3 carries input, stack trace and idempotency key in a <details>.
	a3 := byTestID(steps[1], "attempt")[2]
	d := byTag(a3, "details")
	if len(d) != 1 || !strings.Contains(text(d[0]), "goroutine 48 [running]") || !strings.Contains(text(d[0]), "01J9ZQ4X:submit:3") {
		t.Errorf("attempt details = %v", texts(d))
	}
	if n := len(byTag(a3, "pre")); n != 2 {
		t.Errorf("attempt 3 <pre> blocks = %d, want 2 (input, stack)", n)
	}
}

func TestExecutionLiveRefresh(t *testing.T) {
	t.Parallel()
	vm := executionVM(true)
	doc, _ := render(t, pages.ExecutionBody(vm))

	body := byID(t, doc, "execution-body")
	for k, want := range map[string]string{
		"hx-get": "/executions/01J9ZQ4X/body", "hx-trigger": "every 2s", "hx-swap": "outerHTML", "aria-live": "polite",
	} {
		if got := attr(body, k); got != want {
			t.Errorf("execution body %s = %q, want %q", k, got, want)
		}
	}
	one(t, doc, "live-indicator")
	none(t, doc, "failure")
	if got := texts(byTestID(doc, "next-retry")); len(got) != 1 || !strings.Contains(got[0], "2025-03-25 07:00:50 UTC") {
		t.Errorf("next retry = %v", got)
	}
	if n := len(byTag(doc, "html")); n != 1 { // html.Parse adds one; the fragment has no <head> of its own
		t.Errorf("html elements = %d", n)
	}
	if n := len(byTag(doc, "link")); n != 0 {
		t.Error("fragment renders the layout")
	}
}

func TestExecutionStepStates(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		status string
		open   bool
	}{
		{"SUCCEEDED", false}, {"PENDING", false}, {"SKIPPED", false},
		{"RUNNING", true}, {"RETRYING", true}, {"FAILED", true}, {"DLQ", true}, {"PARTIAL", true},
	} {
		vm := pages.ExecutionVM{ID: "x", Steps: []pages.StepVM{{Index: 1, ID: "s", Name: "Krok", Status: tc.status}}}
		doc, _ := render(t, pages.ExecutionBody(vm))
		d := byTag(one(t, doc, "step"), "details")[0]
		if hasAttr(d, "open") != tc.open {
			t.Errorf("%s: open = %v, want %v", tc.status, hasAttr(d, "open"), tc.open)
		}
	}
}

// ---------- DLQ ----------

func TestDLQ(t *testing.T) {
	t.Parallel()
	vm := pages.DLQVM{
		Filter:  pages.DLQFilter{Action: "/dlq", Statuses: []pages.Option{{Value: "pending", Label: "Pending"}}, Workflows: []pages.Option{{Value: "wf_vat", Label: vatName}}},
		Rows:    dlqRows(),
		NextURL: "/dlq?cursor=dl_2",
	}
	doc, _ := render(t, pages.DLQ(page("Dead letters"), vm))

	rows := byTestID(doc, "dlq-row")
	if len(rows) != 2 {
		t.Fatalf("rows = %d, want 2", len(rows))
	}
	if got := texts(byTestID(doc, "status")); strings.Join(got, ",") != "To handle,Resolved" {
		t.Errorf("badges = %v", got)
	}
	if got := texts(byTestID(doc, "error-type")); strings.Join(got, ",") != "Authorization,Timeout" {
		t.Errorf("chips = %v", got)
	}
	if got := attr(one(t, rows[0], "dlq-open"), "href"); got != "/dlq/dl_1" {
		t.Errorf("details link = %q", got)
	}
	filter := one(t, doc, "dlq-filter")
	if n := len(byTag(doc, "button")) - len(byTag(filter, "button")); n != 4 { // Log out, the language switch, the live toggle and the phone's filters toggle: the list is read-only
		t.Errorf("buttons = %d, want 4 (Log out, the other language, pause live updates, filters)", n)
	}
	one(t, doc, "filters-toggle")
	if attr(filter, "hx-target") != "#dlq-table" || attr(filter, "method") != "get" {
		t.Errorf("filter hx-target=%q method=%q", attr(filter, "hx-target"), attr(filter, "method"))
	}
	one(t, doc, "load-more")
	none(t, doc, "empty-state")
	assertLabelled(t, doc)
}

func TestDLQEmpty(t *testing.T) {
	t.Parallel()
	doc, _ := render(t, pages.DLQ(page("Dead letters"), pages.DLQVM{Filter: pages.DLQFilter{Action: "/dlq"}}))
	want := "No dead letters. Executions that exhaust their retries land here, with their full context, for 30 days."
	empty := one(t, doc, "empty-state")
	got := text(byTag(empty, "p")[0]) + ". " + text(byTag(empty, "p")[1])
	if got != want {
		t.Errorf("empty state = %q, want %q", got, want)
	}
	none(t, doc, "dlq-row")
	none(t, doc, "load-more")
}

func TestDLQItem(t *testing.T) {
	t.Parallel()
	vm := pages.DLQItemVM{
		Row: dlqRows()[0], ErrorCode: "EDEKL_SIG_401", StackTrace: "goroutine 48 [running]:", ManualRetries: 2,
		OriginalInputJSON: `{"nip":"5213456789"}`, StepStatesJSON: `{"submit":{"status":"FAILED"}}`, ListURL: "/dlq",
	}
	doc, _ := render(t, pages.DLQItem(page("Dead letter"), vm))
	failure := one(t, doc, "failure")
	if !strings.Contains(text(failure), "Wysyłka do e-Deklaracji") || text(one(t, failure, "error-code")) != "EDEKL_SIG_401" {
		t.Errorf("failure = %q", text(failure))
	}
	if got := text(one(t, doc, "manual-retries")); got != "2" {
		t.Errorf("manual retries = %q", got)
	}
	pres := texts(byTag(doc, "pre"))
	if len(pres) != 3 {
		t.Fatalf("pre blocks = %d, want 3", len(pres))
	}
	if !strings.Contains(pres[0], `"nip": "5213456789"`) {
		t.Errorf("input not pretty-printed: %q", pres[0])
	}
	if got := attr(one(t, doc, "execution-link"), "href"); got != "/executions/1" {
		t.Errorf("execution link = %q", got)
	}
	if n := len(byTag(doc, "button")); n != 2 { // Log out and the language switch only: read-only page
		t.Errorf("buttons = %d, want 2 (Log out, the other language)", n)
	}
}

// ---------- error ----------

func TestErrorPage(t *testing.T) {
	t.Parallel()
	doc, _ := render(t, pages.Error(page("Not found"), pages.ErrorVM{Status: 404, Title: "Execution not found", Message: "It may have been deleted."}))
	if got := text(one(t, doc, "error-status")); got != "404" {
		t.Errorf("status = %q", got)
	}
	if got := text(byTag(doc, "h1")[0]); got != "Execution not found" {
		t.Errorf("title = %q", got)
	}
	if got := text(one(t, doc, "error-message")); got != "It may have been deleted." {
		t.Errorf("message = %q", got)
	}
	if got := attr(one(t, doc, "error-back"), "href"); got != "/" {
		t.Errorf("back = %q, want /", got)
	}

	doc, _ = render(t, pages.Error(layouts.Page{}, pages.ErrorVM{Status: 500, BackURL: "/executions"}))
	if got := text(byTag(doc, "h1")[0]); got != "Something went wrong" {
		t.Errorf("default 500 title = %q", got)
	}
	if got := attr(one(t, doc, "error-back"), "href"); got != "/executions" {
		t.Errorf("back = %q", got)
	}
}

// ---------- escaping ----------

func TestUserStringsAreEscaped(t *testing.T) {
	t.Parallel()
	evil := `<script>alert("x")</script>`
	wf := workflowsVM()
	wf.Rows[0].Name = evil
	wf.Rows[0].Description = `<img src=x onerror=alert(1)>`
	exec := executionVM(false)
	exec.WorkflowName = evil
	exec.Failure.Message = evil
	exec.Steps[1].Attempts[2].StackTrace = evil
	exec.InputJSON = `{"a":"` + strings.ReplaceAll(evil, `"`, `\"`) + `"}`
	p := page(evil)
	p.OrgName = evil
	p.Flash = evil

	for name, c := range map[string]templ.Component{
		"workflows": pages.Workflows(p, wf),
		"execution": pages.Execution(p, exec),
		"dlq":       pages.DLQ(p, pages.DLQVM{Rows: []pages.DLQRow{{ID: "1", WorkflowName: evil, ErrorMessage: evil, Status: "pending"}}}),
	} {
		doc, raw := render(t, c)
		for _, s := range byTag(doc, "script") {
			if attr(s, "src") == "" {
				t.Errorf("%s: inline <script> injected: %q", name, text(s))
			}
		}
		if n := len(byTag(doc, "img")); n != 0 {
			t.Errorf("%s: <img> injected", name)
		}
		if strings.Contains(raw, "<script>alert") {
			t.Errorf("%s: raw markup contains the unescaped script", name)
		}
		if !strings.Contains(text(doc), `<script>alert("x")</script>`) {
			t.Errorf("%s: user string not shown as text", name)
		}
	}
}

// ---------- components ----------

func TestStatusBadgeTones(t *testing.T) {
	t.Parallel()
	for status, tone := range map[string]string{
		"SUCCEEDED": "ok", "RUNNING": "info", "PENDING": "neutral", "RETRYING": "warn",
		"FAILED": "danger", "DLQ": "danger", "DLQ_PENDING": "danger", "PARTIAL": "partial", "SKIPPED": "muted",
		"pending": "neutral", "processing": "info", "resolved": "ok", "skipped": "muted", "expired": "muted",
	} {
		doc, _ := render(t, components.StatusBadge(status))
		b := one(t, doc, "status")
		if !strings.Contains(attr(b, "class"), "badge--"+tone) {
			t.Errorf("%s: class %q, want tone %s", status, attr(b, "class"), tone)
		}
		if text(b) == "" || attr(b, "data-status") != status {
			t.Errorf("%s: badge must carry text and data-status", status)
		}
	}
	doc, _ := render(t, components.StatusBadge("DLQ_PENDING"))
	if got := text(one(t, doc, "status")); got != "In the DLQ" {
		t.Errorf("DLQ_PENDING text = %q", got)
	}
}

func TestErrorTypeChips(t *testing.T) {
	t.Parallel()
	pl := i18n.With(context.Background(), i18n.New("pl", nil))
	for _, c := range []struct{ et, en, pl string }{
		{"transient", "Transient", "Przejściowy"}, {"permanent", "Permanent", "Trwały"}, {"timeout", "Timeout", "Przekroczony czas"},
		{"validation", "Validation", "Walidacja"}, {"authorization", "Authorization", "Autoryzacja"}, {"rate_limit", "Rate limit", "Limit zapytań"},
		{"external_service", "External service", "Usługa zewnętrzna"}, {"internal", "Internal", "Wewnętrzny"}, {"unknown", "Unknown", "Nieznany"},
	} {
		doc, _ := render(t, components.ErrorTypeChip(c.et))
		chip := one(t, doc, "error-type")
		if attr(chip, "data-error-type") != c.et || text(chip) != c.en || !strings.HasPrefix(attr(chip, "title"), c.en+": ") {
			t.Errorf("%s: chip %q data=%q title=%q", c.et, text(chip), attr(chip, "data-error-type"), attr(chip, "title"))
		}
		doc, _ = renderIn(t, pl, components.ErrorTypeChip(c.et))
		if chip := one(t, doc, "error-type"); text(chip) != c.pl || !strings.HasPrefix(attr(chip, "title"), c.pl+": ") {
			t.Errorf("%s in Polish: chip %q title=%q", c.et, text(chip), attr(chip, "title"))
		}
	}
	doc, _ := render(t, components.ErrorTypeChip(""))
	none(t, doc, "error-type")
}

func TestSmallComponents(t *testing.T) {
	t.Parallel()
	_, raw := render(t, components.JSONBlock("Input", ""))
	if strings.Contains(raw, "<pre") || strings.Contains(raw, "Input") {
		t.Errorf("empty JSONBlock rendered %q", raw)
	}
	doc, _ := render(t, components.JSONBlock("Input", `{"a":1,"b":[true]}`))
	if got := text(byTag(doc, "pre")[0]); got != `{ "a": 1, "b": [ true ] }` {
		t.Errorf("JSON = %q", got)
	}
	if got := components.PrettyJSON(`not json {`); got != `not json {` {
		t.Errorf("invalid JSON changed: %q", got)
	}
	_, raw = render(t, components.FieldError(""))
	if raw != "" {
		t.Errorf("empty FieldError rendered %q", raw)
	}
	doc, _ = render(t, components.RelTime("2025-03-25T07:00:02Z", "2025-03-25 07:00 UTC"))
	tm := byTag(doc, "time")[0]
	if attr(tm, "datetime") != "2025-03-25T07:00:02Z" || text(tm) != "2025-03-25 07:00 UTC" {
		t.Errorf("RelTime = %q %q", attr(tm, "datetime"), text(tm))
	}
	doc, _ = render(t, components.CSRFField(`t"k`))
	in := byTag(doc, "input")[0]
	if attr(in, "type") != "hidden" || attr(in, "name") != "_csrf" || attr(in, "value") != `t"k` {
		t.Errorf("CSRFField = %v", in.Attr)
	}
	doc, _ = render(t, components.EmptyState("Nic tu nie ma", "Tu pojawią się wykonania."))
	if got := texts(byTag(one(t, doc, "empty-state"), "p")); strings.Join(got, "|") != "Nic tu nie ma|Tu pojawią się wykonania." {
		t.Errorf("EmptyState = %q", got)
	}
}

// ---------- house rules ----------

// TestViewsImportBoundaries enforces STYLE.md: views import no models,
// services, handlers, echo or gorm.
func TestViewsImportBoundaries(t *testing.T) {
	t.Parallel()
	forbidden := []string{"lifeline/models", "lifeline/services", "lifeline/handlers", "lifeline/cmd", "github.com/labstack/echo", "gorm.io/"}
	fset := token.NewFileSet()
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") {
			return err
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			for _, bad := range forbidden {
				if strings.HasPrefix(p, bad) {
					t.Errorf("%s imports %s", path, p)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
