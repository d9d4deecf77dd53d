package handlers

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"lifeline/models"
	"lifeline/models/apperr"
	"lifeline/services/audit"
	"lifeline/services/auth"
	"lifeline/services/engine"
	"lifeline/services/executions"
	"lifeline/services/retry"
	"lifeline/services/workflows"
)

// recoverer is what the DLQ actions need from the engine.
type recoverer interface {
	Replay(ctx context.Context, r engine.ReplayRequest) (*engine.ReplayResult, error)
	Settle(ctx context.Context, r engine.SettleRequest) (*engine.ReplayResult, error)
}

// deadLetters finds a dead letter, by id or an execution's, and reads its execution with
// the input masked as users may see it (executions.Service).
type deadLetters interface {
	GetDLQ(ctx context.Context, orgID, id string) (*models.DLQRow, error)
	DLQForExecution(ctx context.Context, orgID, executionID string) (*models.DeadLetter, error)
	Execution(ctx context.Context, orgID, id string) (*models.Execution, error)
}

// auditHistory reads audit entries, for a dead letter's history (audit.Reader).
type auditHistory interface {
	List(ctx context.Context, orgID string, f models.AuditFilter) ([]models.AuditRow, string, error)
}

// workflowVersions reads a workflow and its versions' definitions (workflows.Service).
type workflowVersions interface {
	Get(ctx context.Context, orgID, id string) (*models.Workflow, error)
	Version(ctx context.Context, orgID, id string, version int) (models.JSON, error)
}

var (
	_ recoverer        = (*engine.Engine)(nil)
	_ deadLetters      = (*executions.Service)(nil)
	_ auditHistory     = (*audit.Reader)(nil)
	_ workflowVersions = (*workflows.Service)(nil)
)

// DLQActionsHandler serves the recovery actions on dead letters: retry, edit the input and
// retry, resume from a step, skip the failed step, retry the entire workflow, resolve, skip.
type DLQActionsHandler struct {
	*chrome
	eng   recoverer
	dlq   deadLetters
	wfs   workflowVersions
	audit auditHistory // a dead letter's history
}

// newDLQActionsHandler returns the handler.
func newDLQActionsHandler(ch *chrome, eng recoverer, dlq deadLetters, wfs workflowVersions, history auditHistory) *DLQActionsHandler {
	return &DLQActionsHandler{chrome: ch, eng: eng, dlq: dlq, wfs: wfs, audit: history}
}

// Roles (seed 000, scenarios 3 and 4: the accountant fixes her data): viewers read;
// accountants retry, resume, retry the whole workflow, edit the input and retry, skip the
// failed step and close an item as resolved or skipped, with a note where they skip or close;
// overriding the retry policy is the admins'. minRole returns the role an action needs (a
// request the engine will refuse as invalid needs no more than an accountant, so the answer
// says what is wrong with it).
func minRole(a action) string {
	if a.RetryPolicy != nil {
		return models.RoleAdmin
	}
	return models.RoleAccountant
}

// needsNote reports whether a, taken by p, must say why: an accountant who skips a step or
// closes an item leaves a note for whoever looks later (an admin may, and need not).
func needsNote(p *auth.Principal, a action) bool {
	return !p.Can(models.RoleAdmin) && (a.Settle != "" || a.Mode == engine.ReplaySkipFailed) && strings.TrimSpace(a.Notes) == ""
}

// action is one recovery request, from the API or a form: a replay (Mode) or a settlement
// (Settle: resolved or skipped).
type action struct {
	Mode          string
	Settle        string
	FromStepID    string
	Input         json.RawMessage
	Output        json.RawMessage
	RetryPolicy   *retry.Spec
	LatestVersion bool
	Notes         string
}

// run checks the principal's role for a and runs it on the dead letter.
func (h *DLQActionsHandler) run(c echo.Context, dlqID string, a action, key string) (*engine.ReplayResult, error) {
	p := principal(c)
	if need := minRole(a); !p.Can(need) {
		return nil, apperr.Errorf(apperr.EFORBIDDEN, "Your role (%s) cannot do this; it needs %s or above.", p.Role, need)
	}
	if needsNote(p, a) {
		return nil, apperr.Invalid("Say why in a note: whoever looks at this item later will read it.",
			map[string]string{"resolutionNotes": "A note is required to skip or close an item."})
	}
	ctx := c.Request().Context()
	if a.Settle != "" {
		return h.eng.Settle(ctx, engine.SettleRequest{OrganizationID: p.OrganizationID, DeadLetterID: dlqID, Status: a.Settle,
			Notes: a.Notes, Actor: actorOf(p), IdempotencyKey: key})
	}
	return h.eng.Replay(ctx, engine.ReplayRequest{OrganizationID: p.OrganizationID, DeadLetterID: dlqID, Mode: a.Mode,
		FromStepID: a.FromStepID, Input: a.Input, Output: a.Output, RetryPolicy: a.RetryPolicy, LatestVersion: a.LatestVersion,
		Notes: a.Notes, Actor: actorOf(p), IdempotencyKey: key})
}

// apiResult is the answer to an action.
type apiResult struct {
	DeadLetterID string `json:"deadLetterId"`
	ExecutionID  string `json:"executionId"`
	Action       string `json:"action"`
	Status       string `json:"status"`
}

