// Package handlers is Lifeline's HTTP layer: pages (templ + htmx), the JSON API under
// /api/v1, inbound webhooks under /hooks, and health checks. Handlers parse, call a
// service, build a view model and render; one error handler turns errors into responses.
package handlers

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strings"

	"github.com/alexedwards/scs/v2"
	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"

	"lifeline/models"
	"lifeline/services/analytics"
	"lifeline/services/audit"
	"lifeline/services/auth"
	"lifeline/services/bulk"
	"lifeline/services/clients"
	"lifeline/services/credentials"
	"lifeline/services/dbconn"
	"lifeline/services/deadlines"
	"lifeline/services/engine"
	"lifeline/services/escalation"
	"lifeline/services/executions"
	"lifeline/services/fixrules"
	"lifeline/services/groups"
	"lifeline/services/notify"
	"lifeline/services/periods"
	"lifeline/services/poison"
	"lifeline/services/redact"
	"lifeline/services/workflows"
)

// Deps are what the handlers need. New wires DB into the read services (sessions,
// executions, the audit log); no handler gets it.
type Deps struct {
	DB     *models.DB
	Engine *engine.Engine
	// Workflows saves and reads the workflows (required: the workflow pages, the API and
	// inbound webhooks read through it).
	Workflows *workflows.Service
	Auth      *auth.Service
	Log       *slog.Logger
	// BaseURL is the public URL (for webhook URLs and the Secure cookie flag).
	BaseURL string
	// Sandbox, when set, is served under /sandbox/ (the demo's fake external services).
	Sandbox http.Handler
	// Ready reports whether the app can serve (database reachable, queue running).
	Ready func(ctx context.Context) error
	// LoginThrottle limits login attempts (when nil: 10 a minute per client network, 5
	// failures a quarter-hour per account and client network, 50 failures an hour per
	// account from all networks).
	LoginThrottle *auth.Throttle
	// Bulk runs bulk actions on dead letters (nil: the bulk routes answer 404).
	Bulk *bulk.Service
	// Databases are the organization's named database connections (nil: one without an
	// allow list for private networks).
	Databases *dbconn.Service
	// Notify is the notification service (nil: the notifications API answers 404).
	Notify *notify.Service
	// DemoInbox is what the demo's mail server and Slack and Teams stand-ins received (nil
	// outside the demo: no /demo/inbox).
	DemoInbox DemoInbox
	// TrustedProxies are the networks of the reverse proxies in front of the app: from them,
	// the client is the address X-Forwarded-For names (for the login limits and the request
	// log). Empty: proxy headers are ignored and the client is the TCP peer.
	TrustedProxies []netip.Prefix
	// Metrics, when set, measures every request and may serve /metrics (nil: neither).
	Metrics *Metrics
	// Observe are middlewares run for every request before the app's own, after panics are
	// recovered (the traces' route names; nil: none).
	Observe []echo.MiddlewareFunc
}

// Server is the app's plumbing: middleware, sessions and sign-in, CSRF, the language, the
// one error handler and the routes, which hand each resource's handler what it uses.
type Server struct {
	Deps
	*chrome
	// reads is the read side of executions, shared by the handlers that show them.
	reads    *executions.Service
	auditLog *audit.Reader
	// groups reads failure groups and acts on them (nil without an engine).
	groups *groups.Service
	// rules are the organization's rules of who may fix what, and "ask an admin".
	rules *fixrules.Service
	// escalation is the organization's escalation policy.
	escalation *escalation.Service
	// deadlines reads what is due and at risk (issue 23).
	deadlines *deadlines.Service
	// poison flags dead letters' poison input values.
	poison   *poison.Service
	e        *echo.Echo
	sessions *scs.SessionManager
	throttle *auth.Throttle

	// analytics answers the error analytics (issue 24).
	analytics *analytics.Service
}

