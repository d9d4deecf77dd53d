package handlers

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"lifeline/models"
	"lifeline/models/apperr"
	"lifeline/services/audit"
	"lifeline/services/auth"
	"lifeline/services/definition"
	"lifeline/services/engine"
	"lifeline/services/executions"
	"lifeline/services/fixrules"
	"lifeline/services/retry"
	"lifeline/services/workflows"
	"lifeline/views/pages"
)

// recoverer is what the DLQ actions need from the engine.
type recoverer interface {
	Replay(ctx context.Context, r engine.ReplayRequest) (*engine.ReplayResult, error)
	Settle(ctx context.Context, r engine.SettleRequest) (*engine.ReplayResult, error)
}

// deadLetters finds a dead letter, by id or an execution's, and reads its execution with
// the input masked as users may see it, and its rollback's compensations (executions.Service).
type deadLetters interface {
	GetDLQ(ctx context.Context, orgID, id string) (*models.DLQRow, error)
	DLQForExecution(ctx context.Context, orgID, executionID string) (*models.DeadLetter, error)
	Execution(ctx context.Context, orgID, id string) (*models.Execution, error)
	Compensations(ctx context.Context, orgID, id string) ([]models.CompensationAction, error)
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

// approvals are an item's input-change requests and reopening (engine.Approvals).
type approvals interface {
	RequestInputChange(ctx context.Context, r engine.ChangeRequest) (*models.InputChangeRequest, error)
	ApproveInputChange(ctx context.Context, d engine.Decision) (*engine.ReplayResult, error)
	RejectInputChange(ctx context.Context, d engine.Decision) (*models.InputChangeRequest, error)
	InputChanges(ctx context.Context, orgID, deadLetterID string) ([]models.InputChangeRequest, error)
	Reopen(ctx context.Context, r engine.ReopenRequest) error
}

// fixRules are the organization's rules of who may fix what, and the ask (fixrules.Service).
type fixRules interface {
	Rules(ctx context.Context, orgID string) (fixrules.Rules, error)
	AskAdmin(ctx context.Context, a fixrules.Ask) (fixrules.Asked, error)
	AskAdminGroup(ctx context.Context, a fixrules.GroupAsk) (fixrules.Asked, error)
}

var (
	_ approvals        = engine.Approvals{}
	_ fixRules         = (*fixrules.Service)(nil)
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
	chg   approvals
	rules fixRules
	// running, set by the routes, is the step a replay runs or waits on (the execution
	// page's view of it): the item page shows it while the replay runs.
	running func(c echo.Context, executionID string) (*pages.StepVM, error)
	// groupTitle is a failure group's title (nil without groups).
	groupTitle func(ctx context.Context, orgID, id string) (string, error)
	// poison checks an item's input values, and flags shows those that break runs or are
	// quarantined (nil: no flags).
	poison poisonChecker
	flags  *flagger
	// periods says what closes an item's period (nil: closed periods are not shown).
	periods closedPeriods
	// clientValues gives a client's other values of an input field (nil: no hint).
	clientValues clientFieldValues
}

// newDLQActionsHandler returns the handler.
func newDLQActionsHandler(ch *chrome, eng *engine.Engine, dlq deadLetters, wfs workflowVersions, history auditHistory, rules fixRules) *DLQActionsHandler {
	return &DLQActionsHandler{chrome: ch, eng: eng, dlq: dlq, wfs: wfs, audit: history, chg: eng.Approvals(), rules: rules}
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

// fixes reports whether a is one the organization's rule may keep from accountants: editing
// the input, skipping the failed step, closing the item.
func (a action) fixes() bool {
	return len(bytes.TrimSpace(a.Input)) > 0 || a.Mode == engine.ReplaySkipFailed || a.Settle != ""
}

// errAdminOnly: the organization keeps editing, skipping and closing to its admins.
var errAdminOnly = &apperr.Error{Code: apperr.EFORBIDDEN, Message: "rules.adminonly"}

// mayFix reports whether the principal may edit, skip and close items: admins always,
// accountants unless the organization's rule says otherwise.
func (h *DLQActionsHandler) mayFix(c echo.Context) (bool, error) {
	p := principal(c)
	if p.Can(models.RoleAdmin) {
		return true, nil
	}
	if !p.Can(models.RoleAccountant) {
		return false, nil
	}
	r, err := h.rules.Rules(c.Request().Context(), p.OrganizationID)
	return r.AccountantsMayFix, err
}

// outcome is what an action did: a replay or settlement (res), or, for an accountant's
// edited input on a workflow that moves money, a request waiting for an admin (change).
type outcome struct {
	res    *engine.ReplayResult
	change *models.InputChangeRequest
}

// run checks the principal's role (and the organization's rule) for a and runs it on the
// dead letter; an accountant's edited input on a workflow that moves money becomes a request
// for an admin's approval instead.
func (h *DLQActionsHandler) run(c echo.Context, dlqID string, a action, key string) (outcome, error) {
	p := principal(c)
	if need := minRole(a); !p.Can(need) {
		return outcome{}, apperr.Errorf(apperr.EFORBIDDEN, "Your role (%s) cannot do this; it needs %s or above.", p.Role, need)
	}
	if a.fixes() {
		if ok, err := h.mayFix(c); err != nil || !ok {
			return outcome{}, cmp.Or(err, error(errAdminOnly))
		}
	}
	if needsNote(p, a) {
		return outcome{}, apperr.Invalid("Say why in a note: whoever looks at this item later will read it.",
			map[string]string{"resolutionNotes": "A note is required to skip or close an item."})
	}
	ctx := c.Request().Context()
	if a.Settle != "" {
		res, err := h.eng.Settle(ctx, engine.SettleRequest{OrganizationID: p.OrganizationID, DeadLetterID: dlqID, Status: a.Settle,
			Notes: a.Notes, Actor: actorOf(p), IdempotencyKey: key})
		return outcome{res: res}, err
	}
	if len(bytes.TrimSpace(a.Input)) > 0 && !p.Can(models.RoleAdmin) {
		r, err := h.dlq.GetDLQ(ctx, p.OrganizationID, dlqID)
		if err != nil {
			return outcome{}, err
		}
		if h.movesMoney(c, r.WorkflowID) {
			title := shortID(r.ExecutionID)
			if r.Subject != nil {
				title = *r.Subject
			}
			ch, err := h.chg.RequestInputChange(ctx, engine.ChangeRequest{OrganizationID: p.OrganizationID, DeadLetterID: dlqID, Mode: a.Mode,
				Input: a.Input, Notes: a.Notes, Actor: actorOf(p), ActorName: p.Email, Title: title, Link: h.url("dlq.item", dlqID)})
			return outcome{change: ch}, err
		}
	}
	res, err := h.eng.Replay(ctx, engine.ReplayRequest{OrganizationID: p.OrganizationID, DeadLetterID: dlqID, Mode: a.Mode,
		FromStepID: a.FromStepID, Input: a.Input, Output: a.Output, RetryPolicy: a.RetryPolicy, LatestVersion: a.LatestVersion,
		Notes: a.Notes, Actor: actorOf(p), IdempotencyKey: key})
	return outcome{res: res}, err
}

// movesMoney reports whether the workflow (its latest definition) is marked as moving money
// (settings.movesMoney): an accountant's edited input then waits for an admin's approval.
func (h *DLQActionsHandler) movesMoney(c echo.Context, workflowID string) bool {
	wf, err := h.wfs.Get(c.Request().Context(), principal(c).OrganizationID, workflowID)
	if err != nil {
		return false
	}
	var d definition.Definition
	return json.Unmarshal(wf.Definition, &d) == nil && d.Settings.MovesMoney
}

// apiResult is the answer to an action.
type apiResult struct {
	DeadLetterID string `json:"deadLetterId"`
	ExecutionID  string `json:"executionId"`
	Action       string `json:"action"`
	Status       string `json:"status"`
	// RequestID is the input-change request waiting for an admin (status awaiting_approval).
	RequestID string `json:"requestId,omitempty"`
}

// respond answers an API action: 202 for a replay that now runs, 200 for a settlement or an
// idempotent repeat (Idempotency-Replayed: true), 202 {"status": "awaiting_approval"} for an
// input change that waits for an admin.
func (h *DLQActionsHandler) respond(c echo.Context, name string, a action, o outcome) error {
	if o.change != nil {
		return c.JSON(http.StatusAccepted, apiResult{DeadLetterID: o.change.DeadLetterID, ExecutionID: o.change.ExecutionID, Action: name,
			Status: "awaiting_approval", RequestID: o.change.ID})
	}
	res := o.res
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
