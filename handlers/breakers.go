package handlers

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"lifeline/models"
	"lifeline/services/breaker"
	"lifeline/services/definition"
	"lifeline/services/engine"
	"lifeline/services/executions"
	"lifeline/views/i18n"
	"lifeline/views/pages"
)

// breakerStore is what the breakers page and API read (executions.Service).
type breakerStore interface {
	ListBreakers(ctx context.Context, orgID string, f models.BreakerFilter) ([]models.BreakerRow, error)
	GetBreaker(ctx context.Context, orgID, id string) (*models.BreakerRow, error)
}

// breakerActor resets or force-opens a breaker.
type breakerActor interface {
	ActOnBreaker(ctx context.Context, r engine.BreakerAction) (*models.CircuitBreaker, error)
}

var (
	_ breakerStore = (*executions.Service)(nil)
	_ breakerActor = (*engine.Engine)(nil)
)

// BreakersHandler serves the circuit breakers: the page (GET /breakers) and the API (GET
// /api/v1/breakers), with the same query keys (state, workflowId; a value that is not valid
// is a 422 with a message per key), and an admin's reset or forced opening with a reason
// (POST …/{id}/reset, …/{id}/open): another organization's breaker is a 404, a missing
// reason a 422 on "reason".
type BreakersHandler struct {
	*chrome
	store breakerStore
	wfs   workflowLister
	eng   breakerActor
	// Now is the clock of relative times ("in 42 seconds", "3 minutes ago").
	Now func() time.Time
}

// newBreakersHandler returns the handler.
func newBreakersHandler(ch *chrome, store breakerStore, wfs workflowLister, eng breakerActor) *BreakersHandler {
	return &BreakersHandler{chrome: ch, store: store, wfs: wfs, eng: eng, Now: time.Now}
}

// breakerFilterOf reads a breakers filter from query keys; an EINVALID error names every
// key that is not valid, in l's language.
func breakerFilterOf(l *i18n.Localizer, v url.Values) (models.BreakerFilter, error) {
	q := queryOf(l, v)
	f := models.BreakerFilter{State: q.oneOf("state", models.BreakerStates), WorkflowID: q.workflowID("workflowId")}
	return f, q.err()
}

// breakerQuery is the query of a filtered list, as its form sends it.
func breakerQuery(f models.BreakerFilter) url.Values {
	q := url.Values{}
	set(q, "state", f.State)
	set(q, "workflowId", f.WorkflowID)
	return q
}

// withHosts adds to f the hosts that the filtered workflow's steps call with host-scoped
// breakers (they trip the workflow too).
func withHosts(f models.BreakerFilter, wfs []models.Workflow) models.BreakerFilter {
	for _, wf := range wfs {
		if wf.ID == f.WorkflowID {
			var def definition.Definition
			if json.Unmarshal(wf.Definition, &def) == nil {
				f.Hosts = breakerHosts(&def)
			}
		}
	}
	return f
}

// breakerHosts are the hosts of a definition's steps whose breaker is keyed by host, where
// the step's url names its host outright (not through a template).
func breakerHosts(def *definition.Definition) []string {
	var out []string
	for i := range def.Steps {
		if h := breakerHost(def, i); h != "" {
			out = append(out, h)
		}
	}
	return out
}

// breakerHost is the host of step i's breaker, or "" when it is keyed by the step (or its
// host is only known once the url's template is rendered).
func breakerHost(def *definition.Definition, i int) string {
	if def.Breaker(i).Scope != breaker.ScopeHost {
		return ""
	}
	raw, _ := def.Steps[i].Config["url"].(string)
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || strings.ContainsAny(u.Host, "{} ") {
		return ""
	}
	return strings.ToLower(u.Host)
}

// List renders the page, or for htmx the table alone.
func (h *BreakersHandler) List(c echo.Context) error {
	done := c.QueryParam("done")
	if done != "reset" && done != "open" {
		done = ""
	}
	return h.render(c, http.StatusOK, c.QueryParams(), done, nil)
}

// refusal is an action the engine refused (422): shown under the row's reason.
type refusal struct {
	id, reason, message string
}

