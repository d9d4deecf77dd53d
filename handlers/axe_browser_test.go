package handlers_test

import (
	"context"
	_ "embed"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"lifeline/models"
	"lifeline/models/modeltest"
)

// axeSource is axe-core 4.14.1, vendored for the tests (testdata/axe/README).
//
//go:embed testdata/axe/axe.min.js
var axeSource string

// axeViolations runs axe-core on the page in front (WCAG 2.0, 2.1 and 2.2, levels A and AA)
// and returns its violations, one line each: the rule, its impact, and the first nodes it
// names. An error of the run itself fails the test.
func axeViolations(t *testing.T, ctx context.Context) []string {
	t.Helper()
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[chromedp.Void](`window.axe ? undefined : eval(`+jsString(axeSource)+`)`)); err != nil {
		t.Fatalf("load axe: %v", err)
	}
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[chromedp.Void](`window.__axe = null; window.__axeErr = null;
	  axe.run(document, {runOnly: {type: 'tag', values: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa', 'wcag22aa']}, resultTypes: ['violations']})
	    .then(r => { window.__axe = r.violations.map(v => v.id + ' (' + v.impact + '): ' + v.help + ' — ' +
	      v.nodes.slice(0, 3).map(n => n.target.join(' ') + (n.failureSummary ? ' [' + n.failureSummary.replace(/\s+/g, ' ').slice(0, 160) + ']' : '')).join('; ')); })
	    .catch(e => { window.__axeErr = String(e); })`)); err != nil {
		t.Fatalf("run axe: %v", err)
	}
	pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if _, err := chromedp.Run(pctx, chromedp.Poll[chromedp.Void](`window.__axe !== null || window.__axeErr !== null`)); err != nil {
		t.Fatalf("axe did not finish: %v", err)
	}
	if msg, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`window.__axeErr || ''`)); msg != "" {
		t.Fatalf("axe failed: %s", msg)
	}
	out, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`window.__axe`))
	if err != nil {
		t.Fatalf("read axe: %v", err)
	}
	return out
}

// axeClean runs axe-core on the page in front, as a journey passes through it, and fails the
// test on any violation, saying where (the state and the language).
func axeClean(t *testing.T, ctx context.Context, where string) {
	t.Helper()
	for _, v := range axeViolations(t, ctx) {
		t.Errorf("axe, %s: %s", where, v)
	}
}

// jsString quotes s as a JavaScript string literal.
func jsString(s string) string {
	r := strings.NewReplacer(`\`, `\\`, "`", "\\`", "${", "\\${")
	return "`" + r.Replace(s) + "`"
}

// TestBrowserAccessibility runs axe-core on every page an admin can open, in Polish and in
// English, at 1440 px and at phone width (390 px), and fails on any WCAG A or AA violation:
// accessible by test, not by luck (issue 21).
func TestBrowserAccessibility(t *testing.T) {
	t.Parallel()
	ctx := browserContext(t)
	db := modeltest.New(t, models.SQLite)
	a := newFullApp(t, db)
	tn := a.tenant("Biuro Axe")
	base := a.srv.URL
	step := stepper(t, ctx, 20*time.Second)
	pages := []string{"/workflows", "/workflows/" + tn.wfID, "/workflows/" + tn.wfID + "/notifications/edit", "/executions", "/executions/" + tn.execID,
		"/dlq", "/dlq/" + tn.dlqID, "/breakers", "/audit", "/profile", "/settings/tokens", "/settings/connections", "/settings/health",
		"/settings/notifications", "/notifications", "/notifications/deliveries", "/demo/inbox", "/executions/00000000-0000-4000-8000-000000000000",
		"/dlq/items"}
	// The dead letter's failure group (issue 22): its page.
	var dl models.DeadLetter
	if err := db.Conn(context.Background()).First(&dl, "id = ?", tn.dlqID).Error; err != nil || dl.GroupID == nil {
		t.Fatalf("the tenant's dead letter has no group: %v", err)
	}
	pages = append(pages, "/dlq/groups/"+*dl.GroupID)
	check := func(where string) {
		t.Helper()
		for _, v := range axeViolations(t, ctx) {
			t.Errorf("%s: %s", where, v)
		}
	}
	step("login page", chromedp.EmulateViewport(1440, 900), chromedp.Navigate(base+"/login"), chromedp.WaitVisible(`[data-testid=login-form]`), loaded)
	check("/login (en, 1440)")
	step("login", signIn(base, tn.email, tn.password)...)
	for _, lang := range []string{"en", "pl"} {
		for _, width := range []int64{1440, 390} {
			step(fmt.Sprint(lang, width), chromedp.EmulateViewport(width, 900), chromedp.Navigate(base+"/profile"), loaded,
				chromedp.Click(`[data-testid=lang-`+lang+`]`), chromedp.WaitVisible(`html[lang=`+lang+`] main`), loaded)
			for _, path := range pages {
				step(path, chromedp.Navigate(base+path), chromedp.WaitVisible(`main`), loaded)
				if got, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.documentElement.lang`)); got != lang {
					t.Fatalf("%s: lang %q, want %q", path, got, lang)
				}
				check(fmt.Sprintf("%s (%s, %d)", path, lang, width))
			}
		}
	}
}