// New builds the Echo instance with every route.
func New(d Deps) *echo.Echo {
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	// Trust no proxy headers unless configured: the client address is the TCP peer.
	e.IPExtractor = echo.ExtractIPDirect()
	if len(d.TrustedProxies) > 0 {
		// Echo trusts loopback and private networks by default: only the configured ones.
		trust := []echo.TrustOption{echo.TrustLoopback(false), echo.TrustLinkLocal(false), echo.TrustPrivateNet(false)}
		for _, p := range d.TrustedProxies {
			p = p.Masked()
			trust = append(trust, echo.TrustIPRange(&net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}))
		}
		e.IPExtractor = echo.ExtractIPFromXFFHeader(trust...)
	}
	// The engine resolves policies and compensations and masks as its snapshots do.
	var eng executions.Engine
	red := redact.New(nil)
	if d.Engine != nil {
		eng, red = d.Engine, d.Engine.Redactor()
	}
	reads := executions.New(d.DB, eng, red)
	ch := &chrome{links: links{e}, pending: reads, log: d.Log}
	if d.Notify != nil {
		ch.unread = d.Notify
	}
	if d.Engine != nil {
		ch.waiting = d.Engine.Asks()
	}
	s := &Server{Deps: d, chrome: ch, reads: reads, auditLog: audit.NewReader(d.DB), rules: &fixrules.Service{DB: d.DB},
		escalation: &escalation.Service{DB: d.DB}, deadlines: &deadlines.Service{DB: d.DB},
		poison: &poison.Service{DB: d.DB}, e: e, throttle: d.LoginThrottle}
	if s.throttle == nil {
		s.throttle = &auth.Throttle{}
	}
	s.analytics = analytics.New(d.DB)
	if d.Engine != nil {
		s.groups = &groups.Service{DB: d.DB, Engine: d.Engine.Groups()}
		if d.Bulk != nil {
			s.groups.Bulk = d.Bulk
		}
	}
	s.sessions = scs.New()
	s.sessions.Store = &auth.SessionStore{DB: d.DB}
	s.sessions.Cookie.Name = "lifeline_session"
	s.sessions.Cookie.HttpOnly = true
	s.sessions.Cookie.SameSite = http.SameSiteLaxMode
	s.sessions.Cookie.Secure = strings.HasPrefix(d.BaseURL, "https://")
	e.HTTPErrorHandler = s.handleError
	e.Use(middleware.Recover())
	e.Use(d.Observe...)
	if d.Metrics != nil && d.Metrics.Measure != nil {
		e.Use(d.Metrics.Measure) // outside requestLog, which turns errors into responses: it sees their status
	}
	e.Use(s.requestLog)
	e.Use(middleware.SecureWithConfig(middleware.SecureConfig{
		XSSProtection: "0", ContentTypeNosniff: "nosniff", XFrameOptions: "DENY", ReferrerPolicy: "same-origin",
		ContentSecurityPolicy: "default-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; frame-ancestors 'none'",
	}))
	// One body limit for every route (pages, API, webhooks): 413 beyond it.
	e.Use(middleware.BodyLimit(fmt.Sprint(MaxBody)))
	e.Use(echo.WrapMiddleware(s.sessions.LoadAndSave))
	e.Use(s.csrf)
	e.Use(s.localize)
	s.routes()
	return e
}

// connectionsOf returns the service behind the connections page and API: Deps.Databases
// (the one the engine's compensations use, with LIFELINE_DBCONN_ALLOW and Lifeline's own
// servers refused), or without it one that reaches public addresses only.
func connectionsOf(d Deps) *dbconn.Service {
	if d.Databases != nil {
		return d.Databases
	}
	return dbconn.New(d.DB, dbconn.Config{})
}

// clientsOf is the clients' read side (on the handlers' database).
func clientsOf(d Deps) *clients.Service { return clients.New(d.DB) }

// credentialsOf is the organization credentials' service (on the handlers' database).
func credentialsOf(d Deps) *credentials.Service { return credentials.New(d.DB, nil) }

// periodsOf is the closed periods' service (on the handlers' database).
func periodsOf(d Deps) *periods.Service { return periods.New(d.DB, nil) }

// csrfSkipper exempts requests that carry no ambient credentials: API calls with a bearer
// token, signed webhooks, the sandbox and health checks.
func csrfSkipper(c echo.Context) bool {
	p := c.Request().URL.Path
	switch {
	case strings.HasPrefix(p, "/hooks/"), strings.HasPrefix(p, "/sandbox/"), strings.HasPrefix(p, "/static/"), p == "/healthz", p == "/readyz":
		return true
	case strings.HasPrefix(p, "/api/"):
		return strings.HasPrefix(c.Request().Header.Get("Authorization"), "Bearer ")
	}
	return false
}

func (s *Server) requestLog(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		err := next(c)
		if err != nil {
			c.Error(err)
		}
		p := c.Request().URL.Path
		if strings.HasPrefix(p, "/static/") || strings.HasPrefix(p, "/sandbox/") || p == "/healthz" || p == "/metrics" {
			return nil
		}
		s.Log.Info("http", "method", c.Request().Method, "path", logPath(p), "status", c.Response().Status, "remote", c.RealIP())
		return nil
	}
}

// logPath is a request path as logs may show it: the token in a webhook URL is a credential.
func logPath(p string) string {
	if strings.HasPrefix(p, "/hooks/") {
		return "/hooks/[token]"
	}
	return p
}
