package handlers

import (
	"errors"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"unicode"

	"github.com/labstack/echo/v4"

	"lifeline/models"
	"lifeline/models/apperr"
	"lifeline/services/audit"
	"lifeline/services/auth"
	"lifeline/views/i18n"
	"lifeline/views/layouts"
	"lifeline/views/pages"
)

const principalKey = "principal"

func principal(c echo.Context) *auth.Principal {
	p, _ := c.Get(principalKey).(*auth.Principal)
	return p
}

func actorOf(p *auth.Principal) audit.Actor {
	if p.TokenID != "" {
		return audit.Actor{Type: audit.ActorToken, ID: p.TokenID}
	}
	return audit.Actor{Type: audit.ActorUser, ID: p.UserID}
}

// sessionPrincipal loads the logged-in user's principal, or nil.
func (s *Server) sessionPrincipal(c echo.Context) (*auth.Principal, error) {
	ctx := c.Request().Context()
	uid := s.sessions.GetString(ctx, "user_id")
	if uid == "" {
		return nil, nil
	}
	p, err := s.Auth.UserPrincipal(ctx, uid, s.sessions.GetString(ctx, "org_id"))
	if apperr.ErrorCode(err) == apperr.EUNAUTHORIZED {
		return nil, nil
	}
	return p, err
}

// requireUser lets logged-in users through; others go to the login page.
func (s *Server) requireUser(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		p, err := s.sessionPrincipal(c)
		if err != nil {
			return err
		}
		if p == nil {
			return apperr.Errorf(apperr.EUNAUTHORIZED, "auth.login")
		}
		c.Set(principalKey, p)
		localizeFor(c, p, false)
		noStore(c)
		return next(c)
	}
}

// requireAPI accepts a bearer API token or a session.
func (s *Server) requireAPI(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if h := c.Request().Header.Get("Authorization"); h != "" {
			tok, ok := strings.CutPrefix(h, "Bearer ")
			if !ok {
				return apperr.Errorf(apperr.EUNAUTHORIZED, "auth.bearer")
			}
			p, err := s.Auth.TokenPrincipal(c.Request().Context(), strings.TrimSpace(tok))
			if err != nil {
				return err
			}
			c.Set(principalKey, p)
			localizeFor(c, p, true)
			noStore(c)
			return next(c)
		}
		p, err := s.sessionPrincipal(c)
		if err != nil {
			return err
		}
		if p == nil {
			return apperr.Errorf(apperr.EUNAUTHORIZED, "auth.required")
		}
		c.Set(principalKey, p)
		localizeFor(c, p, true)
		noStore(c)
		return next(c)
	}
}

// requireRole lets through principals whose role is at least min.
func requireRole(min string) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			if !principal(c).Can(min) {
				return apperr.Errorf(apperr.EFORBIDDEN, "Your role (%s) cannot do this; it needs %s or above.", principal(c).Role, min)
			}
			return next(c)
		}
	}
}

func (s *Server) loginPage(c echo.Context) error {
	if p, _ := s.sessionPrincipal(c); p != nil {
		return c.Redirect(http.StatusSeeOther, safeNext(c.QueryParam("next"), s.landing(p)))
	}
	return render(c, http.StatusOK, pages.Login(s.loginLayout(c), pages.LoginVM{Action: s.url("login"), Next: c.QueryParam("next")}))
}

// loginLayout is the login page's layout, with the session's CSRF token for its form.
func (s *Server) loginLayout(c echo.Context) layouts.Page {
	p := s.page(c, "login.title", "")
	p.CSRFToken = csrfToken(c)
	return p
}

// login checks the credentials within the login limits (auth.Throttle: 10 attempts a minute
// per client network; 5 failures a quarter-hour per account and client network; 50 failures
// an hour per account from all networks), beyond which it answers 429 with Retry-After.
func (s *Server) login(c echo.Context) error {
	ctx := c.Request().Context()
	email, password, next := c.FormValue("email"), c.FormValue("password"), c.FormValue("next")
	loginPage := func(status int, msg string) error {
		return render(c, status, pages.Login(s.loginLayout(c),
			pages.LoginVM{Action: s.url("login"), Email: email, Next: next, Error: msg}))
	}
	client := c.RealIP()
	if ok, wait := s.throttle.Allow(client, email); !ok {
		secs := int(math.Ceil(wait.Seconds()))
		c.Response().Header().Set("Retry-After", strconv.Itoa(secs))
		return loginPage(http.StatusTooManyRequests, localizer(c).T("login.throttled", "Wait", waitText(localizer(c), secs)))
	}
	p, err := s.Auth.Login(ctx, email, password)
	if err != nil {
		var me *apperr.Error
		if errors.As(err, &me) && me.Code == apperr.EUNAUTHORIZED {
			s.throttle.Failed(client, email)
			return loginPage(http.StatusUnauthorized, localizer(c).TOr(me.Message, me.Message))
		}
		return err
	}
	s.throttle.Succeeded(client, email)
	// A language chosen with the switch before logging in becomes the user's own, unless
	// they have one already.
	if ck, err := c.Cookie(langCookie); err == nil && i18n.Supported(ck.Value) && p.Language == "" {
		if err := s.Auth.SetUserLocale(ctx, p.UserID, ck.Value, p.TimeZone, i18n.Supported); err != nil {
			return err
		}
	}
	if err := s.sessions.RenewToken(ctx); err != nil {
		return err
	}
	s.sessions.Put(ctx, "user_id", p.UserID)
	s.sessions.Put(ctx, "org_id", p.OrganizationID)
	s.renewCSRF(c)
	return c.Redirect(http.StatusSeeOther, safeNext(next, s.landing(p)))
}

// landing is where p lands after logging in: an accountant on Today, the others on the
// workflows.
func (s *Server) landing(p *auth.Principal) string {
	if p != nil && p.Role == models.RoleAccountant {
		return s.url("today")
	}
	return s.url("workflows")
}

func waitText(l *i18n.Localizer, secs int) string {
	if secs >= 90 {
		return l.N("time.minutes", (secs+59)/60)
	}
	return l.N("time.seconds", secs)
}

// noStore keeps authenticated responses out of browser and proxy caches.
func noStore(c echo.Context) {
	c.Response().Header().Set("Cache-Control", "no-store")
}

func (s *Server) logout(c echo.Context) error {
	if err := s.sessions.Destroy(c.Request().Context()); err != nil {
		return err
	}
	return redirect(c, s.url("login"))
}

// safeNext allows only a local path as a post-login destination: a relative reference
// with no scheme and no host, starting with one "/", without control characters or
// backslashes (raw or percent-encoded: browsers treat "\" as "/" and drop tabs and newlines,
// which turns "/%09/evil.example" into "//evil.example").
func safeNext(next, fallback string) string {
	if next == "" || len(next) > 2000 || !strings.HasPrefix(next, "/") || strings.HasPrefix(next, "//") {
		return fallback
	}
	decoded, err := url.PathUnescape(next)
	if err != nil {
		return fallback
	}
	for _, v := range []string{next, decoded} {
		for _, r := range v {
			if r < 0x20 || r == 0x7f || r == '\\' || unicode.IsSpace(r) || unicode.Is(unicode.Cf, r) {
				return fallback
			}
		}
		if strings.HasPrefix(v, "//") {
			return fallback
		}
	}
	u, err := url.Parse(next)
	if err != nil || u.Scheme != "" || u.Host != "" || u.User != nil || u.Opaque != "" {
		return fallback
	}
	return next
}
