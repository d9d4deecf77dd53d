package handlers_test

import (
	"bytes"
	"context"
	"encoding/json"
	"math/rand/v2"
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

// TestBrowserAccountantFixesANIP: the demo's bank import, against the sandbox as the demo
// runs it (office mode), fails for a NIP that lost a digit. The accountant, in Polish, finds
// it in the dead-letter list by the client's name typed without its diacritics' case, reads
// the true reason, corrects the NIP in the input, previews the change, retries, and the item
// is resolved by the replay: no admin needed (seed 000 scenarios 3 and 4; issue 21).
func TestBrowserAccountantFixesANIP(t *testing.T) {
	t.Parallel()
	ctx := browserContext(t)
	db := modeltest.New(t, models.SQLite)
	a := newApp(t, db)
	tn := a.tenant("Biuro Ksiegowa")
	sb := httptest.NewServer(sandbox.New(sandbox.Options{Office: true}))
	t.Cleanup(sb.Close)
	var bank []byte
	for _, def := range demo.Definitions(sb.URL) {
		if strings.Contains(string(def), `"name":"`+demo.BankImport+`"`) {
			bank = def
		}
	}
	// The bank import posts to the ledger, so it moves money (an admin approves an edited
	// input: TestBrowserMoneyApproval); this journey is the accountant's own fix.
	bank = bytes.Replace(bank, []byte(`"movesMoney":true`), []byte(`"movesMoney":false`), 1)
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
	right := ""
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
	var dl models.DeadLetter
	for deadline := time.Now().Add(15 * time.Second); db.Conn(context.Background()).Where("organization_id = ?", tn.org).
		Where("subject LIKE ?", client+"%").First(&dl).Error != nil; time.Sleep(50 * time.Millisecond) {
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
	step("login in Polish", signInPolish(base, acc.email, acc.password)...)
	q := strings.ToLower(strings.Fields(client)[0])
	// Typed letter by letter, the list may be asked for more than once: wait for the answer to
	// the whole word, with no request still out, before clicking in it.
	step("find it", chromedp.Navigate(base+"/dlq/items"), chromedp.WaitVisible(`[data-testid=filter-q]`), loaded,
		chromedp.SendKeys(`[data-testid=filter-q]`, q),
		chromedp.Poll[chromedp.Void](`location.search.includes('q=`+q+`') && !document.querySelector('.htmx-request') &&
		  document.querySelectorAll('[data-testid=dlq-row]').length === 1`))
	reason := textWhen(t, ctx, `[data-testid=dlq-reason]`, func(s string) bool { return s != "" })
	if !strings.Contains(reason, "NIP „"+wrong+"” ma 9 cyfr, a powinien mieć 10") {
		t.Fatalf("the reason does not say what is wrong: %q", reason)
	}
	step("open", chromedp.Click(`[data-testid=dlq-open]`), chromedp.WaitVisible(`[data-testid=recovery]`), loaded)
	// The right action first: a retry would repeat a validation error, so the page says so,
	// opens the input's editor and does not make the retry its primary button.
	if hint := textWhen(t, ctx, `[data-testid=fix-data-hint]`, func(s string) bool { return s != "" }); !strings.Contains(hint, "Popraw dane wejściowe") {
		t.Fatalf("fix-data hint %q", hint)
	}
	if primary, _ := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.querySelector('[data-testid=action-retry]').classList.contains('btn-primary')`)); primary {
		t.Fatal("a retry is the primary action for a validation error")
	}
	// The input is shown as fields built from it, one per key; the JSON box is hidden.
	nip := `[data-testid=edit-section] [data-testid=jsonform-field][data-path=clientNip] input`
	step("the input as fields", chromedp.WaitVisible(nip), chromedp.WaitNotVisible(`[data-testid=edit-input]`))
	axeClean(t, ctx, "item page, the input's fields open (pl)")

	// A 422 first: broken JSON typed in the JSON view comes back with its error, focus on the
	// field in error and the error tied to it.
	step("broken JSON", chromedp.Click(`[data-testid=edit-section] [data-testid=jsonform-toggle]`), chromedp.WaitVisible(`[data-testid=edit-input]`),
		chromedp.SetValue(`[data-testid=edit-input]`, `{"clientNip": `), chromedp.Click(`[data-testid=action-preview]`),
		chromedp.WaitVisible(`[data-testid=edit-section] [data-testid=field-error]`), loaded)
	checkFocusedError(t, ctx, "edit-input", "nie jest poprawnym JSON")
	axeClean(t, ctx, "item page, a 422 on the input (pl)")

	// Back to the stored input: the NIP corrected in its field, the JSON view in step.
	step("correct the NIP in its field", chromedp.Navigate(base+"/dlq/"+dl.ID), chromedp.WaitVisible(nip), loaded,
		// Select what the field holds (as Ctrl+A would) and type over it.
		chromedp.Evaluate[chromedp.Void](`(() => { const f = document.querySelector('`+nip+`'); f.focus(); f.select(); })()`),
		chromedp.KeyEvent(right),
		chromedp.Click(`[data-testid=edit-section] [data-testid=jsonform-toggle]`), chromedp.WaitVisible(`[data-testid=edit-input]`))
	shown, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector('[data-testid=edit-input]').value`))
	var asJSON map[string]any
	if err := json.Unmarshal([]byte(shown), &asJSON); err != nil || asJSON["clientNip"] != right || asJSON["clientName"] != client {
		t.Fatalf("the JSON view after the field's edit: %v %q", err, shown)
	}
	step("preview", chromedp.Click(`[data-testid=edit-section] [data-testid=jsonform-toggle]`), chromedp.WaitVisible(nip),
		chromedp.Click(`[data-testid=action-preview]`), chromedp.WaitVisible(`[data-testid=diff-line]`), loaded)
	axeClean(t, ctx, "item page, the edit's preview (pl)")
	if d := textWhen(t, ctx, `[data-testid=diff-line]`, func(s string) bool { return s != "" }); !strings.Contains(d, "clientNip") || !strings.Contains(d, right) {
		t.Fatalf("diff %q", d)
	}
	step("retry with the corrected input", chromedp.Click(`[data-testid=action-edit]`))
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		var got models.DeadLetter
		db.Conn(context.Background()).First(&got, "id = ?", dl.ID)
		if got.Status == models.DLQResolved {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the item is %s, not resolved by the replay", got.Status)
		}
	}

	// Closing an item asks first (Cancel sends nothing), and an accountant says why.
	r = do(t, http.DefaultClient, "POST", a.srv.URL+"/api/v1/workflows/"+wf.ID+"/executions", `{"input": `+string(input)+`}`, bearer(tn.token))
	if r.status != 201 {
		t.Fatalf("start again: %d %s", r.status, r.body)
	}
	exID := r.json(t)["id"].(string)
	var second models.DeadLetter
	for deadline := time.Now().Add(15 * time.Second); db.Conn(context.Background()).Where("execution_id = ?", exID).First(&second).Error != nil; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no second dead letter")
		}
	}
	// The same page in English, with its fields open, for axe; then back to Polish.
	// From a page that does not refresh itself (the first item's page may still be following
	// its replay and swap the node being clicked): the second item's, pending.
	step("in English", chromedp.Navigate(base+"/dlq/"+second.ID), chromedp.WaitVisible(`[data-testid=lang-en]`), loaded,
		chromedp.Click(`[data-testid=lang-en]`), chromedp.WaitVisible(`html[lang=en] main`), loaded,
		chromedp.Navigate(base+"/dlq/"+second.ID), chromedp.WaitVisible(nip), loaded)
	if b, _ := chromedp.Run(ctx, chromedp.Text(`[data-testid=edit-section] [data-testid=jsonform-toggle]`)); strings.TrimSpace(b) != "Show JSON" {
		t.Errorf("the JSON view's button in English: %q", b)
	}
	axeClean(t, ctx, "item page, the input's fields open (en)")
	step("back to Polish", chromedp.Click(`[data-testid=lang-pl]`), chromedp.WaitVisible(`html[lang=pl] main`), loaded)
	step("open the second", chromedp.Navigate(base+"/dlq/"+second.ID), chromedp.WaitVisible(`[data-testid=action-resolve]`), loaded,
		chromedp.Evaluate[chromedp.Void](`window.__asked = ''; window.confirm = (q) => { window.__asked = q; return false; }`),
		chromedp.Click(`[data-testid=action-resolve]`))
	asked, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`window.__asked`))
	time.Sleep(300 * time.Millisecond) // a form sent anyway would have left the page by now
	if still, _ := chromedp.Run(ctx, chromedp.Evaluate[bool](`!!document.querySelector('[data-testid=action-resolve]') && window.__asked !== undefined`)); !still ||
		!strings.Contains(asked, "Zamknąć ten element jako rozwiązany?") {
		t.Fatalf("resolve did not ask first (%q), or went on after Cancel", asked)
	}
	step("close with a note", chromedp.Evaluate[chromedp.Void](`window.confirm = () => true`),
		chromedp.SendKeys(`[data-testid=settle-notes]`, "Klient wycofał zlecenie importu za ten okres."),
		chromedp.Click(`[data-testid=action-resolve]`), chromedp.WaitVisible(`[data-testid=resolution]`))
	var closed models.DeadLetter
	db.Conn(context.Background()).First(&closed, "id = ?", second.ID)
	if closed.Status != models.DLQResolved || closed.ResolutionNotes == nil || !strings.Contains(*closed.ResolutionNotes, "wycofał") {
		t.Fatalf("the second item: %s %v", closed.Status, closed.ResolutionNotes)
	}
}
