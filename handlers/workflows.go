package handlers

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"lifeline/models"
	"lifeline/models/apperr"
	"lifeline/services/audit"
	"lifeline/services/auth"
	"lifeline/services/breaker"
	"lifeline/services/definition"
	"lifeline/services/engine"
	"lifeline/services/executions"
	"lifeline/services/retry"
	"lifeline/services/workflows"
	"lifeline/views/i18n"
	"lifeline/views/pages"
)

// workflowService reads and saves the organization's workflows (workflows.Service).
type workflowService interface {
	List(ctx context.Context, orgID string) ([]models.Workflow, map[string]models.WorkflowStats, error)
	All(ctx context.Context, orgID string) ([]models.Workflow, error)
	Get(ctx context.Context, orgID, id string) (*models.Workflow, error)
	Create(ctx context.Context, orgID string, actor audit.Actor, raw []byte) (*models.Workflow, error)
	Update(ctx context.Context, orgID, id string, actor audit.Actor, raw []byte) (*models.Workflow, error)
	SetMovesMoney(ctx context.Context, orgID, id string, actor audit.Actor, v bool) (*models.Workflow, bool, error)
}

// workflowRuns is what the workflow page shows of how its steps run (their retry policies
// and breakers) and its recent executions, and a definition masked for those who may not
// see secrets (executions.Service).
type workflowRuns interface {
	Policy(ctx context.Context, orgID, workflowID, stepID string) (retry.Policy, error)
	Breakers(ctx context.Context, orgID, workflowID string, hosts []string) ([]models.CircuitBreaker, error)
	List(ctx context.Context, orgID string, f models.ExecutionFilter) ([]models.ExecutionRow, string, error)
	Mask(j []byte) json.RawMessage
}

// starter starts executions (*engine.Engine).
type starter interface {
	Start(ctx context.Context, r engine.StartRequest) (*models.Execution, bool, error)
}

var (
	_ workflowService = (*workflows.Service)(nil)
	_ workflowRuns    = (*executions.Service)(nil)
	_ starter         = (*engine.Engine)(nil)
)

// WorkflowsHandler serves the workflows: the list with the "New workflow" form, a
// workflow's page (its steps, policies, breakers, recent executions, the start form), and
// the API (list, get, create, update, start an execution).
type WorkflowsHandler struct {
	*chrome
	wfs  workflowService
	runs workflowRuns
	eng  starter
	// baseURL is the app's public URL, for the webhook URL admins are shown.
	baseURL string
}

// newWorkflowsHandler returns the handler.
func newWorkflowsHandler(ch *chrome, wfs workflowService, runs workflowRuns, eng starter, baseURL string) *WorkflowsHandler {
	return &WorkflowsHandler{chrome: ch, wfs: wfs, runs: runs, eng: eng, baseURL: baseURL}
}

// List: GET /workflows, the organization's workflows with the "New workflow" form.
func (h *WorkflowsHandler) List(c echo.Context) error {
	vm, err := h.listVM(c)
	if err != nil {
		return err
	}
	vm.CreateForm = pages.WorkflowCreateForm{Action: h.url("workflows.create")}
	return render(c, http.StatusOK, pages.Workflows(h.page(c, "nav.workflows", "workflows"), vm))
}

func (h *WorkflowsHandler) listVM(c echo.Context) (pages.WorkflowsVM, error) {
	p, l := principal(c), localizer(c)
	wfs, stats, err := h.wfs.List(c.Request().Context(), p.OrganizationID)
	if err != nil {
		return pages.WorkflowsVM{}, err
	}
	vm := pages.WorkflowsVM{CanCreate: p.Can(models.RoleAdmin)}
	for _, wf := range wfs {
		var def definition.Definition
		_ = json.Unmarshal(wf.Definition, &def)
		st := stats[wf.ID]
		row := pages.WorkflowRow{ID: wf.ID, Name: wf.Name, Description: wf.Description, URL: h.url("workflow", wf.ID),
			Version: wf.Version, Steps: len(def.Steps), LastStatus: st.LastStatus, Executions: st.Executions}
		row.LastRunAt, row.LastRunAtText = displayTimePtr(l, st.LastRunAt)
		vm.Rows = append(vm.Rows, row)
	}
	return vm, nil
}

