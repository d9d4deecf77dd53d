package handlers_test

import (
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"lifeline/models"
	"lifeline/models/modeltest"
)

// TestBrowserPhoneLayout: on a 390 px phone, in Polish (the longer labels), every item
// of the main navigation and every settings tab is on screen (they wrap; none hides
// off the right edge), and no page scrolls sideways.
func TestBrowserPhoneLayout(t *testing.T) {
	t.Parallel()
	ctx := browserContext(t)
	db := modeltest.New(t, models.SQLite)
	a := newApp(t, db)
	tn := a.tenant("Biuro Telefon")
	base := a.srv.URL
	step := stepper(t, ctx, 15*time.Second)
	step("phone", chromedp.EmulateViewport(390, 844))
	step("login", signInPolish(base, tn.email, tn.password)...)
	for _, path := range []string{"/settings/tokens", "/dlq", "/dlq/" + tn.dlqID, "/executions", "/executions/" + tn.execID, "/workflows", "/workflows/" + tn.wfID, "/audit", "/profile", "/breakers"} {
		step(path, chromedp.Navigate(base+path), chromedp.WaitVisible(`main`))
		lang, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.documentElement.lang`))
		if err != nil || lang != "pl" {
			t.Fatalf("%s: lang %q %v", path, lang, err)
		}
		// Items past the right edge, by their text; and how far the page scrolls sideways.
		off, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll('.mainnav a, .tab')]
		  .filter(e => { const r = e.getBoundingClientRect(); return r.width === 0 || r.right > window.innerWidth || r.left < 0; })
		  .map(e => e.textContent.trim())`))
		if err != nil || len(off) > 0 {
			t.Errorf("%s: off screen %q %v", path, off, err)
		}
		over, err := chromedp.Run(ctx, chromedp.Evaluate[float64](`document.documentElement.scrollWidth - window.innerWidth`))
		if err != nil || over > 0 {
			wide, _ := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll('body *')]
			  .filter(e => e.getBoundingClientRect().right > window.innerWidth)
			  .slice(0, 5).map(e => e.tagName + '.' + e.className + ' ' + e.textContent.trim().slice(0, 40))`))
			t.Errorf("%s: the page scrolls sideways by %v px (%v), past the edge: %q", path, over, err, wide)
		}
	}
}
