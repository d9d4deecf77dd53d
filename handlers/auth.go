package handlers

import (
	"errors"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"lifeline/models"
	"lifeline/services/audit"
	"lifeline/services/auth"
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
	if models.ErrorCode(err) == models.EUNAUTHORIZED {
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
			return models.Errorf(models.EUNAUTHORIZED, "Please log in.")
		}
		c.Set(principalKey, p)
		return next(c)
	}
}

// requireAPI accepts a bearer API token or a session.
func (s *Server) requireAPI(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if h := c.Request().Header.Get("Authorization"); h != "" {
			tok, ok := strings.CutPrefix(h, "Bearer ")
			if !ok {
				return models.Errorf(models.EUNAUTHORIZED, "Use Authorization: Bearer <token>.")
			}
			p, err := s.Auth.TokenPrincipal(c.Request().Context(), strings.TrimSpace(tok))
			if err != nil {
				return err
			}
			c.Set(principalKey, p)
			return next(c)
		}
		p, err := s.sessionPrincipal(c)
		if err != nil {
			return err
		}
		if p == nil {
			return models.Errorf(models.EUNAUTHORIZED, "Authentication required: send Authorization: Bearer <API token>.")
		}
		c.Set(principalKey, p)
		return next(c)
	}
}

// requireRole lets through principals whose role is at least min.
func requireRole(min string) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			if !principal(c).Can(min) {
				return models.Errorf(models.EFORBIDDEN, "Your role (%s) cannot do this; it needs %s or above.", principal(c).Role, min)
			}
			return next(c)
		}
	}
}

func (s *Server) loginPage(c echo.Context) error {
	if p, _ := s.sessionPrincipal(c); p != nil {
		return c.Redirect(http.StatusSeeOther, safeNext(c.QueryParam("next"), s.url("workflows")))
	}
	return render(c, http.StatusOK, pages.Login(s.page(c, "Log in", ""), pages.LoginVM{Action: s.url("login"), Next: c.QueryParam("next")}))
}

func (s *Server) login(c echo.Context) error {
	ctx := c.Request().Context()
	email, password, next := c.FormValue("email"), c.FormValue("password"), c.FormValue("next")
	p, err := s.Auth.Login(ctx, email, password)
	if err != nil {
		var me *models.Error
		if errors.As(err, &me) && me.Code == models.EUNAUTHORIZED {
			return render(c, http.StatusUnauthorized, pages.Login(s.page(c, "Log in", ""),
				pages.LoginVM{Action: s.url("login"), Email: email, Next: next, Error: me.Message}))
		}
		return err
	}
	if err := s.sessions.RenewToken(ctx); err != nil {
		return err
	}
	s.sessions.Put(ctx, "user_id", p.UserID)
	s.sessions.Put(ctx, "org_id", p.OrganizationID)
	return c.Redirect(http.StatusSeeOther, safeNext(next, s.url("workflows")))
}

func (s *Server) logout(c echo.Context) error {
	if err := s.sessions.Destroy(c.Request().Context()); err != nil {
		return err
	}
	return redirect(c, s.url("login"))
}

// safeNext allows only local paths as a post-login destination.
func safeNext(next, fallback string) string {
	if strings.HasPrefix(next, "/") && !strings.HasPrefix(next, "//") && !strings.HasPrefix(next, "/\\") {
		return next
	}
	return fallback
}