// Create handles the "New workflow" form: 422 re-renders the form with field errors.
func (h *WorkflowsHandler) Create(c echo.Context) error {
	p := principal(c)
	raw := c.FormValue("definition")
	wf, err := h.wfs.Create(c.Request().Context(), p.OrganizationID, actorOf(p), []byte(raw))
	if me := invalid(err); me != nil {
		msg, fields := translated(localizer(c), me.Message, me.Fields)
		f := pages.WorkflowCreateForm{Action: h.url("workflows.create"), Definition: raw, Errors: fields, FormError: msg}
		if isHTMX(c) {
			return render(c, http.StatusUnprocessableEntity, pages.WorkflowCreateFormFragment(f, csrfToken(c)))
		}
		vm, verr := h.listVM(c)
		if verr != nil {
			return verr
		}
		vm.CreateForm = f
		return render(c, http.StatusUnprocessableEntity, pages.Workflows(h.page(c, "nav.workflows", "workflows"), vm))
	}
	if err != nil {
		return err
	}
	return redirect(c, h.url("workflow", wf.ID))
}

func invalid(err error) *apperr.Error {
	me, ok := err.(*apperr.Error)
	if ok && me.Code == apperr.EINVALID {
		return me
	}
	return nil
}

func policyLine(l *i18n.Localizer, p retry.Policy) string {
	if p.MaxRetries == 0 {
		return l.T("policy.noretries")
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s · %s", l.N("count.retries", p.MaxRetries), l.TOr("policy.backoff."+string(p.Backoff), string(p.Backoff)))
	switch p.Backoff {
	case retry.Exponential:
		fmt.Fprintf(&b, " %s ×%s", displayDuration(l, p.InitialDelay), decimal(l, p.Multiplier, 2))
	case retry.Custom:
		var parts []string
		for _, d := range p.CustomSchedule {
			parts = append(parts, displayDuration(l, d))
		}
		fmt.Fprintf(&b, " %s", strings.Join(parts, ", "))
	default:
		fmt.Fprintf(&b, " %s", displayDuration(l, p.InitialDelay))
	}
	fmt.Fprintf(&b, " · %s", l.T("policy.max", "Delay", displayDuration(l, p.MaxDelay)))
	if p.JitterRatio > 0 {
		fmt.Fprintf(&b, " · %s", l.T("policy.jitter", "Percent", "±"+decimal(l, p.JitterRatio*100, 2)+"%"))
	}
	return b.String()
}

// Show: GET /workflows/{id}, a workflow's steps, policies, breakers and recent executions.
func (h *WorkflowsHandler) Show(c echo.Context) error {
	return h.renderShow(c, http.StatusOK, pages.StartForm{Input: "{}"})
}

// SaveMoney: POST /workflows/{id}/money (admins), the "moves money" checkbox: saved as the
// workflow's next version, audited; unchanged, nothing is stored. A value other than
// "true" or none is the page again with the field's message (422).
func (h *WorkflowsHandler) SaveMoney(c echo.Context) error {
	id := c.Param("id")
	if err := checkID(id, "workflow"); err != nil {
		return err
	}
	v := c.FormValue("movesMoney")
	if v != "" && v != "true" {
		return h.renderShowMoney(c, http.StatusUnprocessableEntity, pages.StartForm{Input: "{}"}, func(m *pages.WorkflowMoneyVM) {
			m.Error = localizer(c).T("workflow.money.invalid")
		})
	}
	p := principal(c)
	if _, _, err := h.wfs.SetMovesMoney(c.Request().Context(), p.OrganizationID, id, actorOf(p), v == "true"); err != nil {
		return err
	}
	return redirect(c, h.url("workflow", id)+"?done=money#money-card")
}

func (h *WorkflowsHandler) renderShow(c echo.Context, status int, start pages.StartForm) error {
	return h.renderShowMoney(c, status, start, nil)
}

// renderShowMoney renders the workflow's page; money, when set, changes what its "moves
// money" card says (a refused form).
func (h *WorkflowsHandler) renderShowMoney(c echo.Context, status int, start pages.StartForm, money func(*pages.WorkflowMoneyVM)) error {
	ctx, l := c.Request().Context(), localizer(c)
	p := principal(c)
	id := c.Param("id")
	if err := checkID(id, "workflow"); err != nil {
		return err
	}
	wf, err := h.wfs.Get(ctx, p.OrganizationID, id)
	if err != nil {
		return err
	}
	shown := h.definitionFor(p, wf.Definition)
	var def definition.Definition
	if err := json.Unmarshal(shown, &def); err != nil {
		return err
	}
	wfPolicy, err := h.runs.Policy(ctx, p.OrganizationID, wf.ID, "")
	if err != nil {
		return err
	}
	spec := wfPolicy.Spec()
	policyJSON, _ := json.MarshalIndent(spec, "", "  ")
	vm := pages.WorkflowVM{ID: wf.ID, Name: wf.Name, Description: wf.Description, Version: fmt.Sprint(wf.Version),
		CreatedAt: rfc(wf.CreatedAt), CreatedAtText: displayTime(l, wf.CreatedAt), UnknownErrors: l.TOr("workflow.unknownerrors."+wf.UnknownErrors, wf.UnknownErrors),
		PolicyJSON: string(policyJSON), DefinitionJSON: prettyJSON(models.JSON(shown)),
		ExecutionsURL: h.url("executions") + "?workflowId=" + wf.ID,
		BreakersURL:   h.url("breakers") + "?" + url.Values{"workflowId": {wf.ID}}.Encode()}
	breakers, err := h.runs.Breakers(ctx, p.OrganizationID, wf.ID, breakerHosts(&def))
	if err != nil {
		return err
	}
	breakerStates := make(map[string]string, len(breakers))
	for _, b := range breakers {
		breakerStates[b.ScopeKey] = b.State
	}
	for i, st := range def.Steps {
		pol, err := h.runs.Policy(ctx, p.OrganizationID, wf.ID, st.ID)
		if err != nil {
			return err
		}
		source := "default"
		switch {
		case st.RetryPolicy != nil:
			source = "step"
		case def.Settings.RetryPolicy != nil:
			source = "workflow"
		}
		row := pages.StepDefRow{Index: i + 1, ID: st.ID, Name: st.Title(), Type: st.Type, Summary: stepSummary(l, st),
			Timeout: displayDuration(l, time.Duration(st.Timeout())*time.Millisecond), Policy: policyLine(l, pol), PolicySource: source,
			BreakerState: stepBreakerState(&def, i, wf.ID, breakerStates)}
		handlerRow(l, &def, i, &row)
		vm.Steps = append(vm.Steps, row)
	}
	start.Action, start.CanStart = h.url("workflow.start", wf.ID), p.Can(models.RoleAccountant)
	vm.Start = start
	if p.Can(models.RoleAdmin) {
		vm.WebhookURL = strings.TrimRight(h.baseURL, "/") + h.url("webhook", wf.WebhookToken)
		vm.Money.Action = h.url("workflow.money", wf.ID)
	}
	vm.Money.MovesMoney, vm.Money.Saved = def.Settings.MovesMoney, c.QueryParam("done") == "money"
	if money != nil {
		money(&vm.Money)
	}
	rows, _, err := h.runs.List(ctx, p.OrganizationID, models.ExecutionFilter{WorkflowID: wf.ID, Limit: 10})
	if err != nil {
		return err
	}
	vm.Recent = executionRows(h.links, localizer(c), rows, workflowSteps{wf.ID: def.Steps})
	return render(c, status, pages.Workflow(h.page(c, wf.Name, "workflows"), vm))
}

// stepBreakerState is the state of step i's breaker (the engine's scope keys: the step's, or
// its host's): closed while it has no row, "" when the step's breaker is off.
func stepBreakerState(def *definition.Definition, i int, workflowID string, states map[string]string) string {
	if !def.Breaker(i).Enabled {
		return ""
	}
	key := "step:" + workflowID + ":" + def.Steps[i].ID
	if h := breakerHost(def, i); h != "" {
		key = "host:" + h
	}
	if st, ok := states[key]; ok {
		return st
	}
	return breaker.Closed
}

func stepSummary(l *i18n.Localizer, st definition.Step) string {
	switch st.Type {
	case "http":
		m, _ := st.Config["method"].(string)
		if m == "" {
			m = "POST"
		}
		u, _ := st.Config["url"].(string)
		return strings.ToUpper(m) + " " + u
	case "delay":
		ms, _ := st.Config["ms"].(float64)
		return l.T("step.summary.delay", "Duration", displayDuration(l, time.Duration(ms)*time.Millisecond))
	case "transform":
		return l.T("step.summary.transform")
	}
	return st.Type
}

// Start starts an execution from the workflow page's JSON input.
func (h *WorkflowsHandler) Start(c echo.Context) error {
	p := principal(c)
	id := c.Param("id")
	if err := checkID(id, "workflow"); err != nil {
		return err
	}
	input := c.FormValue("input")
	ex, _, err := h.eng.Start(c.Request().Context(), engine.StartRequest{OrganizationID: p.OrganizationID, WorkflowID: id,
		Input: []byte(input), Trigger: engine.TriggerUI, Actor: actorOf(p)})
	if me := invalid(err); me != nil {
		msg, fields := translated(localizer(c), me.Message, me.Fields)
		f := pages.StartForm{Action: h.url("workflow.start", id), Input: input, Errors: fields, FormError: msg, CanStart: true}
		if isHTMX(c) {
			return render(c, http.StatusUnprocessableEntity, pages.StartFormFragment(f, csrfToken(c)))
		}
		return h.renderShow(c, http.StatusUnprocessableEntity, f)
	}
	if err != nil {
		return err
	}
	return redirect(c, h.url("execution", ex.ID))
}

// handlerRow fills in where step i's failures go, or, for a handler, the steps it serves
// and where the execution goes on after it.
func handlerRow(l *i18n.Localizer, def *definition.Definition, i int, row *pages.StepDefRow) {
	title := func(id string) string {
		if j := def.Index(id); j >= 0 {
			return def.Steps[j].Title()
		}
		return id
	}
	st := def.Steps[i]
	if st.Handler {
		row.Handler = true
		var served []string
		for _, id := range def.Served(i) {
			served = append(served, title(id))
		}
		row.Serves = strings.Join(served, ", ")
		if st.Next != "" {
			row.Next = title(st.Next)
		} else {
			row.NextPartial = true
		}
		return
	}
	of := def.OnFailureOf(i)
	if of == nil {
		return
	}
	types := slices.Sorted(maps.Keys(of.ByErrorType))
	for _, t := range types {
		row.OnFailure = append(row.OnFailure, pages.HandlerRoute{Errors: l.TOr("errortype."+t, t), Handler: title(of.ByErrorType[t])})
	}
	if fallback := cmp.Or(of.Default, of.HandlerStepID); fallback != "" {
		label := l.T("handlers.anyerror")
		if len(types) > 0 {
			label = l.T("handlers.othererrors")
		}
		row.OnFailure = append(row.OnFailure, pages.HandlerRoute{Errors: label, Handler: title(fallback)})
	}
}

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

func (h *WorkflowsHandler) apiOf(c echo.Context, wf *models.Workflow, full bool) (apiWorkflow, error) {
	out := apiWorkflow{ID: wf.ID, Name: wf.Name, Description: wf.Description, Version: wf.Version,
		Definition: h.definitionFor(principal(c), wf.Definition), CreatedAt: rfc(wf.CreatedAt), UpdatedAt: rfc(wf.UpdatedAt)}
	if full {
		p, err := h.runs.Policy(c.Request().Context(), wf.OrganizationID, wf.ID, "")
		if err != nil {
			return out, err
		}
		spec := p.Spec()
		out.EffectiveRetryPolicy = &spec
		if principal(c).Can(models.RoleAdmin) {
			out.WebhookURL = strings.TrimRight(h.baseURL, "/") + h.url("webhook", wf.WebhookToken)
			out.WebhookSecret = workflows.SigningSecret(wf.WebhookSecret)
		}
	}
	return out, nil
}

// APIList: GET /api/v1/workflows.
func (h *WorkflowsHandler) APIList(c echo.Context) error {
	wfs, err := h.wfs.All(c.Request().Context(), principal(c).OrganizationID)
	if err != nil {
		return err
	}
	items := []apiWorkflow{}
	for i := range wfs {
		w, _ := h.apiOf(c, &wfs[i], false)
		items = append(items, w)
	}
	return c.JSON(http.StatusOK, map[string]any{"items": items})
}

// APIGet: GET /api/v1/workflows/{id}, with its effective retry policy (and, for admins,
// its webhook URL and signing secret).
func (h *WorkflowsHandler) APIGet(c echo.Context) error {
	id := c.Param("id")
	if err := checkID(id, "workflow"); err != nil {
		return err
	}
	wf, err := h.wfs.Get(c.Request().Context(), principal(c).OrganizationID, id)
	if err != nil {
		return err
	}
	out, err := h.apiOf(c, wf, true)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, out)
}

