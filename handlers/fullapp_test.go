package handlers_test

import (
	"io"
	"net/http"
	"net/netip"
	"sort"
	"testing"
	"time"

	"github.com/labstack/echo/v4"

	"lifeline/handlers"
	"lifeline/models"
	"lifeline/services/notify"
	"lifeline/services/notify/email"
	"lifeline/services/notify/slack"
	"lifeline/services/notify/teams"
	"lifeline/services/outbound"
	"lifeline/services/sandbox"
	"lifeline/views/i18n"
)

// emptyInbox is a demo inbox that received nothing.
type emptyInbox struct{}

func (emptyInbox) Emails() []email.Received { return nil }
func (emptyInbox) Hooks() []sandbox.Hook    { return nil }

// newFullApp is newApp with every optional part of the server (notifications, the demo's
// sandbox and inbox; bulk actions are newApp's), so that every route the server can have is
// registered.
func newFullApp(t testing.TB, db *models.DB) *app {
	t.Helper()
	allow := []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
	client := outbound.NewClient(outbound.Options{Allow: allow, Timeout: 5 * time.Second})
	tm := teams.New(client)
	tm.SkipURLCheck = true
	return newAppDeps(t, db, io.Discard, func(d *handlers.Deps) {
		d.Notify = notify.New(db, notify.Config{Texts: i18n.Catalog{}, BaseURL: "http://lifeline.test", Allow: allow,
			Senders: map[notify.Channel]notify.Sender{notify.Slack: slack.New(client), notify.Teams: tm}})
		d.Sandbox = http.NotFoundHandler()
		d.DemoInbox = emptyInbox{}
	})
}

// routesOf lists the server's routes as "METHOD /path" (echo's own, like the 405 and 404
// handlers it adds for groups, left out).
func routesOf(t testing.TB, a *app) []string {
	t.Helper()
	e, ok := a.srv.Config.Handler.(*echo.Echo)
	if !ok {
		t.Fatalf("the server's handler is %T, not *echo.Echo", a.srv.Config.Handler)
	}
	seen := map[string]bool{}
	var out []string
	for _, r := range e.Routes() {
		k := r.Method + " " + r.Path
		if r.Method == echo.RouteNotFound || seen[k] {
			continue
		}
		seen[k] = true
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
