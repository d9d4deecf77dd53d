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

// TestBrowserAnalytics: the admin logs in (Polish), opens Analytics from the menu (the last
// 30 days, as of the last refresh), changes the range to 7 days, and reads the dead-letter
// chart's numbers in its table view: 7 days, the organization's one dead letter arrived
// today. The page passes axe with the table open (issue 24).
func TestBrowserAnalytics(t *testing.T) {
	t.Parallel()
	ctx := browserContext(t)
	db := modeltest.New(t, models.SQLite)
	a := newApp(t, db)
	rs := a.recoverySetup("Biuro Analityka")
	if _, err := db.RefreshAnalytics(context.Background(), rs.org); err != nil {
		t.Fatal(err)
	}
	base := a.srv.URL
	step := stepper(t, ctx, 20*time.Second)
	step("login in Polish", chromedp.Navigate(base+"/login"), chromedp.WaitVisible(`[data-testid=language-switch]`),
		chromedp.Click(`[data-testid=lang-pl]`), chromedp.WaitVisible(`html[lang=pl] [data-testid=login-form]`), loaded,
		chromedp.SendKeys(`input[name=email]`, rs.email), chromedp.SendKeys(`input[name=password]`, rs.password),
		chromedp.Submit(`input[name=password]`), chromedp.WaitVisible(`[data-testid=nav-analytics]`), loaded)
	step("open Analytics", chromedp.Click(`[data-testid=nav-analytics]`), chromedp.WaitVisible(`[data-testid=analytics-advice]`), loaded)
	if h := textWhen(t, ctx, `h1`, func(s string) bool { return s != "" }); h != "Analityka błędów" {
		t.Errorf("title %q", h)
	}
	if s := textWhen(t, ctx, `[data-testid=analytics-asof]`, func(s string) bool { return s != "" }); !strings.HasPrefix(s, "Dane z ") {
		t.Errorf("freshness %q", s)
	}
	rows := func(table string) int {
		t.Helper()
		n, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll('[data-testid=table-`+table+`] tbody tr').length`))
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := rows("dlq"); n != 30 {
		t.Errorf("the default range has %d days, want 30", n)
	}
	axeClean(t, ctx, "Analityka (pl)")

	step("change the range to 7 days",
		chromedp.Evaluate[chromedp.Void](`document.querySelector('[data-testid=filter-range]').value = '7'`),
		chromedp.Click(`[data-testid=filter-apply]`),
		chromedp.WaitReady(`[data-testid=filter-range] option[value="7"][selected]`), loaded)
	if sel := textWhen(t, ctx, `[data-testid=filter-range] option:checked`, func(s string) bool { return s != "" }); sel != "Ostatnie 7 dni" {
		t.Errorf("the range shown is %q", sel)
	}
	if n := rows("dlq"); n != 7 {
		t.Errorf("7 days: %d rows", n)
	}

	// She types a start date and applies, the select still saying 7 days: her dates win.
	from := models.AnalyticsDay(time.Now().AddDate(0, 0, -2))
	step("type a start date",
		chromedp.Evaluate[chromedp.Void](`document.querySelector('[data-testid=filter-from]').value = '`+from+`'`),
		chromedp.Click(`[data-testid=filter-apply]`),
		chromedp.WaitReady(`[data-testid=filter-range] option[value="custom"][selected]`), loaded)
	if n := rows("dlq"); n != 3 {
		t.Errorf("from %s to today: %d rows, want 3", from, n)
	}
	step("back to 7 days",
		chromedp.Evaluate[chromedp.Void](`document.querySelector('[data-testid=filter-range]').value = '7'`),
		chromedp.Click(`[data-testid=filter-apply]`),
		chromedp.WaitReady(`[data-testid=filter-range] option[value="7"][selected]`), loaded)
	if n := rows("dlq"); n != 7 {
		t.Errorf("7 days again: %d rows", n)
	}

	step("open the chart's table view", chromedp.Click(`[data-testid=chart-table-toggle-dlq]`),
		chromedp.WaitVisible(`[data-testid=chart-table-dlq] [data-testid=table-dlq]`))
	head := textWhen(t, ctx, `[data-testid=table-dlq] thead`, func(s string) bool { return s != "" })
	for _, want := range []string{"Dzień", "Przybyło", "Zamknięto"} {
		if !strings.Contains(head, want) {
			t.Errorf("the table's head %q lacks %q", head, want)
		}
	}
	// The last row is today: the dead letter recoverySetup's tenant has, not yet closed.
	cells, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll('[data-testid=table-dlq] tbody tr:last-child > *')].map(c => c.textContent.trim())`))
	if err != nil || len(cells) != 3 || cells[0] != models.AnalyticsDay(time.Now()) || cells[1] != "1" || cells[2] != "0" {
		t.Errorf("today's row %q (%v), want %s 1 0", cells, err, models.AnalyticsDay(time.Now()))
	}
	arrivals, err := chromedp.Run(ctx, chromedp.Evaluate[int](`[...document.querySelectorAll('[data-testid=table-dlq] tbody tr td:nth-of-type(1)')].reduce((s, td) => s + Number(td.textContent), 0)`))
	if err != nil || arrivals != 1 {
		t.Errorf("arrivals in the table: %d (%v), want 1", arrivals, err)
	}
	axeClean(t, ctx, "Analityka, tabela (pl)")
}
