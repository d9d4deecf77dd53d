package handlers_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"lifeline/models"
	"lifeline/models/modeltest"
)

// TestBrowserKeyboardOnly: an admin who uses only the keyboard logs in, reaches the dead
// letter from the list, writes a note and resolves the item. Every control reached with
// Tab shows where the focus is.
func TestBrowserKeyboardOnly(t *testing.T) {
	t.Parallel()
	ctx := browserContext(t)
	db := modeltest.New(t, models.SQLite)
	a := newApp(t, db)
	tn := a.tenant("Biuro Klawiatura")
	base := a.srv.URL
	step := stepper(t, ctx, 15*time.Second)
	// tabTo presses Tab until the focused element matches sel, checking on the way that
	// each focused control is visibly marked (an outline or a ring).
	tabTo := func(sel string) {
		t.Helper()
		for i := 0; i < 80; i++ {
			step("tab", chromedp.KeyEvent(kb.Tab))
			got, err := chromedp.Run(ctx, chromedp.Evaluate[[]any](`(() => {
			  const e = document.activeElement, s = getComputedStyle(e);
			  const marked = (s.outlineStyle !== 'none' && parseFloat(s.outlineWidth) > 0) || s.boxShadow !== 'none';
			  return [e.matches(`+"`"+sel+"`"+`), marked, e.outerHTML.slice(0, 120)]; })()`))
			if err != nil {
				t.Fatal(err)
			}
			if got[1] != true && !strings.HasPrefix(got[2].(string), "<body") {
				t.Errorf("focus not shown on %v", got[2])
			}
			if got[0] == true {
				return
			}
		}
		t.Fatalf("Tab never reached %s", sel)
	}
	step("login page", chromedp.Navigate(base+"/dlq/items"), chromedp.WaitVisible(`[data-testid=login-form]`),
		chromedp.Poll[chromedp.Void](`document.readyState === 'complete'`))
	tabTo(`input[name=email]`)
	step("email", chromedp.KeyEvent(tn.email))
	tabTo(`input[name=password]`)
	step("password", chromedp.KeyEvent(tn.password+kb.Enter), chromedp.WaitVisible(`[data-testid=dlq-row]`),
		chromedp.Poll[chromedp.Void](`document.readyState === 'complete'`))

	tabTo(`[data-testid=dlq-row] a[href*="/dlq/` + tn.dlqID + `"]`)
	step("open the item", chromedp.KeyEvent(kb.Enter), chromedp.WaitVisible(`[data-testid=form-settle]`),
		chromedp.Poll[chromedp.Void](`document.readyState === 'complete'`))
	axeClean(t, ctx, "item page, reached by keyboard")
	tabTo(`[data-testid=settle-notes]`)
	step("notes", chromedp.KeyEvent("Zapłacone ręcznie w banku"))
	tabTo(`[data-testid=action-resolve]`)
	// Closing asks first: the browser's own dialog, answered OK here (its keys are the
	// browser's, not the page's).
	step("resolve", chromedp.Evaluate[chromedp.Void](`window.confirm = () => true`), chromedp.KeyEvent(kb.Enter), chromedp.WaitVisible(`[data-testid=action-done]`))
	axeClean(t, ctx, "item page, closed")

	var dl models.DeadLetter
	if err := db.Conn(context.Background()).Where("id = ?", tn.dlqID).First(&dl).Error; err != nil {
		t.Fatal(err)
	}
	if dl.Status != models.DLQResolved || dl.ResolutionNotes == nil || *dl.ResolutionNotes != "Zapłacone ręcznie w banku" {
		t.Fatalf("dead letter %s %v", dl.Status, dl.ResolutionNotes)
	}
}
