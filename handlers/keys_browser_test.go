package handlers_test

import (
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"lifeline/models"
	"lifeline/models/modeltest"
)

// TestBrowserListKeys: the dead-letter list by keyboard alone (issue 21): "j"/"k" move between
// rows, "x" ticks the row in focus, "/" goes to the search, "?" shows the keys and Escape
// hides them; a key typed into the search is the search's; Space ticks as "x" does; Tab
// moves from row to row (one stop per row).
func TestBrowserListKeys(t *testing.T) {
	t.Parallel()
	ctx := browserContext(t)
	db := modeltest.New(t, models.SQLite)
	a := newApp(t, db)
	s := a.listSeed("Biuro Klawisze")
	base := a.srv.URL
	step := stepper(t, ctx, 15*time.Second)
	step("login", signIn(base, s.email, s.password)...)
	step("list", chromedp.Navigate(base+"/dlq/items"), chromedp.WaitVisible(`[data-testid=dlq-row]`), loaded)
	focused := func() string {
		got, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`(() => { const e = document.activeElement; const r = e && e.closest('tr');
		  return (r ? 'row' + [...document.querySelectorAll('[data-testid=dlq-row]')].indexOf(r) : (e ? e.name || e.tagName : '')); })()`))
		return got
	}
	for _, c := range []struct{ keys, want string }{{"j", "row0"}, {"j", "row1"}, {"j", "row2"}, {"j", "row2"}, {"k", "row1"}} {
		step("key "+c.keys, chromedp.KeyEvent(c.keys))
		if got := focused(); got != c.want {
			t.Fatalf("after %q focus is on %q, want %q", c.keys, got, c.want)
		}
	}
	step("x", chromedp.KeyEvent("x"))
	if n, _ := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll('[data-testid=dlq-select]:checked').length`)); n != 1 {
		t.Fatalf("x ticked %d rows, want 1", n)
	}
	// Space is "x" too (it unticks the row again), and the row is one Tab stop: Tab goes to
	// the next row's link, not to this row's checkbox or workflow.
	step("space", chromedp.KeyEvent(" "))
	if n, _ := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll('[data-testid=dlq-select]:checked').length`)); n != 0 {
		t.Fatalf("Space left %d rows ticked, want 0", n)
	}
	step("k, tab", chromedp.KeyEvent("k"), chromedp.KeyEvent(kb.Tab))
	if got := focused(); got != "row1" {
		t.Fatalf("Tab from the first row went to %q, want row1", got)
	}
	if tag, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.activeElement.getAttribute('data-testid')`)); tag != "dlq-open" {
		t.Fatalf("Tab from the first row's link went to its %q", tag)
	}
	step("/", chromedp.KeyEvent("/"))
	if got := focused(); got != "q" {
		t.Fatalf("/ put the focus on %q, not the search", got)
	}
	// (The devtools protocol types the "/" into the field it focused; a browser does not.)
	step("typing j in the search", chromedp.Evaluate[chromedp.Void](`document.querySelector('[data-testid=filter-q]').value = ''`), chromedp.KeyEvent("j"))
	if v, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector('[data-testid=filter-q]').value`)); v != "j" {
		t.Fatalf("the search holds %q: a key typed into it was taken as a shortcut", v)
	}
	step("escape, ?", chromedp.KeyEvent(kb.Escape), chromedp.KeyEvent("?"), chromedp.WaitVisible(`[data-testid=keys-help]`),
		chromedp.KeyEvent(kb.Escape), chromedp.WaitNotVisible(`[data-testid=keys-help]`))
}
