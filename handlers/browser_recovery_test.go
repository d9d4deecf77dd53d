package handlers_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"lifeline/models"
	"lifeline/models/modeltest"
)

// TestBrowserRecoveryJourney: an admin filters the dead-letter list by workflow, opens the
// item, fixes the NIP in the input (a preview shows the change), retries, and watches the
// item resolve; keyboard focus stays where it was while the page refreshes itself.
func TestBrowserRecoveryJourney(t *testing.T) {
	t.Parallel()
	ctx := browserContext(t)
	db := modeltest.New(t, models.SQLite)
	a := newApp(t, db)
	tn := a.tenant("Biuro Odzyskiwanie")
	// The VAT gateway refuses a short NIP, and holds a good one until the test has seen the
	// item page refresh itself while the replay runs (a fixed delay raced a slow page).
	hold := make(chan struct{})
	var once sync.Once
	release := func() { once.Do(func() { close(hold) }) }
	gw := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct{ NIP string }
		raw, _ := io.ReadAll(r.Body)
		_ = json.Unmarshal(raw, &body)
		w.Header().Set("Content-Type", "application/json")
		if len(body.NIP) != 10 {
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprint(w, `{"error": "validation", "fields": {"nip": "NIP must have 10 digits"}}`)
			return
		}
		select {
		case <-hold:
		case <-r.Context().Done():
			return
		case <-time.After(time.Minute):
		}
		fmt.Fprint(w, `{"ok": true}`)
	}))
	defer gw.Close()
	defer release() // before Close, which waits for the held request
	wf, err := a.wfs.Create(context.Background(), tn.org, actorSystem, []byte(fmt.Sprintf(`{"name": "Deklaracja VAT",
	  "settings": {"subject": "{{ input.client }} · {{ input.period }}", "retryPolicy": {"maxRetries": 0}},
	  "steps": [{"id": "file", "name": "Wyślij JPK", "type": "http", "timeoutMs": 20000,
	    "config": {"method": "POST", "url": "%s/jpk", "body": {"nip": "{{ input.nip }}"}}}]}`, gw.URL)))
	if err != nil {
		t.Fatal(err)
	}
	r := do(t, http.DefaultClient, "POST", a.srv.URL+"/api/v1/workflows/"+wf.ID+"/executions",
		`{"input": {"client": "Piekarnia Zawada", "period": "2026-10", "nip": "526025027"}}`, bearer(tn.token))
	if r.status != http.StatusCreated {
		t.Fatalf("start: %d %s", r.status, r.body)
	}
	exID := r.json(t)["id"].(string)
	var dl models.DeadLetter
	for deadline := time.Now().Add(15 * time.Second); ; {
		if db.Conn(context.Background()).Where("execution_id = ?", exID).First(&dl).Error == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no dead letter")
		}
		time.Sleep(50 * time.Millisecond)
	}

	base := a.srv.URL
	step := func(name string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		sctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		if err := chromedp.Do(sctx, actions...); err != nil {
			html, _ := chromedp.Run(ctx, chromedp.OuterHTML(chromedp.CSS("body")))
			t.Fatalf("%s: %v\npage: %.4000s", name, err, html)
		}
	}
	text := func(sel string) string {
		t.Helper()
		s, err := chromedp.Run(ctx, chromedp.Text(sel))
		if err != nil {
			t.Fatalf("text of %s: %v", sel, err)
		}
		return s
	}
	step("login", chromedp.Navigate(base+"/dlq/items"), chromedp.WaitVisible(`[data-testid=login-form]`),
		chromedp.SendKeys(`input[name=email]`, tn.email), chromedp.SendKeys(`input[name=password]`, tn.password),
		chromedp.Submit(`input[name=password]`), chromedp.WaitVisible(`[data-testid=dlq-row]`))

	// Two items are listed (the tenant's own failure too); the workflow filter keeps ours.
	step("filter by workflow",
		// htmx listens for the change once the page has loaded; a change before that is lost.
		loaded,
		chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`(() => { const s = document.querySelector('[data-testid=dlq-filter] select[name=workflowId]');
		  s.value = %q; s.dispatchEvent(new Event('change', {bubbles: true})); })()`, wf.ID)),
		chromedp.Poll[chromedp.Void](`location.search.includes('workflowId=`+wf.ID+`') && document.querySelectorAll('[data-testid=dlq-row]').length === 1`))
	if row := text(`[data-testid=dlq-row]`); !strings.Contains(row, "Piekarnia Zawada · 2026-10") || !strings.Contains(row, "NIP must have 10 digits") {
		t.Fatalf("filtered row %q", row)
	}

	step("open the item", chromedp.Click(`[data-testid=dlq-row] a[href*="/dlq/`+dl.ID+`"]`), chromedp.WaitVisible(`[data-testid=recovery]`), loaded)
	if title := text(`[data-testid=dlq-title]`); !strings.Contains(title, "Piekarnia Zawada") {
		t.Fatalf("title %q", title)
	}
	axeClean(t, ctx, "item page, the input's fields open")
	step("edit and preview",
		// A validation error opens the edit first, as fields; the JSON is one click away.
		chromedp.WaitVisible(`[data-testid=edit-section] [data-testid=jsonform-fields]`),
		chromedp.Click(`[data-testid=edit-section] [data-testid=jsonform-toggle]`),
		chromedp.WaitVisible(`[data-testid=edit-input]`),
		chromedp.SetValue(`[data-testid=edit-input]`, `{"client": "Piekarnia Zawada", "period": "2026-10", "nip": "5260250274"}`),
		chromedp.Click(`[data-testid=action-preview]`), chromedp.WaitVisible(`[data-testid=diff-line]`), loaded)
	if d := text(`[data-testid=diff-line]`); !strings.Contains(d, "nip") || !strings.Contains(d, "5260250274") {
		t.Fatalf("diff %q", d)
	}
	axeClean(t, ctx, "item page, the edit's preview")
	step("retry with the edited input", chromedp.Click(`[data-testid=action-edit]`), chromedp.WaitVisible(`[data-testid=replay-running]`))
	axeClean(t, ctx, "item page, a replay running")

	// While the replay runs the page refreshes itself; the focused link keeps the focus.
	step("focus survives a refresh",
		chromedp.Evaluate[chromedp.Void](`window.__swaps = 0; document.body.addEventListener('htmx:afterSettle', () => window.__swaps++);
		  document.querySelector('[data-testid=replay-link]').focus();`),
		chromedp.Poll[chromedp.Void](`window.__swaps >= 1`, chromedp.WithPollingTimeout(10*time.Second)))
	if f, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.activeElement && document.activeElement.dataset.testid || document.activeElement.tagName`)); err != nil || f != "replay-link" {
		t.Fatalf("focus after a refresh: %q %v", f, err)
	}
	release()
	step("resolved", chromedp.Poll[chromedp.Void](`document.querySelector('[data-testid=dlq-status]').textContent.toLowerCase().includes('resolved')`,
		chromedp.WithPollingTimeout(20*time.Second)))
	var got models.DeadLetter
	db.Conn(context.Background()).First(&got, "id = ?", dl.ID)
	if got.Status != models.DLQResolved || got.ManualRetryCount != 1 {
		t.Fatalf("dead letter %s after the journey (%d manual retries)", got.Status, got.ManualRetryCount)
	}
}

// TestBrowserBulkJourney: an admin runs the list's bulk form with nothing selected (the
// page says so and leads back), selects every item on the page with one box, asks to
// resolve them, confirms the count with a note, and watches the job finish.
func TestBrowserBulkJourney(t *testing.T) {
	t.Parallel()
	ctx := browserContext(t)
	db := modeltest.New(t, models.SQLite)
	a := newApp(t, db)
	tn := a.tenant("Biuro Zbiorczo")
	gw := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprint(w, `{"error": "NIP must have 10 digits"}`)
	}))
	defer gw.Close()
	wf, err := a.wfs.Create(context.Background(), tn.org, actorSystem, []byte(fmt.Sprintf(`{"name": "Deklaracja VAT",
	  "settings": {"subject": "{{ input.client }}", "retryPolicy": {"maxRetries": 0}},
	  "steps": [{"id": "file", "type": "http", "config": {"method": "POST", "url": "%s/jpk", "body": {}}}]}`, gw.URL)))
	if err != nil {
		t.Fatal(err)
	}
	for _, client := range []string{"Piekarnia Zawada", "Kowalski Sp. z o.o."} {
		if r := do(t, http.DefaultClient, "POST", a.srv.URL+"/api/v1/workflows/"+wf.ID+"/executions",
			`{"input": {"client": "`+client+`"}}`, bearer(tn.token)); r.status != http.StatusCreated {
			t.Fatalf("start: %d %s", r.status, r.body)
		}
	}
	pending := func() int64 {
		var n int64
		db.Conn(context.Background()).Model(&models.DeadLetter{}).Where("organization_id = ? AND status = ?", tn.org, models.DLQPending).Count(&n)
		return n
	}
	for deadline := time.Now().Add(15 * time.Second); pending() != 3; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d pending dead letters, want 3 (the tenant's own and two)", pending())
		}
	}

	step := stepper(t, ctx, 20*time.Second)
	step("login", chromedp.Navigate(a.srv.URL+"/dlq/items"), chromedp.WaitVisible(`[data-testid=login-form]`),
		chromedp.SendKeys(`input[name=email]`, tn.email), chromedp.SendKeys(`input[name=password]`, tn.password),
		chromedp.Submit(`input[name=password]`), chromedp.WaitVisible(`[data-testid=dlq-row]`), loaded)
	step("run with nothing selected", chromedp.Click(`[data-testid=bulk-submit]`), chromedp.WaitVisible(`[data-testid=bulk-problem]`), loaded)
	if s, err := chromedp.Run(ctx, chromedp.Text(`[data-testid=bulk-problem]`)); err != nil || !strings.Contains(s, "No item is selected") {
		t.Fatalf("problem %q %v", s, err)
	}
	step("back to the list", chromedp.Click(`[data-testid=bulk-back]`), chromedp.WaitVisible(`[data-testid=dlq-row]`), loaded)
	step("one row: the select-all box shows a partial selection",
		chromedp.Click(`[data-testid=dlq-select]`),
		chromedp.Poll[chromedp.Void](`document.querySelector('[data-testid=dlq-select-all]').indeterminate`))
	step("select all, resolve",
		chromedp.Click(`[data-testid=dlq-select-all]`),
		chromedp.Poll[chromedp.Void](`document.querySelectorAll('[data-testid=dlq-select]:checked').length === 3 && !document.querySelector('[data-testid=dlq-select-all]').indeterminate`),
		chromedp.SetValue(`[data-testid=bulk-action]`, "resolve"),
		chromedp.Click(`[data-testid=bulk-submit]`), chromedp.WaitVisible(`[data-testid=bulk-confirm-count]`), loaded)
	if s, err := chromedp.Run(ctx, chromedp.Text(`[data-testid=bulk-confirm-count]`)); err != nil || s != "3 selected items." {
		t.Fatalf("count %q %v", s, err)
	}
	step("confirm with a note",
		chromedp.SendKeys(`[data-testid=bulk-notes]`, "Złożone ręcznie"),
		chromedp.Click(`[data-testid=bulk-confirm-submit]`),
		chromedp.WaitVisible(`[data-testid=bulk][data-status=done]`))
	var resolved int64
	db.Conn(context.Background()).Model(&models.DeadLetter{}).Where("organization_id = ? AND status = ? AND resolution_notes = ?", tn.org, models.DLQResolved, "Złożone ręcznie").Count(&resolved)
	if resolved != 3 {
		t.Errorf("%d resolved with the note, want 3", resolved)
	}
}
