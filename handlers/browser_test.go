package handlers_test

import (
	"context"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"lifeline/models"
	"lifeline/models/modeltest"
)

// browserContext starts headless Debian chromium. Where it is missing the test skips,
// except under CI=true, where a skip would hide a missing install: it fails.
func browserContext(t *testing.T) context.Context {
	t.Helper()
	path, err := exec.LookPath("chromium")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("chromium is not installed; .ci/run installs it (apt-get install chromium)")
		}
		t.Skip("chromium not installed: browser journeys skipped (apt-get install chromium)")
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path), chromedp.NoSandbox,
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true), chromedp.Flag("no-first-run", true), chromedp.Flag("disable-gpu", true),
		chromedp.WindowSize(1280, 900))
	actx, cancel := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancel)
	ctx, cancel2 := chromedp.NewContext(actx)
	t.Cleanup(cancel2)
	// A bound for a hung browser, not a speed goal: a journey over many pages (axe on every
	// page, in two languages, at two widths) takes minutes on a loaded 2-core machine.
	ctx, cancel3 := context.WithTimeout(ctx, 5*time.Minute)
	t.Cleanup(cancel3)
	// Start the browser now, bound to this long-lived context (not to a step's timeout).
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	return ctx
}

// stepper returns a function that runs a named browser step with the given timeout and
// fails the test with the step's error and the page when it does not complete.
func stepper(t *testing.T, ctx context.Context, timeout time.Duration) func(name string, actions ...chromedp.Action[chromedp.Void]) {
	return func(name string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		sctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		if err := chromedp.Do(sctx, actions...); err != nil {
			html, _ := chromedp.Run(ctx, chromedp.OuterHTML(chromedp.CSS("body")))
			t.Fatalf("%s: %v\npage: %.3000s", name, err, html)
		}
	}
}

// navigate is chromedp.Navigate to url, tried once more when a navigation the page began
// itself (a form's redirect still loading, its own refresh) aborted it (net::ERR_ABORTED):
// a test that waits on the database, not the page, may go on while the page still moves.
func navigate(url string) chromedp.Action[chromedp.Void] {
	return func(ctx context.Context, tg *chromedp.Target) (chromedp.Void, error) {
		v, err := chromedp.Navigate(url)(ctx, tg)
		if err != nil && strings.Contains(err.Error(), "ERR_ABORTED") {
			v, err = chromedp.Navigate(url)(ctx, tg)
		}
		return v, err
	}
}

// signIn opens the login page, signs in and waits for what only a signed-in page has (the
// login page has a main too: a Navigate sent before would race the form's own navigation,
// net::ERR_ABORTED) and for that page to have loaded.
func signIn(base, email, password string) []chromedp.Action[chromedp.Void] {
	return []chromedp.Action[chromedp.Void]{chromedp.Navigate(base + "/login"), chromedp.WaitVisible(`[data-testid=login-form]`), loaded,
		chromedp.SendKeys(`input[name=email]`, email), chromedp.SendKeys(`input[name=password]`, password),
		chromedp.Submit(`input[name=password]`), chromedp.WaitVisible(`[data-testid=user-menu]`), loaded}
}

// signInPolish is signIn with Polish chosen on the login page first.
func signInPolish(base, email, password string) []chromedp.Action[chromedp.Void] {
	return append([]chromedp.Action[chromedp.Void]{chromedp.Navigate(base + "/login"), chromedp.WaitVisible(`[data-testid=language-switch]`),
		chromedp.Click(`[data-testid=lang-pl]`), chromedp.WaitVisible(`html[lang=pl] [data-testid=login-form]`)}, signIn(base, email, password)[2:]...)
}

// loaded waits until the page in front has finished loading and htmx is in. Put it after a
// wait that matches only the new page, before input: a click or keys sent to a page that is
// still loading can be lost.
var loaded = chromedp.Poll[chromedp.Void](`document.readyState === 'complete' && !!window.htmx`)

