package handlers

import (
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"lifeline/services/auth"
	"lifeline/views/components"
	"lifeline/views/i18n"
)

// langCookie remembers the language chosen with the switch before logging in.
const langCookie = "lifeline_lang"

// localize puts the request's localizer in its context, where pages and components read it:
// for anonymous pages the switch's cookie, else the browser's Accept-Language.
func (s *Server) localize(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		lang := ""
		if ck, err := c.Cookie(langCookie); err == nil {
			lang = ck.Value
		}
		setLocalizer(c, i18n.New(i18n.Resolve(lang, "", c.Request().Header.Get("Accept-Language")), nil))
		return next(c)
	}
}

// localizeFor puts the localizer of a signed-in principal in the request's context: the
// user's language, else the organization's, else the browser's; and their time zone. For the
// API, an Accept-Language that names Polish or English comes first.
func localizeFor(c echo.Context, p *auth.Principal, api bool) {
	accept := c.Request().Header.Get("Accept-Language")
	lang := i18n.Resolve(p.Language, p.OrgLanguage, accept)
	if api {
		lang = i18n.ResolveAPI(p.Language, p.OrgLanguage, accept)
	}
	setLocalizer(c, i18n.New(lang, zone(p.TimeZone, p.OrgTimeZone)))
	c.SetRequest(c.Request().WithContext(components.WithRole(c.Request().Context(), p.Role)))
}

func setLocalizer(c echo.Context, l *i18n.Localizer) {
	c.SetRequest(c.Request().WithContext(i18n.With(c.Request().Context(), l)))
}

// localizer returns the request's localizer.
func localizer(c echo.Context) *i18n.Localizer { return i18n.From(c.Request().Context()) }

// zone returns the first time zone of names that loads, else UTC.
func zone(names ...string) *time.Location {
	for _, n := range names {
		if n == "" {
			continue
		}
		if z, err := time.LoadLocation(n); err == nil {
			return z
		}
	}
	return time.UTC
}

// setLanguage is the header's language switch: it saves a signed-in user's choice, keeps it
// in a cookie for the login page, and goes back to the page it came from.
func (s *Server) setLanguage(c echo.Context) error {
	lang := c.FormValue("lang")
	if !i18n.Supported(lang) {
		return echo.NewHTTPError(http.StatusUnprocessableEntity, localizer(c).T("language.unsupported"))
	}
	p, err := s.sessionPrincipal(c)
	if err != nil {
		return err
	}
	if p != nil {
		if err := s.Auth.SetUserLocale(c.Request().Context(), p.UserID, lang, p.TimeZone, i18n.Supported); err != nil {
			return err
		}
	}
	c.SetCookie(&http.Cookie{Name: langCookie, Value: lang, Path: "/", MaxAge: 365 * 24 * 3600, HttpOnly: true,
		SameSite: http.SameSiteLaxMode, Secure: c.Scheme() == "https"})
	return redirect(c, safeNext(c.FormValue("next"), "/"))
}

// translated translates a form's message and field messages: message ids, and a service's
// English text where a format translates it (i18n.Localizer.Text).
func translated(l *i18n.Localizer, msg string, fields map[string]string) (string, map[string]string) {
	out := make(map[string]string, len(fields))
	for k, v := range fields {
		out[k] = l.Text(v)
	}
	return l.Text(msg), out
}
