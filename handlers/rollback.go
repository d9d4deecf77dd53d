package handlers

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/labstack/echo/v4"

	"lifeline/models"
	"lifeline/services/definition"
	"lifeline/services/engine"
	"lifeline/services/executions"
	"lifeline/services/redact"
	"lifeline/views/pages"
)

// rollbacks is what the rollback handlers need from the engine.
type rollbacks interface {
	StartRollback(ctx context.Context, r engine.RollbackRequest) (*models.Execution, error)
	ActOnCompensation(ctx context.Context, r engine.CompensationAction) error
}

// rollbackReads finds the dead letter whose execution a rollback is asked for.
type rollbackReads interface {
	GetDLQ(ctx context.Context, orgID, id string) (*models.DLQRow, error)
}

// executionDetails reads an execution with its rollback (executions.Service).
type executionDetails interface {
	Detail(ctx context.Context, orgID, id string) (*executions.Detail, error)
}

var (
	_ rollbacks        = (*engine.Engine)(nil)
	_ rollbackReads    = (*executions.Service)(nil)
	_ executionDetails = (*executions.Service)(nil)
)

// RollbackHandler starts rollbacks of failed executions and acts on their compensations
// (admins): retry or skip a failed one, confirm a manual one.
type RollbackHandler struct {
	*chrome
	eng   rollbacks
	dlq   rollbackReads
	execs executionDetails
}

// newRollbackHandler returns the handler.
func newRollbackHandler(ch *chrome, eng rollbacks, dlq rollbackReads, execs executionDetails) *RollbackHandler {
	return &RollbackHandler{chrome: ch, eng: eng, dlq: dlq, execs: execs}
}

func (h *RollbackHandler) start(c echo.Context) error {
	id := c.Param("id")
	if err := checkID(id, "execution"); err != nil {
		return err
	}
	p := principal(c)
	_, err := h.eng.StartRollback(c.Request().Context(), engine.RollbackRequest{OrganizationID: p.OrganizationID, ExecutionID: id, Actor: actorOf(p)})
	return err
}

func (h *RollbackHandler) act(c echo.Context, action string) error {
	id := c.Param("id")
	if err := checkID(id, "compensation"); err != nil {
		return err
	}
	p := principal(c)
	return h.eng.ActOnCompensation(c.Request().Context(), engine.CompensationAction{OrganizationID: p.OrganizationID, CompensationID: id,
		Action: action, Actor: actorOf(p)})
}

// APIStart: POST /api/v1/executions/{id}/rollback → 202 with the execution and its compensations.
func (h *RollbackHandler) APIStart(c echo.Context) error {
	if err := h.start(c); err != nil {
		return err
	}
	d, err := h.execs.Detail(c.Request().Context(), principal(c).OrganizationID, c.Param("id"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusAccepted, apiExecutionDetail(d))
}

// APIStartDLQ: POST /api/v1/dlq/{id}/rollback, a rollback of a dead letter's execution →
// 202 with the execution and its compensations.
func (h *RollbackHandler) APIStartDLQ(c echo.Context) error {
	id := c.Param("id")
	if err := checkID(id, "dead letter"); err != nil {
		return err
	}
	p := principal(c)
	dl, err := h.dlq.GetDLQ(c.Request().Context(), p.OrganizationID, id)
	if err != nil {
		return err
	}
	if _, err := h.eng.StartRollback(c.Request().Context(), engine.RollbackRequest{OrganizationID: p.OrganizationID, ExecutionID: dl.ExecutionID, Actor: actorOf(p)}); err != nil {
		return err
	}
	d, err := h.execs.Detail(c.Request().Context(), p.OrganizationID, dl.ExecutionID)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusAccepted, apiExecutionDetail(d))
}

// APIAct: POST /api/v1/compensations/{id}/actions with {"action": "retry" | "skip" | "confirm"}.
func (h *RollbackHandler) APIAct(c echo.Context) error {
	var req struct {
		Action string `json:"action"`
	}
	if err := decodeBody(c, &req); err != nil {
		return err
	}
	if err := h.act(c, req.Action); err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]string{"id": c.Param("id"), "action": req.Action})
}

// Start: POST /executions/{id}/rollback from the execution page.
func (h *RollbackHandler) Start(c echo.Context) error {
	if err := h.start(c); err != nil {
		return err
	}
	return redirect(c, h.url("execution", c.Param("id"))+"#rollback")
}

// Act: POST /compensations/{id}/actions from the execution page's rollback panel; the form
// names the execution to go back to.
func (h *RollbackHandler) Act(c echo.Context) error {
	if err := h.act(c, c.FormValue("action")); err != nil {
		return err
	}
	back := c.FormValue("execution")
	if checkID(back, "execution") != nil {
		return redirect(c, h.url("executions"))
	}
	return redirect(c, h.url("execution", back)+"#rollback")
}

// rollbackVM is the execution page's rollback panel: the rollback's compensations, or for
// an admin the button that starts one on a failed execution; nil when neither applies.
func rollbackVM(lk links, c echo.Context, d *executions.Detail) *pages.RollbackVM {
	p, l, ex := principal(c), localizer(c), d.Ex
	failed := ex.Status == models.ExecDLQPending || ex.Status == models.ExecFailed
	if ex.RollbackStatus == nil && (!failed || !p.Can(models.RoleAdmin) || !d.HasUndo()) {
		return nil
	}
	vm := &pages.RollbackVM{CSRF: csrfToken(c)}
	if ex.RollbackStatus == nil {
		vm.StartURL = lk.url("execution.rollback", ex.ID)
		return vm
	}
	vm.Status = *ex.RollbackStatus
	for _, comp := range d.Compensations {
		name := comp.StepID
		if i := d.Def.Index(comp.StepID); i >= 0 {
			name = d.Def.Steps[i].Title()
		}
		item := pages.CompensationVM{ID: comp.ID, StepName: name, Type: comp.CompensationType, Status: deref(comp.Status),
			Attempts: comp.Attempts, Error: l.Text(deref(comp.ErrorMessage)), ExecutionID: ex.ID}
		item.FinishedAt, item.FinishedText = displayTimePtr(l, comp.FinishedAt)
		var spec definition.Compensation
		if json.Unmarshal(comp.CompensationConfig, &spec) == nil {
			instructions, _ := spec.Config["instructions"].(string)
			item.Instructions = redact.Envelopes(instructions) // a secret found in them stays sealed
		}
		if p.Can(models.RoleAdmin) {
			item.ActionURL = lk.url("compensation.actions", comp.ID)
		}
		vm.Items = append(vm.Items, item)
	}
	return vm
}