// textWhen reads the trimmed text of the first element matching sel until ok accepts it
// (the page may still be settling after a navigation), and fails the test after 10 s
// with the last text, the last error and the page.
func textWhen(t *testing.T, ctx context.Context, sel string, ok func(string) bool) string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		text, err := chromedp.Run(rctx, chromedp.TextContent(sel))
		cancel()
		text = strings.TrimSpace(text)
		if err == nil && ok(text) {
			return text
		}
		if time.Now().After(deadline) {
			html, _ := chromedp.Run(ctx, chromedp.OuterHTML(chromedp.CSS("body")))
			t.Fatalf("%s: text %q (%v)\npage: %.3000s", sel, text, err, html)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestBrowserJourney: an accountant logs in, starts a workflow from its page with a JSON
// input, watches the execution finish live, sees a 422 for bad input, and finds the failed
// execution in the dead-letter list.
func TestBrowserJourney(t *testing.T) {
	t.Parallel()
	ctx := browserContext(t)
	db := modeltest.New(t, models.SQLite)
	a := newApp(t, db)
	tn := a.tenant("Biuro Browser")
	okWF, err := a.wfs.Create(context.Background(), tn.org, actorSystem, []byte(a.definition("/ok")))
	if err != nil {
		t.Fatal(err)
	}
	base := a.srv.URL
	step := stepper(t, ctx, 15*time.Second)
	step("login",
		chromedp.Navigate(base+"/workflows"),
		chromedp.WaitVisible(`[data-testid=login-form]`),
		chromedp.SendKeys(`input[name=email]`, tn.email),
		chromedp.SendKeys(`input[name=password]`, tn.password),
		chromedp.Submit(`input[name=password]`),
		chromedp.WaitVisible(`[data-testid=workflow-row]`))
	step("bad input", chromedp.Navigate(base+"/workflows/"+okWF.ID),
		chromedp.WaitVisible(`[data-testid=start-form] textarea[name=input]`),
		// Bad input first: the form comes back with the field error (422 swapped by htmx).
		chromedp.SetValue(`[data-testid=start-form] textarea[name=input]`, `[1, 2]`),
		chromedp.Click(`[data-testid=start-form] button[type=submit]`),
		chromedp.WaitVisible(`[data-testid=field-error]`))
	msg, err := chromedp.Run(ctx, chromedp.Text(`[data-testid=field-error]`))
	if err != nil || !strings.Contains(msg, "JSON object") {
		t.Fatalf("field error %q %v", msg, err)
	}
	step("start",
		chromedp.SetValue(`[data-testid=start-form] textarea[name=input]`, `{"nip": "5260250274"}`),
		chromedp.Click(`[data-testid=start-form] button[type=submit]`),
		chromedp.WaitVisible(`#execution-body`))
	// The page refreshes itself until the execution has finished.
	deadline := time.Now().Add(30 * time.Second)
	for {
		status, err := chromedp.Run(ctx, chromedp.Text(`#execution-body [data-testid=status]`))
		if err == nil && strings.Contains(status, "SUCCEEDED") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("execution page never showed SUCCEEDED (last %q, %v)", status, err)
		}
		time.Sleep(300 * time.Millisecond)
	}
	// The tenant's failed execution is in the dead-letter list.
	step("dlq", chromedp.Navigate(base+"/dlq/items"), chromedp.WaitVisible(`[data-testid=dlq-row]`))
	row, _ := chromedp.Run(ctx, chromedp.Text(`[data-testid=dlq-row]`))
	if !strings.Contains(row, "400") || !strings.Contains(row, "submit") {
		t.Fatalf("dlq row %q", row)
	}
	// The admin creates an API token from the settings' tab, sees it once, and revokes it.
	// Settings open on the tokens tab. (Clicking that tab again would reload the page, and
	// a wait for its form could match the old page while the new one is on its way.)
	step("tokens page", chromedp.Click(`[data-testid=nav-settings]`), chromedp.WaitVisible(`[data-testid=tab-tokens][aria-current=page]`),
		chromedp.WaitVisible(`[data-testid=new-token] summary`), loaded,
		chromedp.Click(`[data-testid=new-token] summary`), chromedp.WaitVisible(`[data-testid=token-form]`),
		chromedp.SetValue(`#token-name`, "Eksport do ERP"),
		chromedp.SetValue(`#token-expires`, "30"),
		chromedp.Click(`[data-testid=token-form] button[type=submit]`),
		chromedp.WaitVisible(`[data-testid=token-plain]`))
	plain := textWhen(t, ctx, `[data-testid=token-plain]`, func(s string) bool { return strings.HasPrefix(s, "llt_") })
	if r := do(t, http.DefaultClient, "GET", base+"/api/v1/workflows", "", bearer(strings.TrimSpace(plain))); r.status != 200 {
		t.Fatalf("the token from the page: %d", r.status)
	}
	step("revoke", loaded, chromedp.Click(`[data-testid=token-row] [data-testid=token-revoke]`),
		chromedp.WaitVisible(`[data-testid=token-row][data-status=revoked]`))
	if r := do(t, http.DefaultClient, "GET", base+"/api/v1/workflows", "", bearer(strings.TrimSpace(plain))); r.status != 401 {
		t.Fatalf("the revoked token: %d", r.status)
	}
	if shot, err := chromedp.Run(ctx, chromedp.FullScreenshot(100)); err == nil && os.Getenv("LIFELINE_SCREENSHOTS") != "" {
		_ = os.WriteFile(os.Getenv("LIFELINE_SCREENSHOTS")+"/tokens.png", shot, 0o644)
	}
}

