package handlers

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"lifeline/models"
	"lifeline/models/apperr"
	"lifeline/services/audit"
	"lifeline/services/classify"
	"lifeline/services/periods"
	"lifeline/views/i18n"
	"lifeline/views/pages"
)

// periodService is what the closed periods' page and API need.
type periodService interface {
	List(ctx context.Context, orgID string) ([]periods.Closed, error)
	Close(ctx context.Context, orgID string, actor audit.Actor, in periods.Input) (*periods.Closed, error)
	Reopen(ctx context.Context, orgID, id string, actor audit.Actor) (*periods.Closed, error)
}

var _ periodService = (*periods.Service)(nil)

// PeriodsHandler serves the periods the office has closed (issue 23): the admins' page
// /settings/periods (the list, a form that closes a period for one client or every client,
// Reopen after a confirmation) and the API (every member reads, admins write: the routes
// check the roles). Another organization's id is a 404; field messages are 422; closing a
// period already closed is a 409 saying by whom and when.
type PeriodsHandler struct {
	*chrome
	periods periodService
	// Now is the clock of relative times ("3 minutes ago").
	Now func() time.Time
}

// newPeriodsHandler returns the handler.
func newPeriodsHandler(ch *chrome, p periodService) *PeriodsHandler {
	return &PeriodsHandler{chrome: ch, periods: p, Now: time.Now}
}

// List renders the page; ?done=closed|reopened&period=&id= confirms a change (and marks the
// closed row).
func (h *PeriodsHandler) List(c echo.Context) error {
	vm := pages.PeriodsVM{}
	switch done := c.QueryParam("done"); done {
	case "closed", "reopened":
		vm.Done, vm.DonePeriod, vm.DoneID = done, c.QueryParam("period"), c.QueryParam("id")
	}
	return h.render(c, http.StatusOK, vm)
}

// Close closes a period from the form: 422 with the form's messages, 409 with the conflict
// over the form, or back to the list.
func (h *PeriodsHandler) Close(c echo.Context) error {
	p := principal(c)
	in := periods.Input{Period: c.FormValue("period"), Client: c.FormValue("client"), Note: c.FormValue("note")}
	closed, err := h.periods.Close(c.Request().Context(), p.OrganizationID, actorOf(p), in)
	form := pages.PeriodForm{Period: strings.TrimSpace(in.Period), Client: strings.TrimSpace(in.Client), Note: strings.TrimSpace(in.Note)}
	if me := invalid(err); me != nil {
		form.Errors, form.FormError = me.Fields, me.Message
		return h.render(c, http.StatusUnprocessableEntity, pages.PeriodsVM{Form: form})
	}
	if ce := (*apperr.Error)(nil); errors.As(err, &ce) && ce.Code == apperr.ECONFLICT {
		form.FormError = ce.Message
		return h.render(c, http.StatusConflict, pages.PeriodsVM{Form: form})
	}
	if err != nil {
		return err
	}
	return redirect(c, h.url("periods")+"?done=closed&period="+urlQueryEscape(closed.Period)+"&id="+closed.ID+"#period-"+closed.ID)
}

// Reopen reopens a period (after the row's confirmation) and goes back to the list.
func (h *PeriodsHandler) Reopen(c echo.Context) error {
	gone, err := h.reopen(c)
	if err != nil {
		return err
	}
	return redirect(c, h.url("periods")+"?done=reopened&period="+urlQueryEscape(gone.Period))
}

func (h *PeriodsHandler) reopen(c echo.Context) (*periods.Closed, error) {
	id := c.Param("id")
	if err := checkID(id, "closed period"); err != nil {
		return nil, err
	}
	p := principal(c)
	return h.periods.Reopen(c.Request().Context(), p.OrganizationID, id, actorOf(p))
}

func (h *PeriodsHandler) render(c echo.Context, status int, vm pages.PeriodsVM) error {
	p, l := principal(c), localizer(c)
	ps, err := h.periods.List(c.Request().Context(), p.OrganizationID)
	if err != nil {
		return err
	}
	now := h.Now()
	for _, cp := range ps {
		vm.Rows = append(vm.Rows, h.row(l, cp, now, vm.Done == "closed" && vm.DoneID == cp.ID))
	}
	vm.CSRF = csrfToken(c)
	vm.Form.Action = h.url("periods.close")
	vm.Form.FormError, vm.Form.Errors = translated(l, vm.Form.FormError, vm.Form.Errors)
	if len(vm.Form.Errors) > 0 && vm.Form.FormError == "" {
		vm.Form.FormError = l.T("form.check")
	}
	return render(c, status, pages.Periods(h.page(c, "periods.title", "periods"), vm))
}

