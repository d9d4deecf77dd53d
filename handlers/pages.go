package handlers

import (
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"lifeline/models"
	"lifeline/models/apperr"
	"lifeline/services/breaker"
	"lifeline/services/definition"
	"lifeline/services/engine"
	"lifeline/services/retry"
	"lifeline/views/i18n"
	"lifeline/views/pages"
)

func (s *Server) workflowsPage(c echo.Context) error {
	vm, err := s.workflowsVM(c)
	if err != nil {
		return err
	}
	vm.CreateForm = pages.WorkflowCreateForm{Action: s.url("workflows.create")}
	return render(c, http.StatusOK, pages.Workflows(s.page(c, "nav.workflows", "workflows"), vm))
}

func (s *Server) workflowsVM(c echo.Context) (pages.WorkflowsVM, error) {
	p, l := principal(c), localizer(c)
	wfs, stats, err := s.DB.ListWorkflows(c.Request().Context(), p.OrganizationID)
	if err != nil {
		return pages.WorkflowsVM{}, err
	}
	vm := pages.WorkflowsVM{CanCreate: p.Can(models.RoleAdmin)}
	for _, wf := range wfs {
		var def definition.Definition
		_ = json.Unmarshal(wf.Definition, &def)
		st := stats[wf.ID]
		row := pages.WorkflowRow{ID: wf.ID, Name: wf.Name, Description: wf.Description, URL: s.url("workflow", wf.ID),
			Version: wf.Version, Steps: len(def.Steps), LastStatus: st.LastStatus, Executions: st.Executions}
		row.LastRunAt, row.LastRunAtText = displayTimePtr(l, st.LastRunAt)
		vm.Rows = append(vm.Rows, row)
	}
	return vm, nil
}