// A Polish accountant's office: the switch on the login page, Polish pages, plurals and
// validation messages, the profile's time zone, and back to English from the header.
func TestBrowserJourneyPolish(t *testing.T) {
	t.Parallel()
	ctx := browserContext(t)
	db := modeltest.New(t, models.SQLite)
	a := newApp(t, db)
	tn := a.tenant("Biuro Polskie")
	okWF, err := a.wfs.Create(context.Background(), tn.org, actorSystem, []byte(a.definition("/ok")))
	if err != nil {
		t.Fatal(err)
	}
	base := a.srv.URL
	step := stepper(t, ctx, 15*time.Second)
	text := func(sel string) string {
		t.Helper()
		s, err := chromedp.Run(ctx, chromedp.Text(sel))
		if err != nil {
			t.Fatalf("%s: %v", sel, err)
		}
		return strings.TrimSpace(s)
	}
	lang := func() string {
		t.Helper()
		l, err := chromedp.Run(ctx, chromedp.AttributeValue("html", "lang"))
		if err != nil {
			t.Fatal(err)
		}
		return l.Value
	}
	step("login page in Polish", chromedp.Navigate(base+"/login"), chromedp.WaitVisible(`[data-testid=language-switch]`),
		chromedp.Click(`[data-testid=lang-pl]`), chromedp.WaitVisible(`html[lang=pl] [data-testid=login-form]`), loaded)
	if lang() != "pl" || text(`#login-title`) != "Logowanie" {
		t.Fatalf("login page after the switch: lang %q, title %q", lang(), text(`#login-title`))
	}
	step("login", chromedp.SendKeys(`input[name=email]`, tn.email), chromedp.SendKeys(`input[name=password]`, tn.password),
		chromedp.Submit(`input[name=password]`), chromedp.WaitVisible(`[data-testid=workflow-row]`))
	if lang() != "pl" || text(`[data-testid=nav-workflows]`) != "Przepływy" {
		t.Fatalf("after login: lang %q, nav %q", lang(), text(`[data-testid=nav-workflows]`))
	}
	step("bad input", chromedp.Navigate(base+"/workflows/"+okWF.ID),
		chromedp.WaitVisible(`[data-testid=start-form] textarea[name=input]`),
		chromedp.SetValue(`[data-testid=start-form] textarea[name=input]`, `[1, 2]`),
		chromedp.Click(`[data-testid=start-form] button[type=submit]`),
		chromedp.WaitVisible(`[data-testid=field-error]`))
	if msg := text(`[data-testid=field-error]`); !strings.Contains(msg, "musi być obiektem JSON") {
		t.Fatalf("field error %q", msg)
	}
	step("start", chromedp.SetValue(`[data-testid=start-form] textarea[name=input]`, `{"nip": "5260250274"}`),
		chromedp.Click(`[data-testid=start-form] button[type=submit]`), chromedp.WaitVisible(`#execution-body`))
	deadline := time.Now().Add(30 * time.Second)
	for {
		status, err := chromedp.Run(ctx, chromedp.AttributeValue(`#execution-body [data-testid=status]`, "data-status"))
		if err == nil && status.Value == "SUCCEEDED" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the execution never succeeded (last %q, %v)", status.Value, err)
		}
		time.Sleep(300 * time.Millisecond)
	}
	if s := strings.ToLower(text(`#execution-body [data-testid=status]`)); s != "sukces" {
		t.Fatalf("status badge %q", s)
	}
	if n := text(`[data-testid=step] .step-status .muted`); n != "1 próba" {
		t.Fatalf("attempts %q, want 1 próba", n)
	}
	// The profile: Tokyo time; the execution's start is shown in it, with UTC in the tooltip.
	step("profile", chromedp.Click(`[data-testid=user-email]`), chromedp.WaitVisible(`[data-testid=profile-form]`), loaded,
		chromedp.SetValue(`#profile-zone`, "Asia/Tokyo"), chromedp.Click(`[data-testid=profile-save]`),
		chromedp.WaitVisible(`[data-testid=profile-saved]`), loaded)
	if now := text(`[data-testid=profile-now]`); !strings.Contains(now, "Asia/Tokyo") || !strings.HasPrefix(now, "Tak będą") {
		t.Fatalf("profile now %q", now)
	}
	// (Read once the new page has loaded, and again if its node went stale meanwhile: CI saw
	// "No node with given id found" right after the switch's redirect.)
	step("English from the header", chromedp.Click(`[data-testid=lang-en]`), chromedp.WaitVisible(`html[lang=en] [data-testid=profile-form]`), loaded)
	if nav := textWhen(t, ctx, `[data-testid=nav-workflows]`, func(s string) bool { return s == "Workflows" }); lang() != "en" || nav != "Workflows" {
		t.Fatalf("after switching to English: lang %q, nav %q", lang(), nav)
	}
}
