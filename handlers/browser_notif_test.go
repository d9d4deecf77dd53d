package handlers_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"lifeline/models"
	"lifeline/models/modeltest"
	"lifeline/services/notify"
)

// TestBrowserNotificationBell: an admin has a page open; an in-app notification created
// meanwhile appears on the bell without reloading; on the notifications page "mark all
// read" clears the count.
func TestBrowserNotificationBell(t *testing.T) {
	t.Parallel()
	ctx := browserContext(t)
	db := modeltest.New(t, models.SQLite)
	a := newNotifApp(t, db)
	nt := a.tenant("Biuro Dzwonek")
	var u models.User
	if err := db.Conn(context.Background()).Where("email = ?", nt.admin.email).First(&u).Error; err != nil {
		t.Fatal(err)
	}
	step := func(name string, timeout time.Duration, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		sctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		if err := chromedp.Do(sctx, actions...); err != nil {
			html, _ := chromedp.Run(ctx, chromedp.OuterHTML(chromedp.CSS("body")))
			t.Fatalf("%s: %v\npage: %.3000s", name, err, html)
		}
	}
	step("login", 15*time.Second,
		chromedp.Navigate(a.srv.URL+"/workflows"),
		chromedp.WaitVisible(`[data-testid=login-form]`),
		chromedp.SendKeys(`input[name=email]`, nt.admin.email),
		chromedp.SendKeys(`input[name=password]`, nt.admin.password),
		chromedp.Submit(`input[name=password]`),
		chromedp.WaitVisible(`[data-testid=bell]`))
	if n, _ := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll("[data-testid=bell-count]").length`)); n != 0 {
		t.Fatalf("a count before any notification")
	}
	// Mark the document: a reload would lose it.
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`window.__stay = true`)); err != nil {
		t.Fatal(err)
	}
	if err := a.ns.Test(context.Background(), nt.org, u.ID, notify.App); err != nil {
		t.Fatal(err)
	}
	step("the bell counts it", 20*time.Second, chromedp.WaitVisible(`[data-testid=bell-count]`))
	label, _ := chromedp.Run(ctx, chromedp.AttributeValue(`[data-testid=bell]`, "aria-label"))
	stay, _ := chromedp.Run(ctx, chromedp.Evaluate[bool](`window.__stay === true`))
	if !stay || !strings.Contains(label.Value, "1") {
		t.Fatalf("bell %q, same document %v", label.Value, stay)
	}
	step("the list", 15*time.Second, chromedp.Click(`[data-testid=bell]`), chromedp.WaitVisible(`[data-testid=notify-item][data-unread=true]`))
	// Clicked once the page has loaded and htmx is in (a click by coordinates while the
	// page still lays out can miss the button), through the element itself.
	step("mark all read", 15*time.Second,
		loaded,
		chromedp.Evaluate[chromedp.Void](`document.querySelector('[data-testid=notify-read-all]').click()`),
		chromedp.WaitVisible(`[data-testid=notify-item][data-unread=false]`),
		chromedp.WaitNotPresent(`[data-testid=bell-count]`))
	if u, _ := chromedp.Run(ctx, chromedp.AttributeValue(`[data-testid=bell]`, "data-unread")); u.Value != "0" {
		t.Fatalf("bell after mark all read: %q", u.Value)
	}
}
