package handlers

import (
	"encoding/json"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"lifeline/models"
	"lifeline/models/apperr"
	"lifeline/services/auth"
	"lifeline/services/engine"
	"lifeline/services/retry"
	"lifeline/services/workflows"
)

type apiWorkflow struct {
	ID                   string          `json:"id"`
	Name                 string          `json:"name"`
	Description          string          `json:"description"`
	Version              int             `json:"version"`
	Definition           json.RawMessage `json:"definition"`
	EffectiveRetryPolicy *retry.Spec     `json:"effectiveRetryPolicy,omitempty"`
	WebhookURL           string          `json:"webhookUrl,omitempty"`
	WebhookSecret        string          `json:"webhookSecret,omitempty"`
	CreatedAt            string          `json:"createdAt"`
	UpdatedAt            string          `json:"updatedAt"`
}

func (s *Server) apiWorkflowOf(c echo.Context, wf *models.Workflow, full bool) (apiWorkflow, error) {
	out := apiWorkflow{ID: wf.ID, Name: wf.Name, Description: wf.Description, Version: wf.Version,
		Definition: s.definitionFor(principal(c), wf.Definition), CreatedAt: rfc(wf.CreatedAt), UpdatedAt: rfc(wf.UpdatedAt)}
	if full {
		p, err := s.Engine.Policy(s.DB.Conn(c.Request().Context()), wf.OrganizationID, wf.ID, "")
		if err != nil {
			return out, err
		}
		spec := p.Spec()
		out.EffectiveRetryPolicy = &spec
		if principal(c).Can(models.RoleAdmin) {
			out.WebhookURL = strings.TrimRight(s.BaseURL, "/") + s.url("webhook", wf.WebhookToken)
			out.WebhookSecret = workflows.SigningSecret(wf.WebhookSecret)
		}
	}
	return out, nil
}

func (s *Server) apiListWorkflows(c echo.Context) error {
	wfs, err := s.DB.Workflows(c.Request().Context(), principal(c).OrganizationID)
	if err != nil {
		return err
	}
	items := []apiWorkflow{}
	for i := range wfs {
		w, _ := s.apiWorkflowOf(c, &wfs[i], false)
		items = append(items, w)
	}
	return c.JSON(http.StatusOK, map[string]any{"items": items})
}

func (s *Server) apiGetWorkflow(c echo.Context) error {
	id := c.Param("id")
	if err := checkID(id, "workflow"); err != nil {
		return err
	}
	wf, err := s.DB.GetWorkflow(c.Request().Context(), principal(c).OrganizationID, id)
	if err != nil {
		return err
	}
	out, err := s.apiWorkflowOf(c, wf, true)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, out)
}

func (s *Server) apiCreateWorkflow(c echo.Context) error {
	return s.saveWorkflow(c, http.StatusCreated, func(p *auth.Principal, body []byte) (*models.Workflow, error) {
		return s.Workflows.Create(c.Request().Context(), p.OrganizationID, actorOf(p), body)
	})
}

func (s *Server) apiUpdateWorkflow(c echo.Context) error {
	id := c.Param("id")
	if err := checkID(id, "workflow"); err != nil {
		return err
	}
	return s.saveWorkflow(c, http.StatusOK, func(p *auth.Principal, body []byte) (*models.Workflow, error) {
		return s.Workflows.Update(c.Request().Context(), p.OrganizationID, id, actorOf(p), body)
	})
}

// saveWorkflow reads a definition from the body, saves it with save and answers with the
// workflow. A body that is not an object is refused here (on "body"); the rest of "exactly
// one JSON object" (malformed JSON, data after it) is the definition's own check, on
// "definition".
func (s *Server) saveWorkflow(c echo.Context, status int, save func(*auth.Principal, []byte) (*models.Workflow, error)) error {
	body, err := readBody(c)
	if err != nil {
		return err
	}
	if err := startsObject(body); err != nil {
		return err
	}
	wf, err := save(principal(c), body)
	if err != nil {
		return err
	}
	out, err := s.apiWorkflowOf(c, wf, true)
	if err != nil {
		return err
	}
	return c.JSON(status, out)
}

// apiStart: POST /api/v1/workflows/{id}/executions with {"input": {…}} and an optional
// Idempotency-Key. 201 for a new execution, 200 (Idempotency-Replayed: true) for a replay.
func (s *Server) apiStart(c echo.Context) error {
	id := c.Param("id")
	if err := checkID(id, "workflow"); err != nil {
		return err
	}
	var req struct {
		Input json.RawMessage `json:"input"`
	}
	if err := decodeBody(c, &req); err != nil {
		return err
	}
	key, err := idempotencyKey(c)
	if err != nil {
		return err
	}
	if strings.HasPrefix(key, webhookKeyPrefix) {
		return apperr.Invalid("This Idempotency-Key is reserved.",
			map[string]string{"Idempotency-Key": "must not start with \"" + webhookKeyPrefix + "\" (reserved for webhook deliveries)"})
	}
	p := principal(c)
	ex, replayed, err := s.Engine.Start(c.Request().Context(), engine.StartRequest{OrganizationID: p.OrganizationID, WorkflowID: id,
		Input: req.Input, Trigger: engine.TriggerAPI, Actor: actorOf(p), IdempotencyKey: key})
	if err != nil {
		return err
	}
	c.Response().Header().Set(echo.HeaderLocation, s.url("api.execution", ex.ID))
	status := http.StatusCreated
	if replayed {
		status = http.StatusOK
		c.Response().Header().Set("Idempotency-Replayed", "true")
	}
	return c.JSON(status, s.apiExecutionSummary(ex, ""))
}

func oneOf(v string, allowed []string) bool {
	for _, a := range allowed {
		if a == v {
			return true
		}
	}
	return false
}

// executionFilter reads the executions list's query.
func executionFilter(c echo.Context) (models.ExecutionFilter, error) {
	q := newListQuery(c)
	f := models.ExecutionFilter{Status: q.oneOf("status", models.ExecutionFilterStatuses), WorkflowID: q.workflowID("workflowId"),
		Q: q.search("q"), Limit: q.limit(), Cursor: q.get("cursor")}
	return f, q.err()
}

func (s *Server) apiListExecutions(c echo.Context) error {
	f, err := executionFilter(c)
	if err != nil {
		return err
	}
	rows, next, err := s.DB.ListExecutions(c.Request().Context(), principal(c).OrganizationID, f)
	if err != nil {
		return err
	}
	items := []apiExecution{}
	for i := range rows {
		items = append(items, s.apiExecutionSummary(&rows[i].Execution, rows[i].WorkflowName))
	}
	return c.JSON(http.StatusOK, map[string]any{"items": items, "next": nullIfEmpty(next)})
}

func (s *Server) apiGetExecution(c echo.Context) error {
	d, err := s.loadExecution(c.Request().Context(), principal(c).OrganizationID, c.Param("id"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, s.apiExecutionDetail(d))
}

func nullIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}