// render answers the page (or its table, for htmx) for the filter in v.
func (h *BreakersHandler) render(c echo.Context, status int, v url.Values, done string, refused *refusal) error {
	p, l, ctx := principal(c), localizer(c), c.Request().Context()
	f, ferr := breakerFilterOf(l, v)
	wfs, err := h.wfs.All(ctx, p.OrganizationID)
	if err != nil {
		return err
	}
	vf := pages.BreakersFilter{Action: h.url("breakers"), State: f.State, WorkflowID: f.WorkflowID}
	t := pages.BreakersTable{Filtered: f.State != "" || f.WorkflowID != "", CanAct: p.Can(models.RoleAdmin)}
	if me := invalid(ferr); me != nil {
		status, t.Error, t.FieldErrors, vf.Errors = http.StatusUnprocessableEntity, me.Message, me.Fields, me.Fields
		raw := queryOf(l, v)
		vf.State, vf.WorkflowID = raw.shown("state"), raw.shown("workflowId")
	} else {
		rows, err := h.store.ListBreakers(ctx, p.OrganizationID, withHosts(f, wfs))
		if err != nil {
			return err
		}
		steps, now := stepsOf(wfs), h.Now()
		for i := range rows {
			t.Rows = append(t.Rows, h.row(l, &rows[i], steps, now))
		}
		q := breakerQuery(f)
		t.RefreshURL = h.url("breakers")
		if len(q) > 0 {
			t.RefreshURL += "?" + q.Encode()
		}
		for k, vals := range q {
			t.Back = append(t.Back, pages.HiddenField{Name: k, Value: vals[0]})
		}
	}
	if t.CanAct {
		t.CSRF = csrfToken(c)
	}
	var formError string
	if refused != nil {
		formError = refused.message
		for i := range t.Rows {
			if t.Rows[i].ID == refused.id {
				t.Rows[i].Form = pages.BreakerForm{Open: true, Reason: refused.reason, Error: refused.message}
				formError = ""
			}
		}
	}
	if isHTMX(c) {
		return render(c, status, pages.BreakersTableFragment(t))
	}
	vf.States = options(models.BreakerStates, vf.State, func(s string) string { return l.TOr("breakers.state."+s, s) })
	vf.Workflows = workflowChoices(wfs, vf.WorkflowID)
	vm := pages.BreakersVM{Filter: vf, Table: t, Done: done, FormError: formError}
	return render(c, status, pages.Breakers(h.page(c, "breakers.title", "breakers"), vm))
}

// row is one breaker for the page.
func (h *BreakersHandler) row(l *i18n.Localizer, b *models.BreakerRow, steps workflowSteps, now time.Time) pages.BreakerRow {
	r := pages.BreakerRow{ID: b.ID, State: b.State, Forced: b.Forced, Reason: deref(b.Reason), Scope: breaker.ScopeStep,
		Failures: b.InWindow, Threshold: b.FailureThreshold, Waiting: b.Waiting,
		FailuresTitle: l.N("breakers.failures", b.InWindow, "Threshold", b.FailureThreshold),
		WaitingTitle:  l.N("breakers.waiting", b.Waiting)}
	switch {
	case b.Host != nil:
		r.Scope, r.Host = breaker.ScopeHost, *b.Host
	case b.WorkflowID != nil:
		r.Workflow, r.WorkflowURL = b.WorkflowName, h.url("workflow", *b.WorkflowID)
		r.StepID = deref(b.StepID)
		r.Step = steps.name(*b.WorkflowID, r.StepID)
	}
	if b.LastFailureAt != nil {
		r.LastFailureAt, r.LastFailure, r.LastFailureTitle = rfc(*b.LastFailureAt), l.Relative(*b.LastFailureAt, now), displayTime(l, *b.LastFailureAt)
	}
	if b.State != breaker.Closed {
		r.OpenedAt, r.OpenedAtText = displayTimePtr(l, b.OpenedAt)
	}
	switch at := halfOpenAt(&b.CircuitBreaker); {
	case b.State == breaker.Open && b.Forced:
		r.HalfOpen = l.T("breakers.halfopen.forced")
	case at == nil:
	case b.State == breaker.Open && !at.After(now):
		r.HalfOpenAt, r.HalfOpen, r.HalfOpenTitle = rfc(*at), l.T("breakers.halfopen.due"), displayTime(l, *at)
	default:
		r.HalfOpenAt, r.HalfOpen, r.HalfOpenTitle = rfc(*at), until(l, *at, now), displayTime(l, *at)
	}
	// Both actions in every state (a reset of a closed breaker clears its failures; forcing
	// a forced one again records the new reason): the row's actions are kept across the
	// list's refreshes, and must not depend on a state that has changed since.
	r.ResetURL, r.OpenURL = h.url("breakers.reset", b.ID), h.url("breakers.open", b.ID)
	return r
}

// halfOpenAt is when a breaker lets trial calls through: while open (and not forced), when
// its reset timeout ends; while half-open, when it half-opened; otherwise nil.
func halfOpenAt(b *models.CircuitBreaker) *time.Time {
	switch {
	case b.State == breaker.Open && !b.Forced && b.OpenedAt != nil:
		t := b.OpenedAt.Add(time.Duration(b.ResetTimeoutMs) * time.Millisecond)
		return &t
	case b.State == breaker.HalfOpen:
		return b.HalfOpenedAt
	}
	return nil
}

// until says how far a time is from now, for times that may be a few seconds away: "in
// 3 minutes", "in under a minute", "any moment now".
func until(l *i18n.Localizer, t, now time.Time) string {
	switch d := t.Sub(now); {
	case d <= 0:
		return l.T("breakers.due")
	case d < 45*time.Second:
		return l.T("breakers.soon")
	}
	return l.Relative(t, now)
}

// Reset closes a breaker from the page's form (admins).
func (h *BreakersHandler) Reset(c echo.Context) error { return h.submit(c, false) }

// Open forces a breaker open from the page's form (admins).
func (h *BreakersHandler) Open(c echo.Context) error { return h.submit(c, true) }

