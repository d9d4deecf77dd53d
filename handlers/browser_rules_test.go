package handlers_test

import (
	"context"
	"encoding/json"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"lifeline/handlers"
	"lifeline/models"
	"lifeline/models/modeltest"
	"lifeline/services/demo"
	"lifeline/services/notify"
	"lifeline/services/sandbox"
	"lifeline/views/i18n"
)

// TestBrowserMoneyApproval: the demo's bank import posts to the ledger, so it moves money.
// In Polish, the accountant corrects a NIP in the input of its dead letter and sends it: the
// item waits for an admin's approval, with the diff. The admin opens the request from the
// inbox, approves it, and the replay runs and resolves the item (issue 21).
func TestBrowserMoneyApproval(t *testing.T) {
	t.Parallel()
	ctx := browserContext(t)
	db := modeltest.New(t, models.SQLite)
	ns := notify.New(db, notify.Config{Texts: i18n.Catalog{}, BaseURL: "http://lifeline.test"})
	a := newAppDeps(t, db, io.Discard, func(d *handlers.Deps) { d.Notify = ns })
	tn := a.tenant("Biuro Przelewy")
	sb := httptest.NewServer(sandbox.New(sandbox.Options{Office: true}))
	t.Cleanup(sb.Close)
	var bank []byte
	for _, def := range demo.Definitions(sb.URL) {
		if strings.Contains(string(def), `"name":"`+demo.BankImport+`"`) {
			bank = def
		}
	}
	if !strings.Contains(string(bank), `"movesMoney":true`) {
		t.Fatal("the demo's bank import is not marked as moving money")
	}
	wf, err := a.wfs.Create(context.Background(), tn.org, actorSystem, bank)
	if err != nil {
		t.Fatal(err)
	}
	var typo demo.Start
	for _, s := range demo.Morning() {
		if s.Workflow == demo.BankImport && s.FailedStep == "import_statement" {
			typo = s
			break
		}
	}
	client, wrong := typo.Input["clientName"].(string), typo.Input["clientNip"].(string)
	right := "" // the client's NIP as the demo makes it (TestBrowserAccountantFixesANIP)
	for i := range 5000 {
		in := demo.Input(demo.BankImport, rand.New(rand.NewPCG(uint64(i), 3)))
		if in["clientName"] == client && len(in["clientNip"].(string)) == 10 && strings.Contains(in["clientNip"].(string), wrong[:4]) {
			right = in["clientNip"].(string)
			break
		}
	}
	if right == "" {
		t.Fatalf("no right NIP for %s", client)
	}
	input, _ := json.Marshal(typo.Input)
	r := do(t, http.DefaultClient, "POST", a.srv.URL+"/api/v1/workflows/"+wf.ID+"/executions", `{"input": `+string(input)+`}`, bearer(tn.token))
	if r.status != 201 {
		t.Fatalf("start: %d %s", r.status, r.body)
	}
	exID := r.json(t)["id"].(string)
	var dl models.DeadLetter
	for deadline := time.Now().Add(15 * time.Second); db.Conn(context.Background()).Where("execution_id = ?", exID).First(&dl).Error != nil; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no dead letter")
		}
	}
	acc := *tn
	acc.email = "ksiegowa." + tn.email
	if _, err := a.as.CreateUser(context.Background(), tn.org, acc.email, acc.password, models.RoleAccountant); err != nil {
		t.Fatal(err)
	}
	base := a.srv.URL
	step := stepper(t, ctx, 20*time.Second)
	login := func(who *tenant) {
		step("login "+who.email, signInPolish(base, who.email, who.password)...)
	}
	login(&acc)
	step("open the item", chromedp.Navigate(base+"/dlq/"+dl.ID), chromedp.WaitVisible(`[data-testid=recovery]`), loaded)
	if hint := textWhen(t, ctx, `[data-testid=needs-approval]`, func(s string) bool { return s != "" }); !strings.Contains(hint, "przenosi pieniądze") {
		t.Fatalf("needs-approval hint %q", hint)
	}
	// The input is shown as fields built from it (forms.js): the NIP is corrected in its field.
	nip := `[data-testid=edit-section] [data-testid=jsonform-field][data-path=clientNip] input`
	step("correct the NIP and preview", chromedp.WaitVisible(nip),
		chromedp.Evaluate[chromedp.Void](`(() => { const f = document.querySelector('`+nip+`'); f.focus(); f.select(); })()`),
		chromedp.KeyEvent(right),
		chromedp.Click(`[data-testid=action-preview]`), chromedp.WaitVisible(`[data-testid=diff-line]`), loaded)
	if b := textWhen(t, ctx, `[data-testid=action-edit]`, func(s string) bool { return s != "" }); !strings.Contains(b, "Wyślij do zatwierdzenia") {
		t.Fatalf("the submit button says %q", b)
	}
	step("send for approval", chromedp.Click(`[data-testid=action-edit]`), chromedp.WaitVisible(`[data-testid=input-change][data-status=pending]`), loaded)
	if w := textWhen(t, ctx, `[data-testid=input-change]`, func(s string) bool { return s != "" }); !strings.Contains(w, "Czeka na zatwierdzenie") || !strings.Contains(w, right) {
		t.Fatalf("the waiting request says %q", w)
	}
	var waiting models.DeadLetter
	db.Conn(context.Background()).First(&waiting, "id = ?", dl.ID)
	if waiting.Status != models.DLQPending || waiting.ManualRetryCount != 0 {
		t.Fatalf("the request ran something: %s, %d retries", waiting.Status, waiting.ManualRetryCount)
	}

	step("log out", chromedp.Submit(`[data-testid=logout-form] button`), chromedp.WaitVisible(`[data-testid=login-form]`))
	login(tn)
	step("the inbox", chromedp.Navigate(base+"/notifications"), chromedp.WaitVisible(`[data-testid=notify-link]`), loaded)
	if k := textWhen(t, ctx, `[data-testid=notify-kind]`, func(s string) bool { return s != "" }); !strings.Contains(k, "Zmiana danych do zatwierdzenia") {
		t.Fatalf("the inbox entry's kind %q", k)
	}
	step("open the request from the inbox", chromedp.Click(`[data-testid=notify-link]`), chromedp.WaitVisible(`[data-testid=action-approve]`), loaded)
	step("approve", chromedp.SendKeys(`[data-testid=approve-notes]`, "NIP zgodny z umową."), chromedp.Click(`[data-testid=action-approve]`))
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		var got models.DeadLetter
		db.Conn(context.Background()).First(&got, "id = ?", dl.ID)
		if got.Status == models.DLQResolved {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the item is %s, not resolved by the approved replay", got.Status)
		}
	}
	var req models.InputChangeRequest
	db.Conn(context.Background()).First(&req, "dead_letter_id = ?", dl.ID)
	if req.Status != models.ChangeApproved || req.DecidedName != tn.email {
		t.Errorf("the request: %s by %q", req.Status, req.DecidedName)
	}
}