// APICreate: POST /api/v1/workflows with a definition → 201 and the workflow.
func (h *WorkflowsHandler) APICreate(c echo.Context) error {
	return h.save(c, http.StatusCreated, func(p *auth.Principal, body []byte) (*models.Workflow, error) {
		return h.wfs.Create(c.Request().Context(), p.OrganizationID, actorOf(p), body)
	})
}

// APIUpdate: PUT /api/v1/workflows/{id} with a definition → its new version.
func (h *WorkflowsHandler) APIUpdate(c echo.Context) error {
	id := c.Param("id")
	if err := checkID(id, "workflow"); err != nil {
		return err
	}
	return h.save(c, http.StatusOK, func(p *auth.Principal, body []byte) (*models.Workflow, error) {
		return h.wfs.Update(c.Request().Context(), p.OrganizationID, id, actorOf(p), body)
	})
}

// save reads a definition from the body, saves it with save and answers with the
// workflow. A body that is not an object is refused here (on "body"); the rest of "exactly
// one JSON object" (malformed JSON, data after it) is the definition's own check, on
// "definition".
func (h *WorkflowsHandler) save(c echo.Context, status int, save func(*auth.Principal, []byte) (*models.Workflow, error)) error {
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
	out, err := h.apiOf(c, wf, true)
	if err != nil {
		return err
	}
	return c.JSON(status, out)
}

