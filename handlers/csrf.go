package handlers

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"net/http"

	"github.com/labstack/echo/v4"
)

// csrfKey is where the session keeps its CSRF token (and where pages find it in the context).
const csrfKey = "csrf"

// csrf protects state-changing requests of sessions: each session has its own token (made
// when a page first needs one, a new one at login; logout ends it), pages send it as the X-CSRF-Token header (htmx) or the
// _csrf form field, and a request whose token is not its own session's is refused with 403.
// A browser's cross-site request is refused whatever it carries. Requests without ambient
// credentials (bearer API calls, signed webhooks, the sandbox, health checks, static files)
// are exempt.
func (s *Server) csrf(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if csrfSkipper(c) {
			return next(c)
		}
		ctx := c.Request().Context()
		tok := s.sessions.GetString(ctx, csrfKey)
		switch c.Request().Method {
		case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace:
			if tok != "" {
				c.Set(csrfKey, tok)
			} else {
				// Made when a page asks for it (csrfToken), so a visitor who gets no
				// form (a 404, a redirect) writes no session.
				c.Set(csrfKey, func() string {
					tok := newCSRFToken()
					s.sessions.Put(ctx, csrfKey, tok)
					return tok
				})
			}
			return next(c)
		}
		c.Set(csrfKey, tok)
		if c.Request().Header.Get("Sec-Fetch-Site") == "cross-site" {
			return echo.NewHTTPError(http.StatusForbidden, "csrf: cross-site request")
		}
		got := c.Request().Header.Get("X-CSRF-Token")
		if got == "" {
			got = c.FormValue("_csrf")
		}
		if got == "" || tok == "" || subtle.ConstantTimeCompare([]byte(got), []byte(tok)) != 1 {
			return echo.NewHTTPError(http.StatusForbidden, "csrf: token missing or not this session's")
		}
		return next(c)
	}
}

// renewCSRF gives the session a new CSRF token (at login).
func (s *Server) renewCSRF(c echo.Context) {
	tok := newCSRFToken()
	s.sessions.Put(c.Request().Context(), csrfKey, tok)
	c.Set(csrfKey, tok)
}

func newCSRFToken() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}