// createWorkflow handles the "New workflow" form: 422 re-renders the form with field errors.
func (s *Server) createWorkflow(c echo.Context) error {
	p := principal(c)
	raw := c.FormValue("definition")
	wf, err := s.Workflows.Create(c.Request().Context(), p.OrganizationID, actorOf(p), []byte(raw))
	if me := invalid(err); me != nil {
		msg, fields := translated(localizer(c), me.Message, me.Fields)
		f := pages.WorkflowCreateForm{Action: s.url("workflows.create"), Definition: raw, Errors: fields, FormError: msg}
		if isHTMX(c) {
			return render(c, http.StatusUnprocessableEntity, pages.WorkflowCreateFormFragment(f, csrfToken(c)))
		}
		vm, verr := s.workflowsVM(c)
		if verr != nil {
			return verr
		}
		vm.CreateForm = f
		return render(c, http.StatusUnprocessableEntity, pages.Workflows(s.page(c, "nav.workflows", "workflows"), vm))
	}
	if err != nil {
		return err
	}
	return redirect(c, s.url("workflow", wf.ID))
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

func (s *Server) workflowPage(c echo.Context) error {
	return s.renderWorkflow(c, http.StatusOK, pages.StartForm{Input: "{}"})
}

func (s *Server) renderWorkflow(c echo.Context, status int, start pages.StartForm) error {
	ctx, l := c.Request().Context(), localizer(c)
	p := principal(c)
	id := c.Param("id")
	if err := checkID(id, "workflow"); err != nil {
		return err
	}
	wf, err := s.DB.GetWorkflow(ctx, p.OrganizationID, id)
	if err != nil {
		return err
	}
	shown := s.definitionFor(p, wf.Definition)
	var def definition.Definition
	if err := json.Unmarshal(shown, &def); err != nil {
		return err
	}
	tx := s.DB.Conn(ctx)
	wfPolicy, err := s.Engine.Policy(tx, p.OrganizationID, wf.ID, "")
	if err != nil {
		return err
	}
	spec := wfPolicy.Spec()
	policyJSON, _ := json.MarshalIndent(spec, "", "  ")
	vm := pages.WorkflowVM{ID: wf.ID, Name: wf.Name, Description: wf.Description, Version: fmt.Sprint(wf.Version),
		CreatedAt: rfc(wf.CreatedAt), CreatedAtText: displayTime(l, wf.CreatedAt), UnknownErrors: wf.UnknownErrors,
		PolicyJSON: string(policyJSON), DefinitionJSON: prettyJSON(models.JSON(shown)),
		ExecutionsURL: s.url("executions") + "?workflowId=" + wf.ID,
		BreakersURL:   s.url("breakers") + "?" + url.Values{"workflowId": {wf.ID}}.Encode()}
	breakers, err := s.DB.WorkflowBreakers(ctx, p.OrganizationID, wf.ID, breakerHosts(&def))
	if err != nil {
		return err
	}
	breakerStates := make(map[string]string, len(breakers))
	for _, b := range breakers {
		breakerStates[b.ScopeKey] = b.State
	}
	for i, st := range def.Steps {
		pol, err := s.Engine.Policy(tx, p.OrganizationID, wf.ID, st.ID)
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
	start.Action, start.CanStart = s.url("workflow.start", wf.ID), p.Can(models.RoleAccountant)
	vm.Start = start
	if p.Can(models.RoleAdmin) {
		vm.WebhookURL = strings.TrimRight(s.BaseURL, "/") + s.url("webhook", wf.WebhookToken)
	}
	rows, _, err := s.DB.ListExecutions(ctx, p.OrganizationID, models.ExecutionFilter{WorkflowID: wf.ID, Limit: 10})
	if err != nil {
		return err
	}
	vm.Recent = s.executionRows(localizer(c), rows, workflowSteps{wf.ID: def.Steps})
	return render(c, status, pages.Workflow(s.page(c, wf.Name, "workflows"), vm))
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

// startFromForm starts an execution from the workflow page's JSON input.
func (s *Server) startFromForm(c echo.Context) error {
	p := principal(c)
	id := c.Param("id")
	if err := checkID(id, "workflow"); err != nil {
		return err
	}
	input := c.FormValue("input")
	ex, _, err := s.Engine.Start(c.Request().Context(), engine.StartRequest{OrganizationID: p.OrganizationID, WorkflowID: id,
		Input: []byte(input), Trigger: engine.TriggerUI, Actor: actorOf(p)})
	if me := invalid(err); me != nil {
		msg, fields := translated(localizer(c), me.Message, me.Fields)
		f := pages.StartForm{Action: s.url("workflow.start", id), Input: input, Errors: fields, FormError: msg, CanStart: true}
		if isHTMX(c) {
			return render(c, http.StatusUnprocessableEntity, pages.StartFormFragment(f, csrfToken(c)))
		}
		return s.renderWorkflow(c, http.StatusUnprocessableEntity, f)
	}
	if err != nil {
		return err
	}
	return redirect(c, s.url("execution", ex.ID))
}

// executionRows are list rows; steps gives the current step's name (else its id shows).
func (s *Server) executionRows(l *i18n.Localizer, rows []models.ExecutionRow, steps workflowSteps) []pages.ExecutionRow {
	out := make([]pages.ExecutionRow, 0, len(rows))
	for _, r := range rows {
		row := pages.ExecutionRow{ID: r.ID, ShortID: shortID(r.ID), Subject: deref(r.Subject), URL: s.url("execution", r.ID), WorkflowName: r.WorkflowName,
			WorkflowURL: s.url("workflow", r.WorkflowID), Status: r.Status, Trigger: r.TriggerType,
			CreatedAt: rfc(r.CreatedAt), CreatedAtText: displayTime(l, r.CreatedAt),
			CurrentStep: steps.name(r.WorkflowID, deref(r.CurrentStepID)), CurrentStepID: deref(r.CurrentStepID),
			ErrorType: r.ErrorType, ErrorMessage: l.Text(r.ErrorMessage), Rollback: deref(r.RollbackStatus)}
		if r.FinishedAt != nil && r.StartedAt != nil {
			row.Duration = span(l, r.StartedAt, r.FinishedAt)
		}
		out = append(out, row)
	}
	return out
}

func options(values []string, selected string, label func(string) string) []pages.Option {
	out := make([]pages.Option, 0, len(values))
	for _, v := range values {
		out = append(out, pages.Option{Value: v, Label: label(v), Selected: v == selected})
	}
	return out
}

// statusText names statuses in the user's language, as the status badges do.
func statusText(l *i18n.Localizer) func(string) string {
	return func(s string) string { return l.TOr("status."+s, strings.ReplaceAll(s, "_", " ")) }
}

// executionsPage lists executions. A filter that is not valid answers 422 with the form's
// field messages (the table, for htmx, says what to fix).
func (s *Server) executionsPage(c echo.Context) error {
	p, l := principal(c), localizer(c)
	f, ferr := executionFilter(c)
	wfs, err := s.DB.Workflows(c.Request().Context(), p.OrganizationID)
	if err != nil {
		return err
	}
	status, table := http.StatusOK, pages.ExecutionTable{}
	vf := pages.ExecutionFilter{Action: s.url("executions"), Status: f.Status, WorkflowID: f.WorkflowID, Q: f.Q}
	var rows []models.ExecutionRow
	var next string
	if ferr == nil { // a cursor this server did not make is EINVALID too, shown as the filter's
		rows, next, ferr = s.DB.ListExecutions(c.Request().Context(), p.OrganizationID, f)
	}
	if me := invalid(ferr); me != nil {
		status = http.StatusUnprocessableEntity
		table.Error, table.FieldErrors = translated(l, me.Message, me.Fields)
		vf.Errors = table.FieldErrors
		raw := newListQuery(c)
		vf.Status, vf.WorkflowID, vf.Q = raw.shown("status"), raw.shown("workflowId"), raw.shown("q")
	} else if ferr != nil {
		return ferr
	} else {
		table.Rows = s.executionRows(l, rows, stepsOf(wfs))
		table.Filtered = f.Status != "" || f.WorkflowID != "" || f.Q != ""
		table.NextURL = nextPage(s.url("executions"), next, executionQuery(f))
	}
	if isHTMX(c) {
		return render(c, status, pages.ExecutionTableFragment(table))
	}
	vf.Statuses, vf.Workflows = options(models.ExecutionFilterStatuses, vf.Status, statusText(l)), workflowChoices(wfs, vf.WorkflowID)
	vm := pages.ExecutionsVM{Table: table, Filter: vf}
	return render(c, status, pages.Executions(s.page(c, "nav.executions", "executions"), vm))
}

// executionQuery is the query of a filtered executions list, as its form sends it.
func executionQuery(f models.ExecutionFilter) url.Values {
	q := url.Values{}
	set(q, "workflowId", f.WorkflowID)
	set(q, "status", f.Status)
	set(q, "q", f.Q)
	if f.Limit > 0 {
		q.Set("limit", strconv.Itoa(f.Limit))
	}
	return q
}

// set sets key to v unless v is empty.
func set(q url.Values, key, v string) {
	if v != "" {
		q.Set(key, v)
	}
}

func (s *Server) executionPage(c echo.Context) error {
	p := principal(c)
	d, err := s.loadExecution(c.Request().Context(), p.OrganizationID, c.Param("id"))
	if err != nil {
		return err
	}
	vm := s.executionVM(localizer(c), d)
	if d.DLQ != nil && d.DLQ.Status == models.DLQPending && p.Can(models.RoleAccountant) {
		// The failed execution offers the recovery actions of its dead letter (scenario 4).
		name := d.DLQ.FailedStepID
		if i := d.Def.Index(name); i >= 0 {
			name = d.Def.Steps[i].Title()
		}
		vm.Recovery = NewDLQActionsHandler(s, s.Engine, s.DB).recoveryVM(c, d.DLQ, d.Ex, d.Def, name, pages.RecoveryForm{})
		vm.Recovery.RollbackURL = "" // the page's rollback panel offers it
	}
	vm.Rollback = s.rollbackVM(c, d)
	if s.Notify != nil && p.Can(models.RoleAdmin) {
		vm.DeliveriesURL = s.url("notifications.deliveries") + "?" + url.Values{"executionId": {d.Ex.ID}}.Encode()
	}
	if vm.Rollback != nil && vm.Rollback.Status == models.RollingBack {
		vm.Live = true // follow the rollback as it runs
	}
	title := cmp.Or(vm.Subject, d.WorkflowName+" · "+shortID(d.Ex.ID))
	if isHTMX(c) {
		return render(c, http.StatusOK, pages.ExecutionBody(vm))
	}
	return render(c, http.StatusOK, pages.Execution(s.page(c, title, "executions"), vm))
}

func (s *Server) executionVM(l *i18n.Localizer, d *executionDetail) pages.ExecutionVM {
	ex := d.Ex
	vm := pages.ExecutionVM{ID: ex.ID, ShortID: shortID(ex.ID), Status: ex.Status, WorkflowName: d.WorkflowName,
		WorkflowURL: s.url("workflow", ex.WorkflowID), Trigger: ex.TriggerType, CorrelationID: ex.CorrelationID,
		CreatedAt: rfc(ex.CreatedAt), CreatedAtText: displayTime(l, ex.CreatedAt), InputJSON: prettyJSON(s.redacted(ex.Input)),
		Live: ex.Status == models.ExecPending || ex.Status == models.ExecRunning, RefreshURL: s.url("execution", ex.ID)}
	vm.FinishedAt, vm.FinishedAtText = displayTimePtr(l, ex.FinishedAt)
	vm.Duration = span(l, ex.StartedAt, ex.FinishedAt)
	if d.DLQ != nil {
		vm.DLQURL = s.url("dlq.item", d.DLQ.ID)
	}
	if ex.Subject != nil {
		vm.Subject = *ex.Subject
	}
	if ex.RetryOf != nil {
		vm.RetryOfURL, vm.RetryOfID = s.url("execution", *ex.RetryOf), shortID(*ex.RetryOf)
	}
	if d.RetriedAs != "" {
		vm.RetriedAsURL, vm.RetriedAsID = s.url("execution", d.RetriedAs), shortID(d.RetriedAs)
	}
	for _, sd := range d.Steps {
		if sd.Step.Handler && len(sd.Attempts) == 0 {
			continue // a handler runs only when a failure is handed to it
		}
		st := pages.StepVM{Index: sd.Index + 1, ID: sd.Step.ID, Name: sd.Step.Title(), Type: sd.Step.Type, Status: sd.Status(ex), Handler: sd.Step.Handler}
		for _, a := range sd.Attempts {
			av := pages.AttemptVM{Number: a.Attempt, Status: a.Status, ErrorType: deref(a.ErrorType), ErrorCode: deref(a.ErrorCode),
				ErrorMessage: l.Text(deref(a.ErrorMessage)), StackTrace: deref(a.StackTrace), InputJSON: prettyJSON(s.redacted(a.Input)),
				OutputJSON: prettyJSON(s.redacted(a.Output)), IdempotencyKey: a.IdempotencyKey, Duration: span(l, a.StartedAt, a.FinishedAt)}
			av.StartedAt, av.StartedAtText = displayTimePtr(l, a.StartedAt)
			av.FinishedAt, av.FinishedAtText = displayTimePtr(l, a.FinishedAt)
			if a.Status == models.StepPending {
				av.StartedAt, av.StartedAtText = rfc(a.ScheduledAt), l.T("attempt.scheduled", "Time", displayTime(l, a.ScheduledAt))
				st.NextRetryAt, st.NextRetryAtText = rfc(a.ScheduledAt), relativeTime(l, a.ScheduledAt)
				if deref(a.ErrorCode) == engine.CodeCircuitOpen {
					// Not an error: the step waits, unsent, for the breaker to let it through.
					av.BreakerWait = l.T("breakers.wait", "Time", displayTime(l, a.ScheduledAt), "Relative", until(l, a.ScheduledAt, time.Now()))
					av.BreakersURL = s.url("breakers") + "?" + url.Values{"workflowId": {ex.WorkflowID}}.Encode()
					av.ErrorType, av.ErrorCode, av.ErrorMessage = "", "", ""
					st.NextRetryAt, st.NextRetryAtText = "", ""
				}
			}
			st.Attempts = append(st.Attempts, av)
			// The failure shown on top: the one that sent the execution to the DLQ, else the
			// first one a handler took over.
			if a.Status == models.StepDLQ || (a.Status == models.StepFailed && vm.Failure == nil) {
				vm.Failure = &pages.FailureVM{StepID: sd.Step.ID, StepName: sd.Step.Title(), ErrorType: deref(a.ErrorType),
					ErrorCode: deref(a.ErrorCode), Message: l.Text(deref(a.ErrorMessage))}
			}
		}
		vm.Steps = append(vm.Steps, st)
	}
	vm.Steps = handlerLinks(d, vm.Steps, vm.Failure)
	if f := vm.Failure; f != nil && f.HandlerID == "" && ex.Status != models.ExecDLQPending && ex.Status != models.ExecFailed {
		f.Recovered = true // a replay took it up again
	}
	return vm
}

// handlerLinks links failed steps and the handlers that took their failures over (both
// ways), says where the execution went after each handler, and moves each handler that ran
// right after the step it handled. failure, when it is a handled one, names its handler.
func handlerLinks(d *executionDetail, steps []pages.StepVM, failure *pages.FailureVM) []pages.StepVM {
	link := func(id string) pages.StepLink {
		if id == "" {
			return pages.StepLink{}
		}
		return pages.StepLink{ID: id, Name: d.Def.Steps[d.Def.Index(id)].Title()}
	}
	handled, handedTo := d.handoffs()
	for i := range steps {
		sd := d.Steps[steps[i].Index-1]
		if !sd.Step.Handler || len(sd.Attempts) == 0 {
			continue
		}
		steps[i].Handles = link(handled[sd.Step.ID])
		if sd.Attempts[len(sd.Attempts)-1].Status == models.StepSucceeded {
			if n := d.Def.Index(sd.Step.Next); sd.Step.Next != "" && n >= 0 {
				steps[i].WentOn = pages.StepLink{ID: sd.Step.Next, Name: d.Def.Steps[n].Title()}
			} else {
				steps[i].EndedPartial = true
			}
		}
	}
	out := make([]pages.StepVM, 0, len(steps))
	for _, st := range steps {
		if st.Handler && st.Handles.ID != "" {
			continue // placed after the step it handles
		}
		st.HandedTo = link(handedTo[st.ID])
		out = append(out, st)
		if st.HandedTo.ID == "" {
			continue
		}
		for _, h := range steps {
			if h.ID == st.HandedTo.ID {
				out = append(out, h)
			}
		}
	}
	if failure != nil {
		if h := link(handedTo[failure.StepID]); h.ID != "" && d.Ex.Status != models.ExecDLQPending {
			failure.HandlerID, failure.HandlerName = h.ID, h.Name
		}
	}
	return out
}

// nextPage is the URL of the next page of a filtered list (the filter's query with the
// cursor), or "" at the end.
func nextPage(base, cursor string, query url.Values) string {
	if cursor == "" {
		return ""
	}
	q := url.Values{}
	for k, v := range query {
		q[k] = v
	}
	q.Set("cursor", cursor)
	return base + "?" + q.Encode()
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
