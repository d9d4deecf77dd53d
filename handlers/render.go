package handlers

import (
	"net/http"
	"net/url"

	"github.com/a-h/templ"
	"github.com/labstack/echo/v4"
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

func urlQueryEscape(s string) string { return url.QueryEscape(s) }

// redirect answers a form post: HX-Redirect for htmx, 303 otherwise.
func redirect(c echo.Context, to string) error {
	if isHTMX(c) {
		c.Response().Header().Set("HX-Redirect", to)
		return c.NoContent(http.StatusNoContent)
	}
	return c.Redirect(http.StatusSeeOther, to)
}