// APIStart: POST /api/v1/workflows/{id}/executions with {"input": {…}} and an optional
// Idempotency-Key. 201 for a new execution, 200 (Idempotency-Replayed: true) for a replay.
func (h *WorkflowsHandler) APIStart(c echo.Context) error {
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
	ex, replayed, err := h.eng.Start(c.Request().Context(), engine.StartRequest{OrganizationID: p.OrganizationID, WorkflowID: id,
		Input: req.Input, Trigger: engine.TriggerAPI, Actor: actorOf(p), IdempotencyKey: key})
	if err != nil {
		return err
	}
	c.Response().Header().Set(echo.HeaderLocation, h.url("api.execution", ex.ID))
	status := http.StatusCreated
	if replayed {
		status = http.StatusOK
		c.Response().Header().Set("Idempotency-Replayed", "true")
	}
	return c.JSON(status, apiExecutionSummary(ex, ""))
}

// definitionFor returns a workflow definition as p may see it: whole for admins; for
// everyone else with the values under secret-looking keys (headers such as Authorization,
// body fields, at any depth) and secret query parameters inside URLs masked.
func (h *WorkflowsHandler) definitionFor(p *auth.Principal, raw []byte) json.RawMessage {
	if p.Can(models.RoleAdmin) {
		// Webhook URLs masked even so; sent back masked, they keep the stored ones.
		return workflows.MaskWebhooks(raw)
	}
	return h.runs.Mask(raw)
}
