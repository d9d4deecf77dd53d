package handlers

import (
	"context"
	"net/http"

	"github.com/labstack/echo/v4"

	"lifeline/models"
	"lifeline/services/audit"
	"lifeline/services/engine"
	"lifeline/views/pages"
)

// quarantineService is what the health page needs: the rows the reconciler left out, and
// releasing one.
type quarantineService interface {
	Quarantined(ctx context.Context, orgID string, limit int) ([]models.QuarantinedRow, error)
	ReleaseQuarantined(ctx context.Context, orgID, id string, actor audit.Actor) error
	DatabaseDown() bool
}

var _ quarantineService = (*engine.Engine)(nil)

// maxQuarantined is how many quarantined rows the page and the API list.
const maxQuarantined = 200

// HealthHandler serves the admins' health page and its API: whether the database answers,
// and the rows the reconciler quarantined, with a Release action.
type HealthHandler struct {
	*chrome
	svc quarantineService
}

// newHealthHandler returns the handler.
func newHealthHandler(ch *chrome, svc quarantineService) *HealthHandler {
	return &HealthHandler{chrome: ch, svc: svc}
}

// Show renders the page.
func (h *HealthHandler) Show(c echo.Context) error {
	p, l := principal(c), localizer(c)
	rows, err := h.svc.Quarantined(c.Request().Context(), p.OrganizationID, maxQuarantined)
	if err != nil {
		return err
	}
	vm := pages.HealthVM{DatabaseUp: !h.svc.DatabaseDown(), CSRF: csrfToken(c)}
	for _, q := range rows {
		r := pages.QuarantineRow{ID: q.ID, What: l.TOr("health.table."+q.Table, q.Table), Reason: l.Text(q.Reason),
			At: displayTime(l, q.CreatedAt), AtISO: rfc(q.CreatedAt), ReleaseURL: h.url("health.release", q.ID)}
		if q.ExecutionID != nil {
			r.ExecutionID, r.ExecutionURL = shortID(*q.ExecutionID), h.url("execution", *q.ExecutionID)
		}
		vm.Rows = append(vm.Rows, r)
	}
	return render(c, http.StatusOK, pages.Health(h.page(c, "nav.health", "health"), vm))
}

// Release takes a quarantined row out of quarantine (404 for another organization's) and
// shows the page again.
func (h *HealthHandler) Release(c echo.Context) error {
	if err := h.release(c); err != nil {
		return err
	}
	return redirect(c, h.url("health"))
}

func (h *HealthHandler) release(c echo.Context) error {
	p := principal(c)
	id := c.Param("id")
	if err := checkID(id, "quarantined row"); err != nil {
		return err
	}
	return h.svc.ReleaseQuarantined(c.Request().Context(), p.OrganizationID, id, actorOf(p))
}

type apiQuarantined struct {
	ID          string  `json:"id"`
	Table       string  `json:"table"`
	RowID       string  `json:"rowId"`
	ExecutionID *string `json:"executionId"`
	Reason      string  `json:"reason"`
	CreatedAt   string  `json:"createdAt"`
}

// APIList answers {"databaseUp": bool, "quarantined": [...]}.
func (h *HealthHandler) APIList(c echo.Context) error {
	p := principal(c)
	rows, err := h.svc.Quarantined(c.Request().Context(), p.OrganizationID, maxQuarantined)
	if err != nil {
		return err
	}
	out := make([]apiQuarantined, 0, len(rows))
	for _, q := range rows {
		out = append(out, apiQuarantined{ID: q.ID, Table: q.Table, RowID: q.RowID, ExecutionID: q.ExecutionID, Reason: q.Reason, CreatedAt: rfc(q.CreatedAt)})
	}
	return c.JSON(http.StatusOK, map[string]any{"databaseUp": !h.svc.DatabaseDown(), "quarantined": out})
}

// APIRelease answers 204 once the row is released.
func (h *HealthHandler) APIRelease(c echo.Context) error {
	if err := h.release(c); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}