// submit acts on a breaker and goes back to the list (with its filter) and a confirmation;
// a refusal (no reason) renders the list again, 422, with the message under the reason.
func (h *BreakersHandler) submit(c echo.Context, open bool) error {
	reason := c.FormValue("reason")
	back := url.Values{}
	for _, k := range []string{"state", "workflowId"} {
		set(back, k, c.FormValue(k))
	}
	if f, err := breakerFilterOf(localizer(c), back); err == nil {
		back = breakerQuery(f)
	} else {
		back = url.Values{}
	}
	_, err := h.act(c, c.Param("id"), open, reason)
	if me := invalid(err); me != nil {
		// The engine's message says what to do ("Give a reason…"); its field message says
		// more only when the reason is there but too long.
		msg, fields := translated(localizer(c), me.Message, me.Fields)
		if m := fields["reason"]; m != "" && me.Fields["reason"] != "is required" {
			msg = m
		}
		return h.render(c, http.StatusUnprocessableEntity, back, "", &refusal{id: c.Param("id"), reason: reason, message: msg})
	}
	if err != nil {
		return err
	}
	back.Set("done", map[bool]string{false: "reset", true: "open"}[open])
	return redirect(c, h.url("breakers")+"?"+back.Encode())
}

// act resets or force-opens the organization's breaker id: ENOTFOUND for any other id
// (whatever the reason), then the engine's answer.
func (h *BreakersHandler) act(c echo.Context, id string, open bool, reason string) (*models.BreakerRow, error) {
	if err := checkID(id, "circuit breaker"); err != nil {
		return nil, err
	}
	p, ctx := principal(c), c.Request().Context()
	if _, err := h.store.GetBreaker(ctx, p.OrganizationID, id); err != nil {
		return nil, err
	}
	if _, err := h.eng.ActOnBreaker(ctx, engine.BreakerAction{OrganizationID: p.OrganizationID, BreakerID: id, Open: open,
		Reason: reason, Actor: actorOf(p)}); err != nil {
		return nil, err
	}
	return h.store.GetBreaker(ctx, p.OrganizationID, id)
}

// apiBreaker is a breaker in the API.
type apiBreaker struct {
	ID         string  `json:"id"`
	WorkflowID *string `json:"workflowId"`
	StepID     *string `json:"stepId"`
	Host       *string `json:"host"`
	Scope      string  `json:"scope"`
	State      string  `json:"state"`
	// FailureCount counts the failures in the last minute (the window).
	FailureCount     int     `json:"failureCount"`
	FailureThreshold int     `json:"failureThreshold"`
	LastFailureAt    *string `json:"lastFailureAt"`
	OpenedAt         *string `json:"openedAt"`
	HalfOpenAt       *string `json:"halfOpenAt"`
	Forced           bool    `json:"forced"`
	Reason           *string `json:"reason"`
	Waiting          int     `json:"waiting"`
}

func apiBreakerOf(b *models.BreakerRow) apiBreaker {
	out := apiBreaker{ID: b.ID, WorkflowID: b.WorkflowID, StepID: b.StepID, Host: b.Host, Scope: breaker.ScopeStep, State: b.State,
		FailureCount: b.InWindow, FailureThreshold: b.FailureThreshold, LastFailureAt: rfcPtr(b.LastFailureAt),
		HalfOpenAt: rfcPtr(halfOpenAt(&b.CircuitBreaker)), Forced: b.Forced, Reason: b.Reason, Waiting: b.Waiting}
	if b.Host != nil {
		out.Scope = breaker.ScopeHost
	}
	if b.State != breaker.Closed {
		out.OpenedAt = rfcPtr(b.OpenedAt)
	}
	return out
}

// API answers the organization's breakers as JSON: {"items": […]}.
func (h *BreakersHandler) API(c echo.Context) error {
	p, ctx := principal(c), c.Request().Context()
	f, err := breakerFilterOf(localizer(c), c.QueryParams())
	if err != nil {
		return err
	}
	if f.WorkflowID != "" {
		wfs, err := h.wfs.All(ctx, p.OrganizationID)
		if err != nil {
			return err
		}
		f = withHosts(f, wfs)
	}
	rows, err := h.store.ListBreakers(ctx, p.OrganizationID, f)
	if err != nil {
		return err
	}
	items := make([]apiBreaker, 0, len(rows))
	for i := range rows {
		items = append(items, apiBreakerOf(&rows[i]))
	}
	return c.JSON(http.StatusOK, map[string]any{"items": items})
}

// APIReset: POST /api/v1/breakers/{id}/reset with {"reason"} → 200 with the breaker.
func (h *BreakersHandler) APIReset(c echo.Context) error { return h.apiAct(c, false) }

// APIOpen: POST /api/v1/breakers/{id}/open with {"reason"} → 200 with the breaker.
func (h *BreakersHandler) APIOpen(c echo.Context) error { return h.apiAct(c, true) }

func (h *BreakersHandler) apiAct(c echo.Context, open bool) error {
	var req struct {
		Reason string `json:"reason"`
	}
	if err := decodeBody(c, &req); err != nil {
		return err
	}
	b, err := h.act(c, c.Param("id"), open, req.Reason)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, apiBreakerOf(b))
}
