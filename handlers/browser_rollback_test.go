package handlers_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"lifeline/models"
	"lifeline/models/modeltest"
)

// TestBrowserRollbackJourney: an admin opens a failed execution, rolls it back from its page,
// and watches the compensations run in reverse order until the rollback is done.
func TestBrowserRollbackJourney(t *testing.T) {
	t.Parallel()
	ctx := browserContext(t)
	db := modeltest.New(t, models.SQLite)
	a := newApp(t, db)
	tn := a.tenant("Biuro Wycofanie")
	svc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.URL.Path == "/fail":
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprint(w, `{"error": "declaration refused"}`)
		case strings.HasPrefix(r.URL.Path, "/undo/"):
			time.Sleep(700 * time.Millisecond) // slow enough to see the rollback run
			fmt.Fprint(w, `{"undone": true}`)
		default:
			fmt.Fprint(w, `{"ok": true}`)
		}
	}))
	defer svc.Close()
	undo := func(what string) string {
		return fmt.Sprintf(`{"compensationType": "api_call", "config": {"method": "POST", "url": "%s/undo/%s"}}`, svc.URL, what)
	}
	wf, err := a.wfs.Create(context.Background(), tn.org, actorSystem, []byte(fmt.Sprintf(`{"name": "Księgowanie miesiąca",
	  "settings": {"retryPolicy": {"maxRetries": 0}},
	  "steps": [
	    {"id": "accruals", "name": "Rozliczenia międzyokresowe", "type": "http", "config": {"method": "POST", "url": "%[1]s/accruals"}, "compensation": %[2]s},
	    {"id": "lock", "name": "Zamknięcie okresu", "type": "http", "config": {"method": "POST", "url": "%[1]s/lock"}, "compensation": %[3]s},
	    {"id": "file", "name": "Wysyłka", "type": "http", "config": {"method": "POST", "url": "%[1]s/fail"}}]}`, svc.URL, undo("accruals"), undo("lock"))))
	if err != nil {
		t.Fatal(err)
	}
	r := do(t, http.DefaultClient, "POST", a.srv.URL+"/api/v1/workflows/"+wf.ID+"/executions", `{"input": {}}`, bearer(tn.token))
	exID := r.json(t)["id"].(string)
	for deadline := time.Now().Add(15 * time.Second); ; {
		m := do(t, http.DefaultClient, "GET", a.srv.URL+"/api/v1/executions/"+exID, "", bearer(tn.token)).json(t)
		if m["status"] == models.ExecDLQPending {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("execution %v", m["status"])
		}
		time.Sleep(50 * time.Millisecond)
	}
	step := func(name string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		sctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		if err := chromedp.Do(sctx, actions...); err != nil {
			html, _ := chromedp.Run(ctx, chromedp.OuterHTML(chromedp.CSS("body")))
			t.Fatalf("%s: %v\npage: %.4000s", name, err, html)
		}
	}
	step("login", chromedp.Navigate(a.srv.URL+"/executions/"+exID), chromedp.WaitVisible(`[data-testid=login-form]`),
		chromedp.SendKeys(`input[name=email]`, tn.email), chromedp.SendKeys(`input[name=password]`, tn.password),
		chromedp.Submit(`input[name=password]`), chromedp.WaitVisible(`[data-testid=action-rollback]`), loaded)
	step("roll back", chromedp.Click(`[data-testid=action-rollback]`),
		// Rolling back, or already rolled back on a slow machine (the undo calls take 1.4 s).
		chromedp.WaitVisible(`[data-testid=rollback]:not([data-status=""])`))
	// The page follows the rollback by itself until it is done.
	step("rolled back", chromedp.Poll[chromedp.Void](`document.querySelector('[data-testid=rollback]').dataset.status === 'ROLLED_BACK'`,
		chromedp.WithPollingTimeout(15*time.Second)))
	axeClean(t, ctx, "execution page, rolled back")
	items, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll('[data-testid=compensation]')).map(e => e.dataset.status + ' ' + e.querySelector('.strong').textContent)`))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"completed Undo “Zamknięcie okresu”", "completed Undo “Rozliczenia międzyokresowe”"}
	if strings.Join(items, "|") != strings.Join(want, "|") {
		t.Fatalf("compensations on the page %q, want %q", items, want)
	}

	// A second failure, rolled back from its dead letter's page.
	ex2 := do(t, http.DefaultClient, "POST", a.srv.URL+"/api/v1/workflows/"+wf.ID+"/executions", `{"input": {}}`, bearer(tn.token)).json(t)["id"].(string)
	var dlqID string
	for deadline := time.Now().Add(15 * time.Second); dlqID == ""; time.Sleep(50 * time.Millisecond) {
		dlqID, _ = do(t, http.DefaultClient, "GET", a.srv.URL+"/api/v1/executions/"+ex2, "", bearer(tn.token)).json(t)["dlqId"].(string)
		if time.Now().After(deadline) {
			t.Fatal("no dead letter for the second execution")
		}
	}
	step("roll back from the dead letter", chromedp.Navigate(a.srv.URL+"/dlq/"+dlqID),
		chromedp.WaitVisible(`[data-testid=form-rollback] [data-testid=action-rollback]`), loaded)
	axeClean(t, ctx, "item page with a rollback offered")
	step("start the rollback from the dead letter",
		chromedp.Click(`[data-testid=form-rollback] [data-testid=action-rollback]`),
		chromedp.WaitVisible(`[data-testid=rollback]`),
		chromedp.Poll[chromedp.Void](`location.pathname === '/executions/`+ex2+`' && document.querySelector('[data-testid=rollback]').dataset.status === 'ROLLED_BACK'`,
			chromedp.WithPollingTimeout(15*time.Second)))
}
