package handlers_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"lifeline/models"
	"lifeline/models/modeltest"
)

// checkFocusedError fails the test unless focus is on the control whose data-testid (or id)
// is want, marked aria-invalid, and described (aria-describedby) by an error whose text holds
// text: the state a form refused with a 422 must leave.
func checkFocusedError(t *testing.T, ctx context.Context, want, text string) {
	t.Helper()
	var got []any
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		var err error
		got, err = chromedp.Run(ctx, chromedp.Evaluate[[]any](`(() => {
		  const e = document.activeElement;
		  const ids = (e.getAttribute('aria-describedby') || '').split(/\s+/).filter(Boolean);
		  const errs = ids.map(id => document.getElementById(id)).filter(d => d && (d.matches(".field-error, .field-errors, [data-testid=form-error], [role=alert]") || d.querySelector('.field-error')));
		  return [e.dataset.testid || e.id || e.tagName, e.getAttribute('aria-invalid') || '', errs.map(d => d.textContent.trim()).join(' | ')];
		})()`))
		if err == nil && got[0] == want && got[1] == "true" && got[2] != "" && strings.Contains(got[2].(string), text) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the refused submit: focus on %v (aria-invalid %q), described by %q; want %s in error, described by %q (%v)",
				got[0], got[1], got[2], want, text, err)
		}
	}
}

// TestBrowserErrorsTiedToFields: whichever way a form is refused, a full page (login) or an
// htmx swap of a 422 (starting a workflow, creating a token), its error is tied to its field
// (aria-describedby, aria-invalid) and focus lands on the first field in error, not on
// <body>; axe finds nothing wrong with the refused states, in Polish.
func TestBrowserErrorsTiedToFields(t *testing.T) {
	t.Parallel()
	ctx := browserContext(t)
	db := modeltest.New(t, models.SQLite)
	a := newApp(t, db)
	tn := a.tenant("Biuro Bledy")
	wf, err := a.wfs.Create(context.Background(), tn.org, actorSystem, []byte(a.definition("/ok")))
	if err != nil {
		t.Fatal(err)
	}
	base := a.srv.URL
	step := stepper(t, ctx, 15*time.Second)
	step("login page in Polish", chromedp.Navigate(base+"/login"), chromedp.WaitVisible(`[data-testid=language-switch]`),
		chromedp.Click(`[data-testid=lang-pl]`), chromedp.WaitVisible(`html[lang=pl] [data-testid=login-form]`), loaded,
		chromedp.SendKeys(`input[name=email]`, tn.email), chromedp.SendKeys(`input[name=password]`, "not-the-password"),
		chromedp.Submit(`input[name=password]`), chromedp.WaitVisible(`[data-testid=login-error]`), loaded)
	checkFocusedError(t, ctx, "login-email", "")
	axeClean(t, ctx, "login refused (pl)")

	step("login", chromedp.SendKeys(`input[name=password]`, tn.password), chromedp.Submit(`input[name=password]`),
		chromedp.WaitVisible(`[data-testid=user-menu]`))
	step("start with a bad input", chromedp.Navigate(base+"/workflows/"+wf.ID), chromedp.WaitVisible(`[data-testid=start-form] textarea[name=input]`), loaded,
		chromedp.SetValue(`[data-testid=start-form] textarea[name=input]`, `[1, 2]`),
		chromedp.Click(`[data-testid=start-form] button[type=submit]`),
		chromedp.WaitVisible(`[data-testid=start-form] [data-testid=field-error]`))
	checkFocusedError(t, ctx, "start-input", "musi być obiektem JSON")
	axeClean(t, ctx, "start form refused (pl)")

	step("a token without a name", chromedp.Navigate(base+"/settings/tokens"), chromedp.WaitVisible(`[data-testid=new-token] summary`), loaded,
		chromedp.Evaluate[chromedp.Void](`document.querySelector('[data-testid=new-token]').open = true`), chromedp.WaitVisible(`[data-testid=token-form]`),
		chromedp.Click(`[data-testid=token-form] button[type=submit]`),
		chromedp.WaitVisible(`[data-testid=token-form] [data-testid=field-error]`), loaded)
	checkFocusedError(t, ctx, "token-name", "")
	axeClean(t, ctx, "token form refused (pl)")
}
