package handlers_test

import (
	"context"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"lifeline/models"
	"lifeline/models/modeltest"
)

// TestBrowserPhoneProblemTitles: on a 390 px phone, in Polish, a problem escalated to the
// admins carries two badges ("OTWARTY", "ESKALOWANE (POZIOM 1)"); its title still reads
// across the card (the badges go below it) instead of a column one letter wide, which is
// how the demo's Problems page looked ten minutes after start.
func TestBrowserPhoneProblemTitles(t *testing.T) {
	t.Parallel()
	ctx := browserContext(t)
	db := modeltest.New(t, models.SQLite)
	a := newApp(t, db)
	tn := a.tenant("Biuro Telefon Problemy")
	if err := db.Conn(context.Background()).Model(&models.Group{}).Where("organization_id = ?", tn.org).Update("escalation_level", 1).Error; err != nil {
		t.Fatal(err)
	}
	base := a.srv.URL
	step := stepper(t, ctx, 15*time.Second)
	step("phone", chromedp.EmulateViewport(390, 844))
	step("login", signInPolish(base, tn.email, tn.password)...)
	step("problems", chromedp.Navigate(base+"/dlq"), chromedp.WaitVisible(`[data-testid=problem-escalated]`), loaded)
	// Each title's width against its card's: at least 70 % of it.
	narrow, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll('[data-testid=problem]')].map(card => {
	    const t = card.querySelector('[data-testid=problem-title]');
	    const tw = t.getBoundingClientRect().width, cw = card.getBoundingClientRect().width;
	    return tw < 0.7 * cw ? Math.round(tw) + ' of ' + Math.round(cw) + ' px: ' + t.textContent.trim().slice(0, 40) : '';
	  }).filter(Boolean)`))
	if err != nil || len(narrow) > 0 {
		t.Errorf("problem titles squeezed beside their badges: %q %v", narrow, err)
	}
	over, err := chromedp.Run(ctx, chromedp.Evaluate[float64](`document.documentElement.scrollWidth - window.innerWidth`))
	if err != nil || over > 0 {
		t.Errorf("the Problems page scrolls sideways by %v px (%v)", over, err)
	}
}
