package handlers

import (
	"cmp"
	"context"
	"log/slog"
	"slices"

	"github.com/labstack/echo/v4"

	"lifeline/models"
	"lifeline/services/notify"
	"lifeline/views/i18n"
	"lifeline/views/layouts"
)

// links builds the URLs of named routes (habit 1: Echo's Reverse, never by hand). It is
// made before the routes and answers once they are registered; a route the app runs
// without (no notification service, no engine, not the demo) is "", and the pages leave
// its link out.
type links struct{ e *echo.Echo }

// url builds the URL of a named route, "" when the app has no route of that name.
func (l links) url(name string, params ...any) string { return l.e.Reverse(name, params...) }

// unreadCounter counts a user's unread notifications, for the bell (notify.Service).
type unreadCounter interface {
	Inbox(ctx context.Context, orgID, userID string, limit int) ([]notify.InApp, int64, error)
}

// pendingCounter counts the organization's dead letters waiting for someone, for the
// navigation's badge (executions.Service).
type pendingCounter interface {
	PendingDeadLetters(ctx context.Context, orgID string) (int, error)
}

// chrome builds what every page has around its content: the layout's title, navigation,
// user, settings tabs, language switch and notification bell.
type chrome struct {
	links
	unread  unreadCounter // nil: no bell (the app runs without notifications)
	pending pendingCounter
	// waiting counts the requests of ask steps a user may answer (nil: no engine, no item).
	waiting waitingCounter
	log     *slog.Logger
}

// page builds the layout's view model for the current user. title is a message id, or a
// name shown as it is (a workflow's).
func (ch *chrome) page(c echo.Context, title, active string) layouts.Page {
	p := layouts.Page{Title: localizer(c).TOr(title, title), LogoutURL: ch.url("logout"), LanguageURL: ch.url("language"), Path: c.Request().URL.RequestURI()}
	pr := principal(c)
	if pr == nil {
		// Anonymous pages have no forms, except the login page, which asks for its token.
		return p
	}
	p.CSRFToken = csrfToken(c)
	p.OrgName, p.UserEmail, p.Role = pr.OrgName, pr.Email, localizer(c).TOr("role."+pr.Role, pr.Role)
	if pr.UserID != "" {
		p.ProfileURL = ch.url("profile")
	}
	p.Bell = ch.bell(c)
	dlq, _ := ch.pending.PendingDeadLetters(c.Request().Context(), pr.OrganizationID)
	l := localizer(c)
	p.Nav = []layouts.NavItem{
		{ID: "today", Label: l.T("nav.today"), URL: ch.url("today"), Active: active == "today"},
	}
	if u := ch.url("waiting"); u != "" && ch.waiting != nil {
		n, err := ch.waiting.CountOpenFor(c.Request().Context(), pr.OrganizationID, pr.UserID, pr.Role)
		if err != nil {
			ch.log.Warn("nav: waiting count", "err", err)
		}
		p.Nav = append(p.Nav, layouts.NavItem{ID: "waiting", Label: l.T("nav.waiting"), URL: u, Active: active == "waiting", Badge: n})
	}
	p.Nav = append(p.Nav, []layouts.NavItem{
		{ID: "workflows", Label: l.T("nav.workflows"), URL: ch.url("workflows"), Active: active == "workflows"},
		{ID: "executions", Label: l.T("nav.executions"), URL: ch.url("executions"), Active: active == "executions"},
		{ID: "dead-letters", Label: l.T("nav.dlq"), URL: cmp.Or(ch.url("dlq.problems"), ch.url("dlq")), Active: active == "dlq", Badge: dlq},
		{ID: "breakers", Label: l.T("nav.breakers"), URL: ch.url("breakers"), Active: active == "breakers"},
	}...)
	if pr.Can(models.RoleAccountant) && ch.url("analytics") != "" {
		p.Nav = append(p.Nav, layouts.NavItem{ID: "analytics", Label: l.T("nav.analytics"), URL: ch.url("analytics"), Active: active == "analytics"})
	}
	if pr.Can(models.RoleAdmin) && pr.UserID != "" {
		tabs := ch.settingsTabs(l, active)
		inSettings := slices.ContainsFunc(tabs, func(t layouts.NavItem) bool { return t.Active })
		p.Nav = append(p.Nav, layouts.NavItem{ID: "settings", Label: l.T("nav.settings"), URL: tabs[0].URL, Active: inSettings})
		if inSettings {
			p.Tabs = tabs
		}
	}
	return p
}

// settingsTabs are the sections of the admins' settings the app has (a section whose route
// is not registered is left out), the one named active marked.
func (ch *chrome) settingsTabs(l *i18n.Localizer, active string) []layouts.NavItem {
	var tabs []layouts.NavItem
	for _, t := range []struct{ id, label, route string }{
		{"notifications", "nav.notifications", "notifications.settings"},
		{"deliveries", "nav.deliveries", "notifications.deliveries"},
		{"tokens", "nav.tokens", "tokens"},
		{"rules", "nav.rules", "organization.rules"},
		{"escalation", "nav.escalation", "organization.escalation"},
		{"connections", "nav.connections", "connections"},
		{"credentials", "nav.credentials", "credentials"},
		{"periods", "nav.periods", "periods"},
		{"health", "nav.health", "health"},
		{"quarantine", "nav.quarantine", "quarantine"},
		// The audit log is the organization's, read by its admins: a section of the settings,
		// as in GitHub's and Sentry's, which keeps the top bar on one line at 1440 px.
		{"audit", "nav.audit", "audit"},
		{"demoinbox", "nav.demoinbox", "demo.inbox"},
	} {
		if u := ch.url(t.route); u != "" {
			tabs = append(tabs, layouts.NavItem{ID: t.id, Label: l.T(t.label), URL: u, Active: t.id == active})
		}
	}
	return tabs
}

// bell is the top bar's bell for the request's user: nil for API principals, without the
// notification service, or when the count cannot be read (the page still renders).
func (ch *chrome) bell(c echo.Context) *layouts.Bell {
	p := principal(c)
	if ch.unread == nil || p == nil || p.UserID == "" {
		return nil
	}
	_, unread, err := ch.unread.Inbox(c.Request().Context(), p.OrganizationID, p.UserID, 0)
	if err != nil {
		ch.log.Warn("bell: unread count", "err", err)
		return nil
	}
	return &layouts.Bell{URL: ch.url("notifications.bell"), Link: ch.url("notifications"), Unread: int(unread),
		Label: localizer(c).N("notifications.bell.label", int(unread))}
}