// respond answers an API action: 202 for a replay that now runs, 200 for a settlement or an
// idempotent repeat (Idempotency-Replayed: true).
func (h *DLQActionsHandler) respond(c echo.Context, name string, a action, res *engine.ReplayResult) error {
	out := apiResult{DeadLetterID: res.DeadLetterID, ExecutionID: res.ExecutionID, Action: name, Status: models.DLQProcessing}
	status := http.StatusAccepted
	if a.Settle != "" {
		out.Status, status = a.Settle, http.StatusOK
	}
	if res.Replayed {
		status = http.StatusOK
		c.Response().Header().Set("Idempotency-Replayed", "true")
	}
	c.Response().Header().Set(echo.HeaderLocation, h.url("api.execution", res.ExecutionID))
	return c.JSON(status, out)
}

// APIAction: POST /api/v1/dlq/{id}/actions with seed 000's processDLQSchema
// {"action": "retry" | "retry_modified" | "skip" | "resolve", "modifiedInput", "resolutionNotes"}
// and, for a retry, the optional "fromStepId" and "retryPolicy".
func (h *DLQActionsHandler) APIAction(c echo.Context) error {
	id := c.Param("id")
	if err := checkID(id, "dead letter"); err != nil {
		return err
	}
	var req struct {
		Action          string          `json:"action"`
		ModifiedInput   json.RawMessage `json:"modifiedInput"`
		ResolutionNotes string          `json:"resolutionNotes"`
		FromStepID      string          `json:"fromStepId"`
		RetryPolicy     *retry.Spec     `json:"retryPolicy"`
	}
	if err := decodeBody(c, &req); err != nil {
		return err
	}
	key, err := idempotencyKey(c)
	if err != nil {
		return err
	}
	a := action{Notes: req.ResolutionNotes, RetryPolicy: req.RetryPolicy, FromStepID: req.FromStepID}
	switch req.Action {
	case "retry", "retry_modified":
		a.Mode = engine.ReplayFromFailed
		if req.FromStepID != "" {
			a.Mode = engine.ReplayFromStep
		}
		if req.Action == "retry_modified" {
			if len(bytes.TrimSpace(req.ModifiedInput)) == 0 || string(bytes.TrimSpace(req.ModifiedInput)) == "null" {
				return apperr.Invalid("replay.invalid", map[string]string{"modifiedInput": "replay.input.required"})
			}
			a.Input = req.ModifiedInput
		} else if len(req.ModifiedInput) > 0 {
			return apperr.Invalid("replay.invalid", map[string]string{"modifiedInput": "replay.input.only_modified"})
		}
	case "skip":
		a.Settle = models.DLQSkipped
	case "resolve":
		a.Settle = models.DLQResolved
	default:
		return apperr.Invalid("replay.invalid", map[string]string{"action": "must be one of retry, retry_modified, skip, resolve"})
	}
	res, err := h.run(c, id, a, key)
	if err != nil {
		return err
	}
	return h.respond(c, req.Action, a, res)
}

// APIRetryExecution: POST /api/v1/executions/{id}/retry with seed 000's manualRetrySchema
// {"retryType": "from_failed" | "full" | "skip_failed", "modifiedInput", "skipSteps"}, plus
// "fromStepId" (resume from that step), "retryPolicy" (an override for the replay),
// "latestVersion" (full: run the latest definition) and "output" (skip_failed: the skipped
// step's output). The execution must be waiting in the DLQ.
func (h *DLQActionsHandler) APIRetryExecution(c echo.Context) error {
	id := c.Param("id")
	if err := checkID(id, "execution"); err != nil {
		return err
	}
	var req struct {
		RetryType     string          `json:"retryType"`
		ModifiedInput json.RawMessage `json:"modifiedInput"`
		SkipSteps     []string        `json:"skipSteps"`
		FromStepID    string          `json:"fromStepId"`
		RetryPolicy   *retry.Spec     `json:"retryPolicy"`
		LatestVersion bool            `json:"latestVersion"`
		Output        json.RawMessage `json:"output"`
	}
	if err := decodeBody(c, &req); err != nil {
		return err
	}
	key, err := idempotencyKey(c)
	if err != nil {
		return err
	}
	p := principal(c)
	dl, err := h.dlq.DLQForExecution(c.Request().Context(), p.OrganizationID, id)
	if err != nil {
		return err
	}
	if dl == nil {
		if _, err := h.dlq.Execution(c.Request().Context(), p.OrganizationID, id); err != nil {
			return err
		}
		return &apperr.Error{Code: apperr.ECONFLICT, Message: "replay.notindlq"}
	}
	a := action{Mode: req.RetryType, FromStepID: req.FromStepID, Input: req.ModifiedInput, RetryPolicy: req.RetryPolicy,
		LatestVersion: req.LatestVersion, Output: req.Output}
	if string(bytes.TrimSpace(a.Input)) == "null" {
		a.Input = nil
	}
	if a.Mode == engine.ReplayFromFailed && req.FromStepID != "" {
		a.Mode = engine.ReplayFromStep
	}
	for _, s := range req.SkipSteps {
		if s != dl.FailedStepID || a.Mode != engine.ReplaySkipFailed {
			return apperr.Invalid("replay.invalid", map[string]string{"skipSteps": "replay.skipsteps"})
		}
	}
	res, err := h.run(c, dl.ID, a, key)
	if err != nil {
		return err
	}
	return h.respond(c, req.RetryType, a, res)
}

// idempotencyKey returns the request's Idempotency-Key, or EINVALID when it cannot be used.
func idempotencyKey(c echo.Context) (string, error) {
	key := c.Request().Header.Get("Idempotency-Key")
	if len(key) > 255 || strings.IndexFunc(key, func(r rune) bool { return r < 0x20 || r > 0x7e }) >= 0 {
		return "", apperr.Invalid("idemkey.unusable", map[string]string{"Idempotency-Key": "idemkey.unusable.field"})
	}
	return key, nil
}

var _ recoverer = (*engine.Engine)(nil)
