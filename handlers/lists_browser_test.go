package handlers_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"lifeline/models"
	"lifeline/models/modeltest"
)

// TestBrowserPhoneList: the dead-letter list on a 390 px phone, in Polish (issue 21): the
// first dead letter is on screen without scrolling; the filters are one "Filtry (N)" button
// that counts the filters in use and opens the form; each row's link and checkbox, the
// toggle and the navigation are tap targets of at least 44 px; a card shows the subject, the
// reason and the age, not the other columns; and Tab visits the page in the order it reads,
// top to bottom (it went from the navigation back up to the bell and the account).
func TestBrowserPhoneList(t *testing.T) {
	t.Parallel()
	ctx := browserContext(t)
	db := modeltest.New(t, models.SQLite)
	a := newApp(t, db)
	s := a.listSeed("Biuro Telefon Lista")
	base := a.srv.URL
	step := stepper(t, ctx, 15*time.Second)
	step("phone", chromedp.EmulateViewport(390, 844))
	step("login", signInPolish(base, s.email, s.password)...)
	step("list", chromedp.Navigate(base+"/dlq/items?status=pending"), chromedp.WaitVisible(`[data-testid=dlq-row]`), loaded)

	// The first item, whole, above the fold.
	if bottom, _ := chromedp.Run(ctx, chromedp.Evaluate[float64](`(() => { const r = document.querySelector('[data-testid=dlq-row]').getBoundingClientRect();
	  return r.top >= 0 && r.height > 0 ? r.bottom - window.innerHeight : 1e6; })()`)); bottom > 0 {
		t.Errorf("the first dead letter ends %v px below the screen", bottom)
	}
	// The filters: folded, counted, opened by the button.
	if vis, _ := chromedp.Run(ctx, chromedp.Evaluate[bool](`!!document.querySelector('[data-testid=dlq-filter]').offsetParent`)); vis {
		t.Error("the filter form is open on a phone before it is asked for")
	}
	if got := textWhen(t, ctx, `[data-testid=filters-toggle]`, func(s string) bool { return s != "" }); got != "Filtry (1)" {
		t.Errorf("the toggle reads %q, want Filtry (1)", got)
	}
	step("open the filters", chromedp.Click(`[data-testid=filters-toggle]`), chromedp.WaitVisible(`[data-testid=dlq-filter] select[name=workflowId]`))
	if exp, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector('[data-testid=filters-toggle]').getAttribute('aria-expanded')`)); exp != "true" {
		t.Errorf("aria-expanded %q once open", exp)
	}
	step("a second filter", chromedp.SetValue(`[data-testid=dlq-filter] select[name=errorType]`, "validation"),
		chromedp.Evaluate[chromedp.Void](`document.querySelector('[data-testid=dlq-filter] select[name=errorType]').dispatchEvent(new Event('change', {bubbles: true}))`))
	if got := textWhen(t, ctx, `[data-testid=filters-toggle]`, func(s string) bool { return s == "Filtry (2)" }); got != "Filtry (2)" {
		t.Errorf("after a second filter the toggle reads %q", got)
	}
	step("back to the list", chromedp.Navigate(base+"/dlq/items"), chromedp.WaitVisible(`[data-testid=dlq-row]`), loaded)
	// Tap targets.
	small, _ := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll('[data-testid=dlq-open], .select-hit, [data-testid=filters-toggle], .mainnav a, [data-testid=dlq-count]')]
	  .filter(e => { const r = e.getBoundingClientRect(); return r.width > 0 && (r.height < 44 || r.width < 44); })
	  .map(e => (e.getAttribute('data-testid') || e.className) + ' ' + Math.round(e.getBoundingClientRect().width) + 'x' + Math.round(e.getBoundingClientRect().height))`))
	if len(small) > 0 {
		t.Errorf("tap targets under 44 px: %q", small)
	}
	// A card: subject, reason, age; not the workflow, step, type, retries, status, expiry.
	shown, _ := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelector('[data-testid=dlq-row]').children]
	  .filter(td => td.offsetParent && td.getBoundingClientRect().height > 0).map(td => td.className)`))
	if got := strings.Join(shown, " "); !strings.Contains(got, "cell-main") || !strings.Contains(got, "cell-reason") || !strings.Contains(got, "cell-age") ||
		strings.Contains(got, "cell-workflow") || strings.Contains(got, "cell-status") || strings.Contains(got, "cell-expires") {
		t.Errorf("a card shows %q", got)
	}
	// Tab goes down the page: each stop is no higher than the one before (a row of links
	// reads left to right at one height).
	step("focus the top", chromedp.Evaluate[chromedp.Void](`document.activeElement && document.activeElement.blur(); window.scrollTo(0, 0)`))
	var prev float64 = -1
	var prevName string
	var stops []string
	for i := 0; i < 30; i++ {
		step(fmt.Sprint("tab ", i), chromedp.KeyEvent(kb.Tab))
		got, err := chromedp.Run(ctx, chromedp.Evaluate[map[string]any](`(() => { const e = document.activeElement;
		  return {top: e.getBoundingClientRect().top + window.scrollY, name: e.tagName + ' ' + (e.getAttribute('data-testid') || e.className || e.textContent.trim().slice(0, 20))}; })()`))
		if err != nil {
			t.Fatal(err)
		}
		top, name := got["top"].(float64), got["name"].(string)
		if strings.Contains(name, "skip-link") {
			continue
		}
		if strings.HasPrefix(name, "BODY") { // past the last stop
			break
		}
		stops = append(stops, name)
		if prev >= 0 && top < prev-8 {
			t.Errorf("Tab went up the page: from %s (y %v) to %s (y %v)", prevName, prev, name, top)
		}
		prev, prevName = top, name
	}
	// The account comes after the navigation, and the list after both.
	joined := strings.Join(stops, " | ")
	if nav, bell, row := strings.Index(joined, "nav-dead-letters"), strings.Index(joined, "user-email"), strings.Index(joined, "dlq-open"); nav < 0 || bell < nav || row < bell {
		t.Errorf("Tab order: %s", joined)
	}
}

// TestBrowserListOneTabStop: on the dead-letter list at 1440 px each row is one Tab stop (its
// link; the checkbox and the workflow link are not), Space ticks the row in focus as "x"
// does, Enter opens it; and the header's sort links sort the list in place, with aria-sort.
func TestBrowserListOneTabStop(t *testing.T) {
	t.Parallel()
	ctx := browserContext(t)
	db := modeltest.New(t, models.SQLite)
	a := newApp(t, db)
	s := a.listSeed("Biuro Jeden Tab")
	base := a.srv.URL
	step := stepper(t, ctx, 15*time.Second)
	step("viewport", chromedp.EmulateViewport(1440, 900))
	step("login", signIn(base, s.email, s.password)...)
	step("list", chromedp.Navigate(base+"/dlq/items"), chromedp.WaitVisible(`[data-testid=dlq-row]`), loaded)
	row := func() string {
		got, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`(() => { const e = document.activeElement; const r = e && e.closest('[data-testid=dlq-row]');
		  return r ? 'row' + [...document.querySelectorAll('[data-testid=dlq-row]')].indexOf(r) + ' ' + (e.getAttribute('data-testid') || e.tagName) : (e ? e.tagName : ''); })()`))
		return got
	}
	step("focus row 0", chromedp.Focus(`[data-testid=dlq-row] [data-row-link]`))
	step("tab", chromedp.KeyEvent(kb.Tab))
	if got := row(); got != "row1 dlq-open" {
		t.Fatalf("Tab went to %q, want the next row's link (one stop per row)", got)
	}
	step("space", chromedp.KeyEvent(" "))
	if n := mustString(t, ctx, `[...document.querySelectorAll('[data-testid=dlq-select]')].map(b => b.checked ? '1' : '0').join('')`); n != "01" {
		t.Errorf("Space ticked %q, want the second row", n)
	}
	step("tab", chromedp.KeyEvent(kb.Tab))
	if got := row(); got != "row2 dlq-open" {
		t.Fatalf("Tab went to %q, want the third row's link", got)
	}
	step("enter", chromedp.KeyEvent(kb.Enter), chromedp.WaitVisible(`[data-testid=dlq-title]`))
	if u := mustString(t, ctx, `location.pathname`); u != "/dlq/"+s.dls[1] {
		t.Errorf("Enter opened %s, want /dlq/%s", u, s.dls[1])
	}
	// Sorting by the header: the table is swapped, the address keeps the order.
	step("back", chromedp.Navigate(base+"/dlq/items"), chromedp.WaitVisible(`[data-testid=dlq-row]`), loaded)
	step("sort by retries", chromedp.Click(`th.col-retries [data-testid=sort-link]`),
		chromedp.Poll[chromedp.Void](`document.querySelector('th.col-retries') && document.querySelector('th.col-retries').getAttribute('aria-sort') === 'descending'`))
	order := mustString(t, ctx, `[...document.querySelectorAll('[data-testid=dlq-retries]')].map(e => e.textContent.trim()).join(',')`)
	if search := mustString(t, ctx, `location.search`); order != "3,1,0" || !strings.Contains(search, "sort=-retries") {
		t.Errorf("sorted by retries: %s at %s", order, search)
	}
}

// mustString evaluates js in the page in front.
func mustString(t *testing.T, ctx context.Context, js string) string {
	t.Helper()
	got, err := chromedp.Run(ctx, chromedp.Evaluate[string](js))
	if err != nil {
		t.Fatalf("%s: %v", js, err)
	}
	return got
}

// TestBrowserAccessibilityLiveList runs axe-core on the dead-letter list after a live refresh
// has swapped it (rows, counts and the navigation's badge), sorted, at 1440 px and at 390 px,
// in English and in Polish, and fails on any WCAG A or AA violation (issue 21).
func TestBrowserAccessibilityLiveList(t *testing.T) {
	t.Parallel()
	ctx := browserContext(t)
	db := modeltest.New(t, models.SQLite)
	a := newApp(t, db)
	s := a.listSeed("Biuro Axe Na Żywo")
	n := 0
	addDeadLetter := func() {
		t.Helper()
		n++
		now := time.Now().UTC()
		subject := fmt.Sprintf("Klientka Zażółć %d · 2026-10", n)
		ex := models.Execution{ID: models.NewID(), OrganizationID: s.org, WorkflowID: s.wfID, WorkflowVersion: 1, Status: models.ExecDLQPending,
			Input: models.JSON(`{}`), TriggerType: "api", CorrelationID: models.NewID(), CreatedAt: now, UpdatedAt: now, Subject: &subject}
		e := models.ExecutionError{ID: models.NewID(), OrganizationID: s.org, ExecutionID: ex.ID, StepID: "submit", ErrorType: "transient",
			ErrorMessage: "503", Status: models.ErrDeadLetter, CreatedAt: now, UpdatedAt: now}
		dl := models.DeadLetter{ID: models.NewID(), OrganizationID: s.org, ErrorID: e.ID, WorkflowID: s.wfID, ExecutionID: ex.ID,
			OriginalInput: models.JSON(`{}`), StepStates: models.JSON(`[]`), FailedStepID: "submit", Status: models.DLQPending, Subject: &subject,
			ErrorType: "transient", Reason: "503 Service Unavailable", RetryCount: 9, ExpiresAt: now.Add(24 * time.Hour), CreatedAt: now, UpdatedAt: now}
		for _, row := range []any{&ex, &e, &dl} {
			if err := db.Conn(context.Background()).Create(row).Error; err != nil {
				t.Fatal(err)
			}
		}
	}
	base := a.srv.URL
	step := stepper(t, ctx, 20*time.Second)
	step("login", signIn(base, s.email, s.password)...)
	for _, lang := range []string{"en", "pl"} {
		for _, width := range []int64{1440, 390} {
			where := fmt.Sprintf("/dlq after a live refresh (%s, %d)", lang, width)
			step(where, chromedp.EmulateViewport(width, 900), chromedp.Navigate(base+"/profile"), loaded,
				chromedp.Click(`[data-testid=lang-`+lang+`]`), chromedp.WaitVisible(`html[lang=`+lang+`] main`),
				chromedp.Navigate(base+"/dlq/items?sort=-retries"), chromedp.WaitVisible(`[data-testid=dlq-row]`), loaded)
			before := mustString(t, ctx, `String(document.querySelectorAll('[data-testid=dlq-row]').length)`)
			addDeadLetter()
			step("refresh "+where, chromedp.Evaluate[chromedp.Void](`htmx.trigger('#dlq-live', 'live-refresh')`),
				chromedp.Poll[chromedp.Void](`String(document.querySelectorAll('[data-testid=dlq-row]').length) !== `+jsString(before)))
			// The new one, with the most retries, heads the sorted list.
			if first := mustString(t, ctx, `document.querySelector('[data-testid=dlq-open]').textContent.trim()`); first != fmt.Sprintf("Klientka Zażółć %d · 2026-10", n) {
				t.Errorf("%s: the first row is %q", where, first)
			}
			for _, v := range axeViolations(t, ctx) {
				t.Errorf("%s: %s", where, v)
			}
		}
	}
}

// TestBrowserTopBarOneLine: at 1440 px an admin's top bar (every item, their counts at their
// widest, the bell, a long organization name, the languages and log out) is one line, in
// Polish and in English.
func TestBrowserTopBarOneLine(t *testing.T) {
	t.Parallel()
	ctx := browserContext(t)
	db := modeltest.New(t, models.SQLite)
	a := newFullApp(t, db) // with the bell
	s := a.listSeed("Biuro Rachunkowe Kowalski i Wspolnicy")
	base := a.srv.URL
	step := stepper(t, ctx, 15*time.Second)
	step("viewport", chromedp.EmulateViewport(1440, 900))
	step("login", signIn(base, s.email, s.password)...)
	for _, lang := range []string{"pl", "en"} {
		step(lang, chromedp.Navigate(base+"/dlq/items"), chromedp.WaitVisible(`[data-testid=lang-`+lang+`]`), loaded,
			chromedp.Evaluate[chromedp.Void](`(() => { const b = document.querySelector('button[data-testid=lang-`+lang+`]'); if (b) b.click(); })()`),
			chromedp.WaitVisible(`html[lang=`+lang+`] [data-testid=nav-settings]`), loaded)
		// Every count at its widest (999+): the waiting requests', the dead letters' and the bell's.
		step(lang+" widest counts", chromedp.Evaluate[chromedp.Void](`(() => {
			for (const id of ['waiting', 'dead-letters']) {
				const a = document.querySelector('[data-testid=nav-' + id + ']');
				let b = a.querySelector('[data-testid=nav-badge]');
				if (!b) { b = document.createElement('span'); b.className = 'nav-badge'; b.dataset.testid = 'nav-badge'; a.append(' ', b); }
				b.textContent = '999+';
			}
			const bell = document.querySelector('[data-testid=bell]');
			let n = bell.querySelector('[data-testid=bell-count]');
			if (!n) { n = document.createElement('span'); n.className = 'bell-count'; n.dataset.testid = 'bell-count'; bell.append(n); }
			bell.classList.add('bell--unread');
			n.textContent = '999+';
		})()`))
		tops := mustString(t, ctx, `[...document.querySelectorAll('.mainnav li, [data-testid=user-menu]')].map(e => Math.round(e.getBoundingClientRect().bottom) < 60 ? 1 : 0).join('')`)
		if strings.Contains(tops, "0") || len(tops) < 8 {
			t.Errorf("%s: the top bar's items on its first line: %s (1 = yes; the nav's items, then the account)", lang, tops)
		}
	}
	// The settings' sections wrap: the last of a dozen (the audit log) is in sight when shown.
	step("audit log", chromedp.Navigate(base+"/audit"), chromedp.WaitVisible(`[data-testid=tab-audit][aria-current=page]`), loaded)
	if in := mustString(t, ctx, `(() => { const r = document.querySelector('[data-testid=tab-audit]').getBoundingClientRect();
		return String(r.left >= 0 && r.right <= innerWidth && r.bottom <= innerHeight); })()`); in != "true" {
		t.Error("the audit log's tab is out of sight on its own page")
	}
}
