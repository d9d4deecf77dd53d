package handlers_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"lifeline/models"
	"lifeline/models/modeltest"
	"lifeline/services/deadline"
)

// TestBrowserTodayFixesAnOverdueFiling: the accountant logs in (Polish) and lands on Dziś,
// which shows the JPK_V7M filing of two months ago as overdue, for two clients, with the VAT
// its failures hold up; she opens the filing's failures from it, fixes one client's NIP in
// the input, retries, and Dziś then says one client and the other's money (issue 23).
func TestBrowserTodayFixesAnOverdueFiling(t *testing.T) {
	t.Parallel()
	ctx := browserContext(t)
	db := modeltest.New(t, models.SQLite)
	a := newApp(t, db)
	rs := a.recoverySetup("Biuro Terminy JPK")
	gw := vatGateway(t)
	// Two months ago: its JPK_V7M was due on the 25th of last month, so it is overdue now.
	period := deadline.Day(time.Now()).AddDate(0, -2, 0).Format("2006-01")
	if d := deadline.Day(time.Now()); d.Day() > 28 {
		period = time.Date(d.Year(), d.Month()-2, 1, 0, 0, 0, 0, time.UTC).Format("2006-01")
	}
	def := fmt.Sprintf(`{"name": "JPK_V7M", "settings": {"retryPolicy": {"maxRetries": 0}, "subject": "{{ input.client }} · {{ input.period }}",
	  "client": "{{ input.client }}", "period": "{{ input.period }}", "amount": "{{ input.vat }}", "obligation": "JPK_V7M"},
	  "steps": [{"id": "file", "name": "Wyślij JPK_V7M", "type": "http", "config": {"method": "POST", "url": "%s/vat", "body": {"nip": "{{ input.nip }}"}}}]}`, gw.URL)
	r := do(t, http.DefaultClient, "POST", a.srv.URL+"/api/v1/workflows", def, bearer(rs.token))
	if r.status != http.StatusCreated {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	wfID := r.json(t)["id"].(string)
	var dls []string
	for _, in := range []string{
		`{"client": "Apteka Nowak", "nip": "701000213", "vat": "12 480,00"}`,
		`{"client": "Piekarnia Kowalski", "nip": "52602502", "vat": "3 310,50"}`,
	} {
		in = strings.Replace(in, "{", `{"period": "`+period+`", `, 1)
		r := do(t, http.DefaultClient, "POST", a.srv.URL+"/api/v1/workflows/"+wfID+"/executions", `{"input": `+in+`}`, bearer(rs.token))
		if r.status != http.StatusCreated {
			t.Fatalf("start: %d %s", r.status, r.body)
		}
		exID := r.json(t)["id"].(string)
		var dl models.DeadLetter
		for deadline := time.Now().Add(15 * time.Second); db.Conn(context.Background()).Where("execution_id = ?", exID).First(&dl).Error != nil; time.Sleep(50 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal("no dead letter")
			}
		}
		dls = append(dls, dl.ID)
	}
	base := a.srv.URL
	step := stepper(t, ctx, 20*time.Second)
	step("login in Polish", chromedp.Navigate(base+"/login"), chromedp.WaitVisible(`[data-testid=language-switch]`),
		chromedp.Click(`[data-testid=lang-pl]`), chromedp.WaitVisible(`html[lang=pl] [data-testid=login-form]`), loaded,
		chromedp.SendKeys(`input[name=email]`, rs.accountant.email), chromedp.SendKeys(`input[name=password]`, rs.accountant.password),
		chromedp.Submit(`input[name=password]`), chromedp.WaitVisible(`[data-testid=today-date]`), loaded)
	due := textWhen(t, ctx, `[data-testid=today-due]`, func(s string) bool { return s != "" })
	for _, want := range []string{"JPK_V7M za " + period, "po terminie", "2 klientów", "15\u00a0790,50\u00a0zł"} {
		if !strings.Contains(due, want) {
			t.Errorf("Dziś: %q lacks %q", due, want)
		}
	}
	if m := textWhen(t, ctx, `[data-testid=today-money]`, func(s string) bool { return s != "" }); !strings.Contains(m, "Apteka Nowak") {
		t.Errorf("the most money first: %q", m)
	}
	// Side by side (1280 px), the cards of a row start at one height.
	tops := strings.Split(mustString(t, ctx, `[...document.querySelectorAll('.today-grid > .card')].map(c => Math.round(c.getBoundingClientRect().top)).join(',')`), ",")
	if len(tops) != 4 || tops[0] != tops[1] || tops[2] != tops[3] {
		t.Errorf("the cards' tops: %v, want two rows of two at one height each", tops)
	}
	axeClean(t, ctx, "Dziś (pl)")
	step("the filing's failures", chromedp.Click(`[data-testid=today-due] a`), chromedp.WaitVisible(`[data-testid=dlq-row]`), loaded)
	rows, _ := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll('[data-testid=dlq-row]').length`))
	if rows != 2 {
		t.Fatalf("the filing's list has %d rows", rows)
	}
	nip := `[data-testid=edit-section] [data-testid=jsonform-field][data-path=nip] input`
	step("open the pharmacy's", chromedp.Navigate(base+"/dlq/"+dls[0]), chromedp.WaitVisible(nip), loaded,
		chromedp.Evaluate[chromedp.Void](`(() => { const f = document.querySelector('`+nip+`'); f.focus(); f.select(); })()`),
		chromedp.KeyEvent("7010002137"),
		chromedp.Click(`[data-testid=action-preview]`), chromedp.WaitVisible(`[data-testid=diff-line]`), loaded,
		chromedp.Click(`[data-testid=action-edit]`))
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		var got models.DeadLetter
		db.Conn(context.Background()).First(&got, "id = ?", dls[0])
		if got.Status == models.DLQResolved {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the item is %s, not resolved by the replay", got.Status)
		}
	}
	step("back to Dziś", navigate(base+"/today"), chromedp.WaitVisible(`[data-testid=today-due]`), loaded)
	due = textWhen(t, ctx, `[data-testid=today-due]`, func(s string) bool { return s != "" })
	if !strings.Contains(due, "1 klient") || !strings.Contains(due, "3\u00a0310,50\u00a0zł") || strings.Contains(due, "15\u00a0790,50") {
		t.Errorf("Dziś after the fix: %q", due)
	}
}
