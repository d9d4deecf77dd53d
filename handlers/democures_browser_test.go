package handlers_test

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"lifeline/models"
	"lifeline/models/modeltest"
	"lifeline/services/audit"
	"lifeline/services/credentials"
	"lifeline/services/demo"
	"lifeline/services/engine"
	"lifeline/services/periods"
	"lifeline/services/sandbox"
)

// TestBrowserDemoCuresEveryKind: the demo office as `lifeline serve` seeds it (its four
// workflows against the sandbox in office mode, September closed for Kowalski, the expired
// KSeF token) and the morning's failures of every kind that needs its own action. The
// accountant, in Polish, cures each by the action its page leads to, and each item ends
// resolved because its replay SUCCEEDED:
//   - a payroll export refused for a NIP typed wrong: the editor opens first and names the
//     client's right NIP from its other runs; edit and retry;
//   - a bank statement whose purchase invoice was not yet in KSeF (rolled back): once it
//     arrived, "retry the whole workflow" is the primary action;
//   - a bank import refused while the bank's API was down: once it is back, a retry from the
//     failed step;
//   - a KSeF download refused for the office's expired token: the page says an admin must
//     upload a new one; she asks, the admin saves it, and a retry goes through;
//   - a late September statement refused at the posting into the closed September: she asks
//     an admin, who reopens the period; the page then says so, and the whole workflow is
//     retried;
//   - a KSeF download held back because an admin quarantined the client's NIP by mistake: the
//     page says the value is held; she asks, the admin releases it, and a retry goes through.
//
// The sandbox's clock is moved forward instead of waiting for the bank and the invoice (the
// app's own clock is not touched). The quota (429, retry after the time the bank names) and
// the tax gateway's break take the same action as the bank's outage and minutes of retries
// to reach the DLQ: the issue 21 walk cured them in the running demo.
func TestBrowserDemoCuresEveryKind(t *testing.T) {
	t.Parallel()
	ctx := browserContext(t)
	db := modeltest.New(t, models.SQLite)
	a := newApp(t, db)
	bg := context.Background()
	tn := a.tenant("Biuro Rachunkowe Demo Kuracja")
	var ahead atomic.Int64 // how far the sandbox's clock runs ahead of the wall clock
	sb := httptest.NewServer(sandbox.New(sandbox.Options{Office: true,
		Now: func() time.Time { return time.Now().Add(time.Duration(ahead.Load())) }}))
	t.Cleanup(sb.Close)

	// The demo office, as cmd/web's seedDemo makes it.
	wfs := map[string]string{}
	for _, def := range demo.Definitions(sb.URL) {
		wf, err := a.wfs.Create(bg, tn.org, actorSystem, def)
		if err != nil {
			t.Fatal(err)
		}
		wfs[wf.Name] = wf.ID
	}
	var adminID string
	db.Conn(bg).Model(&models.User{}).Where("email = ?", tn.email).Pluck("id", &adminID)
	for _, c := range demo.ClosedPeriods() {
		if _, err := periods.New(db, nil).Close(bg, tn.org, audit.Actor{Type: audit.ActorUser, ID: adminID},
			periods.Input{Period: c.Period, Client: c.Client, Note: c.Note}); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := credentials.New(db, nil).Save(bg, tn.org, audit.System, credentials.Input{Name: demo.CredentialKSeF, Value: sandbox.ExpiredKSeFToken}); err != nil {
		t.Fatal(err)
	}
	start := func(s demo.Start) string {
		t.Helper()
		ex, _, err := a.eng.Start(bg, engine.StartRequest{OrganizationID: tn.org, WorkflowID: wfs[s.Workflow], Input: models.MustJSON(s.Input),
			Trigger: engine.TriggerDemo, Actor: audit.System})
		if err != nil {
			t.Fatal(err)
		}
		return ex.ID
	}
	deadLetter := func(execID string, within time.Duration) models.DeadLetter {
		t.Helper()
		var dl models.DeadLetter
		for deadline := time.Now().Add(within); db.Conn(bg).Where("execution_id = ?", execID).First(&dl).Error != nil; time.Sleep(50 * time.Millisecond) {
			if time.Now().After(deadline) {
				var ex models.Execution
				db.Conn(bg).First(&ex, "id = ?", execID)
				t.Fatalf("no dead letter for %s (%s)", execID, ex.Status)
			}
		}
		return dl
	}
	succeeded := func(execID string) {
		t.Helper()
		for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			var ex models.Execution
			db.Conn(bg).First(&ex, "id = ?", execID)
			if ex.Status == models.ExecSucceeded {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("execution %s is %s", execID, ex.Status)
			}
		}
	}

	// The morning's failures of each kind, and one payroll of the NIP typo's client that went
	// through (the demo's traffic runs each client many times).
	pick := func(ok func(s demo.Start) bool) demo.Start {
		for _, s := range demo.Morning() {
			if ok(s) {
				return s
			}
		}
		t.Fatal("no such start in the demo's morning")
		return demo.Start{}
	}
	nipTypo := pick(func(s demo.Start) bool {
		return s.Workflow == demo.Payroll && s.Input["clientName"] == "Jankowski Auto Serwis"
	})
	late := pick(func(s demo.Start) bool { return s.Workflow == demo.BankImport && s.FailedStep == "match_invoices" })
	ksef := pick(func(s demo.Start) bool { return s.Workflow == demo.KSeF })
	// An admin quarantined a client's NIP by mistake (it is the client's right one): its KSeF
	// download goes to the DLQ without calling anything.
	var held demo.Start
	for _, s := range demo.Morning() {
		if s.Workflow == demo.KSeF && s.Input["clientName"] != ksef.Input["clientName"] {
			held = s
		}
	}
	r := do(t, http.DefaultClient, "POST", a.srv.URL+"/api/v1/quarantine", `{"value": "`+held.Input["clientNip"].(string)+`", "note": "Podejrzany NIP"}`, bearer(tn.token))
	if r.status != http.StatusCreated {
		t.Fatalf("quarantine: %d %s", r.status, r.body)
	}
	heldID := r.json(t)["id"].(string)
	closed := pick(func(s demo.Start) bool { return s.Fate == demo.PeriodClosed })
	fine := pick(func(s demo.Start) bool { return s.Fate == demo.Succeeds })
	var right string
	for i := range 5000 {
		in := demo.Input(demo.Payroll, rand.New(rand.NewPCG(uint64(i), 3)))
		if in["clientName"] == nipTypo.Input["clientName"] && in["clientNip"] != nipTypo.Input["clientNip"] && len(in["clientNip"].(string)) == 10 {
			in["period"] = "2026-09"
			succeeded(start(demo.Start{Workflow: demo.Payroll, Input: in}))
			right = in["clientNip"].(string)
			break
		}
	}
	items := map[string]models.DeadLetter{}
	for name, s := range map[string]demo.Start{"nip": nipTypo, "late": late, "ksef": ksef, "closed": closed, "held": held} {
		items[name] = deadLetter(start(s), 20*time.Second)
	}
	// The bank's API goes down (the last minute of the sandbox's three): a statement of a client
	// whose import goes through otherwise is refused until its retries run out.
	ahead.Store(int64(2 * time.Minute))
	down := start(fine)

	acc := *tn
	acc.email = "ksiegowa." + tn.email
	if _, err := a.as.CreateUser(bg, tn.org, acc.email, acc.password, models.RoleAccountant); err != nil {
		t.Fatal(err)
	}
	adminHTTP, csrf := a.browser(tn)
	base := a.srv.URL
	step := stepper(t, ctx, 20*time.Second)
	step("login in Polish", signInPolish(base, acc.email, acc.password)...)
	// cured waits until the item is resolved by its replay, whose execution SUCCEEDED, and its
	// page says so with a link to that execution.
	cured := func(name string) {
		t.Helper()
		dl := items[name]
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
			var got models.DeadLetter
			db.Conn(bg).First(&got, "id = ?", dl.ID)
			if got.Status == models.DLQResolved && got.ReplayExecutionID != nil {
				succeeded(*got.ReplayExecutionID)
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: the item is %s (%s), not resolved by a replay", name, got.Status, got.Reason)
			}
		}
		step(name+": the page says so", navigate(base+"/dlq/"+dl.ID), chromedp.WaitVisible(`[data-testid=succeeded-link]`), loaded)
	}
	open := func(name string) {
		t.Helper()
		step(name+": open", navigate(base+"/dlq/"+items[name].ID), chromedp.WaitVisible(`[data-testid=recovery]`), loaded)
	}
	primary := func(name, testid string) {
		t.Helper()
		if ok, _ := chromedp.Run(ctx, chromedp.Evaluate[bool](`!!document.querySelector('[data-testid=`+testid+`].btn-primary')`)); !ok {
			t.Fatalf("%s: %s is not the primary action", name, testid)
		}
	}

	// A NIP typed wrong: the editor opens first and names the client's NIP from its other run.
	open("nip")
	if hint := textWhen(t, ctx, `[data-testid=fix-data-hint]`, func(s string) bool { return s != "" }); !strings.Contains(hint, "Popraw dane wejściowe") {
		t.Fatalf("nip: hint %q", hint)
	}
	shown := textWhen(t, ctx, `[data-testid=client-value]`, func(s string) bool { return s != "" })
	if shown != right {
		t.Fatalf("nip: the page offers %q, the client's NIP is %q", shown, right)
	}
	field := `[data-testid=edit-section] [data-testid=jsonform-field][data-path=clientNip] input`
	step("nip: edit and retry", chromedp.WaitVisible(field),
		chromedp.Evaluate[chromedp.Void](`(() => { const f = document.querySelector('`+field+`'); f.focus(); f.select(); })()`),
		chromedp.KeyEvent(shown), chromedp.Click(`[data-testid=action-preview]`), chromedp.WaitVisible(`[data-testid=diff-line]`), loaded,
		chromedp.Click(`[data-testid=action-edit]`))
	cured("nip")

	// The expired KSeF token: the page says an admin must replace it; she asks one.
	open("ksef")
	if hint := textWhen(t, ctx, `[data-testid=credentials-hint]`, func(s string) bool { return s != "" }); !strings.Contains(hint, "administrator") {
		t.Fatalf("ksef: hint %q", hint)
	}
	step("ksef: ask an admin", chromedp.Click(`[data-testid=ask-section] summary`), chromedp.WaitVisible(`[data-testid=ask-note]`),
		chromedp.SendKeys(`[data-testid=ask-note]`, "Token KSeF wygasł, proszę o nowy."), chromedp.Click(`[data-testid=action-ask]`),
		chromedp.WaitVisible(`[data-testid=ask-notice]`), loaded)
	// The admin saves the new token (Settings → Dane dostępowe) under the same name.
	if r := do(t, adminHTTP, "POST", base+"/settings/credentials", url.Values{"name": {demo.CredentialKSeF}, "value": {sandbox.NewKSeFToken}, "_csrf": {csrf}}.Encode(),
		map[string]string{"Content-Type": "application/x-www-form-urlencoded"}); r.status >= 400 {
		t.Fatalf("the admin saves the token: %d %.300s", r.status, r.body)
	}
	open("ksef")
	primary("ksef", "action-retry")
	step("ksef: retry", chromedp.Click(`[data-testid=action-retry]`))
	cured("ksef")

	// The bank is back and the late invoice arrived: the sandbox's clock four and a half
	// minutes on.
	items["down"] = deadLetter(down, 60*time.Second)
	ahead.Store(int64(4*time.Minute + 30*time.Second))
	open("down")
	if reason := textWhen(t, ctx, `[data-testid=failure-message]`, func(s string) bool { return s != "" }); !strings.Contains(reason, "API banku chwilowo niedostępne") {
		t.Fatalf("down: reason %q", reason)
	}
	primary("down", "action-retry")
	step("down: retry", chromedp.Click(`[data-testid=action-retry]`))
	cured("down")

	open("late")
	if reason := textWhen(t, ctx, `[data-testid=failure-message]`, func(s string) bool { return s != "" }); !strings.Contains(reason, "nie jest jeszcze w KSeF") {
		t.Fatalf("late: reason %q", reason)
	}
	primary("late", "action-full")
	step("late: retry the whole workflow", chromedp.Click(`[data-testid=action-full]`))
	cured("late")

	// The closed September: she asks an admin, who reopens it; then the whole workflow again.
	open("closed")
	step("closed: ask an admin", chromedp.WaitVisible(`[data-testid=period-closed]`), chromedp.Click(`[data-testid=period-closed-ask]`),
		chromedp.WaitVisible(`[data-testid=ask-note]`), chromedp.SendKeys(`[data-testid=ask-note]`, "Wyciąg za wrzesień przyszedł późno."),
		chromedp.Click(`[data-testid=action-ask]`), chromedp.WaitVisible(`[data-testid=ask-notice]`), loaded)
	r = do(t, http.DefaultClient, "GET", base+"/api/v1/periods/closed", "", bearer(tn.token))
	var list struct {
		Items []struct{ ID string } `json:"items"`
	}
	if err := json.Unmarshal([]byte(r.body), &list); err != nil || len(list.Items) != 1 {
		t.Fatalf("closed periods: %v %s", err, r.body)
	}
	if r := do(t, http.DefaultClient, "DELETE", base+"/api/v1/periods/closed/"+list.Items[0].ID, "", bearer(tn.token)); r.status != http.StatusNoContent {
		t.Fatalf("the admin reopens September: %d %s", r.status, r.body)
	}
	open("closed")
	if n := textWhen(t, ctx, `[data-testid=period-reopened]`, func(s string) bool { return s != "" }); !strings.Contains(n, "ponownie otwarty") {
		t.Fatalf("closed: %q", n)
	}
	primary("closed", "action-full")
	step("closed: retry the whole workflow", chromedp.Click(`[data-testid=action-full]`))
	cured("closed")

	// The quarantined NIP: the page names the value and who held it; she asks an admin, who
	// releases it; then a retry goes through.
	open("held")
	if held := textWhen(t, ctx, `[data-testid=poison-held]`, func(s string) bool { return s != "" }); !strings.Contains(held, "Podejrzany NIP") {
		t.Fatalf("held: %q", held)
	}
	if hint := textWhen(t, ctx, `[data-testid=quarantine-hint]`, func(s string) bool { return s != "" }); !strings.Contains(hint, "poproś administratora o zwolnienie") {
		t.Fatalf("held: hint %q", hint)
	}
	step("held: ask an admin", chromedp.Click(`[data-testid=ask-section] summary`), chromedp.WaitVisible(`[data-testid=ask-note]`),
		chromedp.SendKeys(`[data-testid=ask-note]`, "To właściwy NIP klienta."), chromedp.Click(`[data-testid=action-ask]`),
		chromedp.WaitVisible(`[data-testid=ask-notice]`), loaded)
	if r := do(t, http.DefaultClient, "POST", base+"/api/v1/quarantine/"+heldID+"/release", "{}", bearer(tn.token)); r.status != http.StatusOK {
		t.Fatalf("release: %d %s", r.status, r.body)
	}
	open("held")
	step("held: released", chromedp.WaitVisible(`[data-testid=quarantine-released]`))
	primary("held", "action-retry")
	step("held: retry", chromedp.Click(`[data-testid=action-retry]`))
	cured("held")
}
