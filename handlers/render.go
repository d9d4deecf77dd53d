package handlers

import (
	"net/http"
	"net/url"
	"slices"

	"github.com/a-h/templ"
	"github.com/labstack/echo/v4"

	"lifeline/models"
	"lifeline/views/i18n"
	"lifeline/views/layouts"
)

// render writes a templ component with a status.
func render(c echo.Context, status int, cmp templ.Component) error {
	c.Response().Header().Set(echo.HeaderContentType, echo.MIMETextHTMLCharsetUTF8)
	c.Response().WriteHeader(status)
	return cmp.Render(c.Request().Context(), c.Response())
}

// isHTMX reports whether the request came from htmx (and wants a fragment).
func isHTMX(c echo.Context) bool {
	return c.Request().Header.Get("HX-Request") == "true" && c.Request().Header.Get("HX-History-Restore-Request") != "true"
}

// csrfToken returns the session's CSRF token for a page's forms, making it on first use.
func csrfToken(c echo.Context) string {
	switch t := c.Get(csrfKey).(type) {
	case string:
		return t
	case func() string:
		tok := t()
		c.Set(csrfKey, tok)
		return tok
	}
	return ""
}

// page builds the layout's view model for the current user. title is a message id, or a
// name shown as it is (a workflow's).
func (s *Server) page(c echo.Context, title, active string) layouts.Page {
	p := layouts.Page{Title: localizer(c).TOr(title, title), LogoutURL: s.url("logout"), LanguageURL: s.url("language"), Path: c.Request().URL.RequestURI()}
	pr := principal(c)
	if pr == nil {
		// Anonymous pages have no forms, except the login page, which asks for its token.
		return p
	}
	p.CSRFToken = csrfToken(c)
	p.OrgName, p.UserEmail, p.Role = pr.OrgName, pr.Email, localizer(c).TOr("role."+pr.Role, pr.Role)
	if pr.UserID != "" {
		p.ProfileURL = s.url("profile")
	}
	p.Bell = s.bell(c)
	dlq, _ := s.DB.CountDLQPending(c.Request().Context(), pr.OrganizationID)
	l := localizer(c)
	p.Nav = []layouts.NavItem{
		{ID: "workflows", Label: l.T("nav.workflows"), URL: s.url("workflows"), Active: active == "workflows"},
		{ID: "executions", Label: l.T("nav.executions"), URL: s.url("executions"), Active: active == "executions"},
		{ID: "dead-letters", Label: l.T("nav.dlq"), URL: s.url("dlq"), Active: active == "dlq", Badge: dlq},
		{ID: "breakers", Label: l.T("nav.breakers"), URL: s.url("breakers"), Active: active == "breakers"},
	}
	if pr.Can(models.RoleAdmin) && pr.UserID != "" {
		tabs := s.settingsTabs(l, active)
		inSettings := slices.ContainsFunc(tabs, func(t layouts.NavItem) bool { return t.Active })
		p.Nav = append(p.Nav, layouts.NavItem{ID: "audit", Label: l.T("nav.audit"), URL: s.url("audit"), Active: active == "audit"},
			layouts.NavItem{ID: "settings", Label: l.T("nav.settings"), URL: tabs[0].URL, Active: inSettings})
		if inSettings {
			p.Tabs = tabs
		}
	}
	return p
}

// settingsTabs are the sections of the admins' settings, the one named active marked.
func (s *Server) settingsTabs(l *i18n.Localizer, active string) []layouts.NavItem {
	var tabs []layouts.NavItem
	if s.Notify != nil {
		tabs = append(tabs, layouts.NavItem{ID: "notifications", Label: l.T("nav.notifications"), URL: s.url("notifications.settings")},
			layouts.NavItem{ID: "deliveries", Label: l.T("nav.deliveries"), URL: s.url("notifications.deliveries")})
	}
	tabs = append(tabs, layouts.NavItem{ID: "tokens", Label: l.T("nav.tokens"), URL: s.url("tokens")},
		layouts.NavItem{ID: "connections", Label: l.T("nav.connections"), URL: s.url("connections")})
	if s.Engine != nil {
		tabs = append(tabs, layouts.NavItem{ID: "health", Label: l.T("nav.health"), URL: s.url("health")})
	}
	if s.DemoInbox != nil {
		tabs = append(tabs, layouts.NavItem{ID: "demoinbox", Label: l.T("nav.demoinbox"), URL: s.url("demo.inbox")})
	}
	for i := range tabs {
		tabs[i].Active = tabs[i].ID == active
	}
	return tabs
}

func urlQueryEscape(s string) string { return url.QueryEscape(s) }

// redirect answers a form post: HX-Redirect for htmx, 303 otherwise.
func redirect(c echo.Context, to string) error {
	if isHTMX(c) {
		c.Response().Header().Set("HX-Redirect", to)
		return c.NoContent(http.StatusNoContent)
	}
	return c.Redirect(http.StatusSeeOther, to)
}
