package handlers_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"lifeline/models"
	"lifeline/models/modeltest"
)

// TestBrowserLiveList: the dead-letter list updates by itself (issue 21): a new dead letter
// appears with its count and the navigation's badge, without a reload; paused, the list stays
// as it is until resumed; with a row ticked, it waits rather than lose the selection.
func TestBrowserLiveList(t *testing.T) {
	t.Parallel()
	ctx := browserContext(t)
	db := modeltest.New(t, models.SQLite)
	a := newApp(t, db)
	tn := a.tenant("Biuro Na Zywo")
	n := 0
	addDeadLetter := func() {
		t.Helper()
		n++
		now := time.Now().UTC()
		subject := fmt.Sprintf("Klient %d · 2026-10", n)
		ex := models.Execution{ID: models.NewID(), OrganizationID: tn.org, WorkflowID: tn.wfID, WorkflowVersion: 1, Status: models.ExecDLQPending,
			Input: models.JSON(`{}`), TriggerType: "api", CorrelationID: models.NewID(), CreatedAt: now, UpdatedAt: now, Subject: &subject}
		e := models.ExecutionError{ID: models.NewID(), OrganizationID: tn.org, ExecutionID: ex.ID, StepID: "submit", ErrorType: "transient",
			ErrorMessage: "503", Status: models.ErrDeadLetter, CreatedAt: now, UpdatedAt: now}
		dl := models.DeadLetter{ID: models.NewID(), OrganizationID: tn.org, ErrorID: e.ID, WorkflowID: tn.wfID, ExecutionID: ex.ID,
			OriginalInput: models.JSON(`{}`), StepStates: models.JSON(`[]`), FailedStepID: "submit", Status: models.DLQPending, Subject: &subject,
			ErrorType: "transient", Reason: "503 Service Unavailable", ExpiresAt: now.Add(24 * time.Hour), CreatedAt: now, UpdatedAt: now}
		for _, row := range []any{&ex, &e, &dl} {
			if err := db.Conn(context.Background()).Create(row).Error; err != nil {
				t.Fatal(err)
			}
		}
	}
	base := a.srv.URL
	step := stepper(t, ctx, 20*time.Second)
	step("login", signIn(base, tn.email, tn.password)...)
	step("list", chromedp.Navigate(base+"/dlq/items"), chromedp.WaitVisible(`[data-testid=dlq-row]`), loaded)
	count := func() int {
		got, _ := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll('[data-testid=dlq-row]').length`))
		return got
	}
	before := count()
	refresh := func() {
		t.Helper()
		step("refresh", chromedp.Evaluate[chromedp.Void](`window.__swapped = false; document.body.addEventListener('htmx:afterSettle', () => window.__swapped = true, {once: true});
		  htmx.trigger('#dlq-live', 'live-refresh')`))
		time.Sleep(500 * time.Millisecond) // a refresh skipped sends nothing: give one that is sent its time
	}
	waitRows := func(want int) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); count() != want; time.Sleep(100 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%d rows, want %d", count(), want)
			}
		}
	}

	addDeadLetter()
	refresh()
	waitRows(before + 1)
	badge, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector('[data-testid=nav-badge]').textContent.trim()`))
	pending, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector('[data-testid=dlq-count][data-status=pending] .status-count-n').textContent.trim()`))
	if badge != fmt.Sprint(before+1) || pending != fmt.Sprint(before+1) {
		t.Errorf("after a live refresh: badge %q, pending count %q, want %d", badge, pending, before+1)
	}

	// Paused: nothing changes until resumed.
	step("pause", chromedp.Click(`[data-testid=live-toggle]`), chromedp.Poll[chromedp.Void](`document.querySelector('[data-testid=live-toggle]').getAttribute('aria-pressed') === 'true'`))
	addDeadLetter()
	refresh()
	if got := count(); got != before+1 {
		t.Fatalf("paused, the list changed: %d rows", got)
	}
	step("resume", chromedp.Click(`[data-testid=live-toggle]`))
	refresh()
	waitRows(before + 2)

	// A ticked row holds the list still (the selection would be lost).
	step("tick", chromedp.Click(`[data-testid=dlq-select]`))
	addDeadLetter()
	refresh()
	if got := count(); got != before+2 {
		t.Fatalf("with a row ticked, the list changed: %d rows", got)
	}
	step("untick", chromedp.Click(`[data-testid=dlq-select]`))
	refresh()
	waitRows(before + 3)
}
