package handlers_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"lifeline/models"
	"lifeline/models/modeltest"
	"lifeline/services/demo"
	"lifeline/services/sandbox"
)

// TestBrowserPartnerApprovesVAT: the demo's VAT workflow, against the sandbox, asks the
// partner (an admin) to approve a return whose VAT due is above 50 000 zł. The partner, in
// Polish, sees it counted in the navigation, finds it in "Czeka na Ciebie" with its
// client, amount, due date, countdown and the validation's result, opens it, reads the validated VAT due, approves it
// with a note, is brought back to the list with a confirmation, and the filing step runs:
// the execution ends SUCCEEDED with the return sent. Each page is axe-clean.
func TestBrowserPartnerApprovesVAT(t *testing.T) {
	t.Parallel()
	ctx := browserContext(t)
	db := modeltest.New(t, models.SQLite)
	a := newApp(t, db)
	tn := a.tenant("Biuro Wspólnika")
	sb := httptest.NewServer(sandbox.New(sandbox.Options{}))
	t.Cleanup(sb.Close)
	var vat []byte
	for _, def := range demo.Definitions(sb.URL) {
		if strings.Contains(string(def), `"name":"`+demo.VAT+`"`) {
			vat = def
		}
	}
	wf, err := a.wfs.Create(context.Background(), tn.org, actorSystem, vat)
	if err != nil {
		t.Fatal(err)
	}
	start := demo.Waiting(time.Now())[0]
	input, _ := json.Marshal(start.Input)
	r := do(t, http.DefaultClient, "POST", a.srv.URL+"/api/v1/workflows/"+wf.ID+"/executions", `{"input": `+string(input)+`}`, bearer(tn.token))
	if r.status != 201 {
		t.Fatalf("start: %d %s", r.status, r.body)
	}
	exID := r.json(t)["id"].(string)
	ivID := a.waitingOn(tn.token, exID)

	partner := *tn
	partner.email = "wspolnik." + tn.email
	if _, err := a.as.CreateUser(context.Background(), tn.org, partner.email, partner.password, models.RoleAdmin); err != nil {
		t.Fatal(err)
	}
	base := a.srv.URL
	step := stepper(t, ctx, 20*time.Second)
	step("login in Polish", signInPolish(base, partner.email, partner.password)...)
	if n := textWhen(t, ctx, `[data-testid=nav-waiting] [data-testid=nav-badge]`, func(s string) bool { return s != "" }); n != "1" {
		t.Fatalf("the nav counts %q waiting", n)
	}
	step("the list", chromedp.Click(`[data-testid=nav-waiting]`), chromedp.WaitVisible(`[data-testid=ask-item]`), loaded)
	if h := textWhen(t, ctx, `h1`, func(s string) bool { return s != "" }); h != "Czeka na Ciebie" {
		t.Errorf("the list's title %q", h)
	}
	item := textWhen(t, ctx, `[data-testid=ask-item]`, func(s string) bool { return s != "" })
	for _, want := range []string{"Zatwierdź JPK_V7 za " + start.Input["period"].(string) + " – Mazur Budownictwo S.A.", "Zatwierdzenie", "administratorzy", "za "} {
		if !strings.Contains(item, want) {
			t.Errorf("the list's request lacks %q: %s", want, item)
		}
	}
	if amount := textWhen(t, ctx, `[data-testid=ask-item] [data-testid=about-amount]`, func(s string) bool { return s != "" }); !strings.Contains(amount, "64") {
		t.Errorf("the request's amount %q", amount)
	}
	if due := textWhen(t, ctx, `[data-testid=ask-item] [data-testid=ask-item-output][data-key=vatDue]`, func(s string) bool { return s != "" }); due != "64890.27" {
		t.Errorf("the list shows the validation's VAT due as %q", due)
	}
	axeClean(t, ctx, "Czeka na Ciebie (pl)")

	step("open it", chromedp.Click(`[data-testid=ask-item] [data-testid=ask-open]`), chromedp.WaitVisible(`[data-testid=ask-form]`), loaded)
	if msg := textWhen(t, ctx, `[data-testid=ask-message]`, func(s string) bool { return s != "" }); !strings.Contains(msg, "przeszedł walidację") {
		t.Errorf("the request's message %q", msg)
	}
	if out := textWhen(t, ctx, `[data-testid=ask-output][data-key=vatDue]`, func(s string) bool { return s != "" }); out != "64890.27" {
		t.Errorf("the validation's VAT due shown as %q", out)
	}
	axeClean(t, ctx, "the request's page (pl)")

	step("approve", chromedp.SendKeys(`[data-testid=ask-note]`, "Kwoty zgodne z rejestrem VAT"),
		chromedp.Click(`[data-testid=ask-approve]`), chromedp.WaitVisible(`[data-testid=asks-done]`), loaded)
	if done := textWhen(t, ctx, `[data-testid=asks-done]`, func(s string) bool { return s != "" }); !strings.Contains(done, "Odpowiedź zapisana") {
		t.Errorf("the flash %q", done)
	}
	step("nothing left", chromedp.WaitVisible(`[data-testid=empty-state]`))
	axeClean(t, ctx, "Czeka na Ciebie after the answer (pl)")

	if st := a.finalStatus(tn.token, exID); st != models.ExecSucceeded {
		t.Fatalf("the VAT execution ended %s", st)
	}
	ex := do(t, http.DefaultClient, "GET", a.srv.URL+"/api/v1/executions/"+exID, "", bearer(tn.token)).json(t)
	statuses := map[string]any{}
	for _, s := range ex["steps"].([]any) {
		st := s.(map[string]any)
		statuses[st["id"].(string)] = st["status"]
	}
	if statuses[demo.ApprovalStep] != models.StepSucceeded || statuses["submit_jpk"] != models.StepSucceeded {
		t.Errorf("steps after the approval: %v", statuses)
	}
	iv := do(t, http.DefaultClient, "GET", a.srv.URL+"/api/v1/interventions/"+ivID, "", bearer(tn.token)).json(t)
	if ans, _ := iv["answer"].(map[string]any); iv["answeredBy"] != partner.email || ans["answer"] != "approved" || ans["note"] != "Kwoty zgodne z rejestrem VAT" {
		t.Errorf("the recorded answer: %v", iv)
	}
}
