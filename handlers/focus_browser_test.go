package handlers_test

import (
	"context"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"lifeline/models"
	"lifeline/models/modeltest"
	"lifeline/services/engine"
)

// Keyboard focus survives a live refresh: a running execution's page replaces its body
// every 2 s; the link or the step summary that had focus (neither has an id) has it again
// in the new body, instead of focus falling to <body>.
func TestBrowserFocusSurvivesLiveRefresh(t *testing.T) {
	t.Parallel()
	ctx := browserContext(t)
	db := modeltest.New(t, models.SQLite)
	a := newApp(t, db)
	tn := a.tenant("Biuro Fokus")
	wf, err := a.wfs.Create(context.Background(), tn.org, actorSystem, []byte(`{"name": "Czekanie na bank",
	  "steps": [{"id": "wait", "name": "Oczekiwanie", "type": "delay", "config": {"ms": 60000}},
	            {"id": "done", "type": "transform", "config": {"output": 1}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	ex, _, err := a.eng.Start(context.Background(), engine.StartRequest{OrganizationID: tn.org, WorkflowID: wf.ID, Input: []byte(`{}`)})
	if err != nil {
		t.Fatal(err)
	}
	step := func(name string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		sctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		defer cancel()
		if err := chromedp.Do(sctx, actions...); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	step("login",
		chromedp.Navigate(a.srv.URL+"/executions/"+ex.ID),
		chromedp.WaitVisible(`[data-testid=login-form]`),
		chromedp.SendKeys(`input[name=email]`, tn.email),
		chromedp.SendKeys(`input[name=password]`, tn.password),
		chromedp.Submit(`input[name=password]`),
		chromedp.WaitVisible(`#execution-body[data-live=true]`))
	for _, target := range []struct{ name, selector, tag string }{
		{"a link", "#execution-body .summary a", "A"},
		{"a step's summary", "#execution-body .step-summary", "SUMMARY"},
	} {
		// Focus it, mark the current body, and wait for a refresh to replace the body.
		focused, err := chromedp.Run(ctx, chromedp.Evaluate[string](`(() => {
			const el = document.querySelector(`+"`"+target.selector+"`"+`);
			el.focus();
			document.getElementById("execution-body").dataset.before = "1";
			return document.activeElement.tagName;
		})()`))
		if err != nil || focused != target.tag {
			t.Fatalf("%s: focus %q %v", target.name, focused, err)
		}
		if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`!document.getElementById("execution-body").dataset.before`,
			chromedp.WithPollingTimeout(10*time.Second))); err != nil {
			t.Fatalf("%s: no live refresh: %v", target.name, err)
		}
		// htmx settles 20 ms after the swap (later on a loaded machine); the focus is put
		// back then. Wait up to 5 s for it; the check below says where it went if not.
		_, _ = chromedp.Run(ctx, chromedp.Poll[bool](`(() => { const a = document.activeElement;
			return !!a && a.tagName === '`+target.tag+`' && !!a.closest('#execution-body'); })()`,
			chromedp.WithPollingTimeout(5*time.Second)))
		got, err := chromedp.Run(ctx, chromedp.Evaluate[string](`(() => {
			const a = document.activeElement;
			return a.tagName + (a.closest("#execution-body") ? " in the body" : " elsewhere");
		})()`))
		if want := target.tag + " in the body"; err != nil || got != want {
			t.Errorf("%s: after a live refresh focus is on %q (%v), want %q", target.name, got, err, want)
		}
	}
}