// row is a closed period for the page.
func (h *PeriodsHandler) row(l *i18n.Localizer, cp periods.Closed, now time.Time, fresh bool) pages.PeriodRow {
	r := pages.PeriodRow{ID: cp.ID, Period: cp.Period, Client: cp.Client, AllClients: cp.Client == "", Note: cp.Note,
		ClosedBy: cp.ClosedBy, ClosedAt: rfc(cp.ClosedAt), ClosedAtText: displayTime(l, cp.ClosedAt),
		ClosedAtRelative: l.Relative(cp.ClosedAt, now), ReopenURL: h.url("period.reopen", cp.ID), Fresh: fresh}
	if r.ClosedBy == "" {
		r.ClosedBy = l.T("periods.by.system")
	}
	return r
}

// apiClosedPeriod is a closed period in the API: client null for every client.
type apiClosedPeriod struct {
	ID       string      `json:"id"`
	Period   string      `json:"period"`
	Client   *string     `json:"client"`
	Note     string      `json:"note"`
	ClosedBy apiClosedBy `json:"closedBy"`
	ClosedAt string      `json:"closedAt"`
}

type apiClosedBy struct {
	Type string  `json:"type"`
	ID   *string `json:"id"`
	Name string  `json:"name"`
}

func apiClosedPeriodOf(cp *periods.Closed) apiClosedPeriod {
	out := apiClosedPeriod{ID: cp.ID, Period: cp.Period, Note: cp.Note, ClosedAt: rfc(cp.ClosedAt),
		ClosedBy: apiClosedBy{Type: cp.ClosedByType, Name: cp.ClosedBy}}
	if cp.Client != "" {
		client := cp.Client
		out.Client = &client
	}
	if cp.ClosedByID != "" {
		id := cp.ClosedByID
		out.ClosedBy.ID = &id
	}
	return out
}

// APIList: GET /api/v1/periods/closed → {"items": [...]}, the most recently closed first.
func (h *PeriodsHandler) APIList(c echo.Context) error {
	ps, err := h.periods.List(c.Request().Context(), principal(c).OrganizationID)
	if err != nil {
		return err
	}
	items := make([]apiClosedPeriod, 0, len(ps))
	for i := range ps {
		items = append(items, apiClosedPeriodOf(&ps[i]))
	}
	return c.JSON(http.StatusOK, map[string]any{"items": items})
}

// APIClose: POST /api/v1/periods/closed {"period", "client" (null: every client), "note"}
// → 201 with the closed period; 422 with field messages; 409 when it is already closed.
func (h *PeriodsHandler) APIClose(c echo.Context) error {
	var req struct {
		Period string  `json:"period"`
		Client *string `json:"client"`
		Note   string  `json:"note"`
	}
	if err := decodeBody(c, &req); err != nil {
		return err
	}
	in := periods.Input{Period: req.Period, Note: req.Note}
	if req.Client != nil {
		in.Client = *req.Client
	}
	p := principal(c)
	cp, err := h.periods.Close(c.Request().Context(), p.OrganizationID, actorOf(p), in)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, apiClosedPeriodOf(cp))
}

// APIReopen: DELETE /api/v1/periods/closed/{id} → 204; another organization's id is 404.
func (h *PeriodsHandler) APIReopen(c echo.Context) error {
	if _, err := h.reopen(c); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

// closedPeriods is what the DLQ item page needs of the closed periods.
type closedPeriods interface {
	ClosedFor(ctx context.Context, orgID, client, period string) (*periods.Closed, error)
}

var _ closedPeriods = (*periods.Service)(nil)

// periodPanel fills the actions panel's closed-period notice (issue 23): for an item that
// failed as period_closed, or whose period is closed now, which period, for whom, who closed
// it and when, and what an office does instead: edit the input to an open period, ask an
// admin to reopen it (admins: a link to the closed periods), or close the item with a note.
//
// code is the failure's error code: an item refused for a closed period that has been
// reopened since is no longer a data error (a retry posts now), and the page says so.
func (h *DLQActionsHandler) periodPanel(c echo.Context, rec *pages.RecoveryVM, dl *models.DeadLetter, code string) {
	if h.periods == nil || dl.Period == nil {
		return
	}
	p, l := principal(c), localizer(c)
	cp, err := h.periods.ClosedFor(c.Request().Context(), p.OrganizationID, deref(dl.Client), *dl.Period)
	if err != nil {
		h.log.Warn("item page: closed periods", "err", err) // the replay checks again
		return
	}
	if cp == nil {
		if code == classify.CodePeriodClosed {
			rec.FixData, rec.DataRefused, rec.PeriodReopened = false, false, *dl.Period
		}
		return
	}
	v := &pages.PeriodClosedVM{Period: cp.Period, Client: cp.Client, ClosedBy: cp.ClosedBy, Note: cp.Note,
		ClosedAt: rfc(cp.ClosedAt), ClosedAtText: displayTime(l, cp.ClosedAt)}
	if v.ClosedBy == "" {
		v.ClosedBy = l.T("periods.by.system")
	}
	if p.Can(models.RoleAdmin) && p.UserID != "" {
		v.ReopenURL = h.url("periods") + "#period-" + cp.ID
	}
	rec.PeriodClosed = v
	rec.FixData = true // editing the input to an open period comes first
	rec.DataRefused = true
}
