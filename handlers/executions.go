package handlers

import (
	"cmp"
	"context"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"lifeline/models"
	"lifeline/models/apperr"
	"lifeline/services/definition"
	"lifeline/services/engine"
	"lifeline/services/executions"
	"lifeline/services/workflows"
	"lifeline/views/i18n"
	"lifeline/views/pages"
)

// executionReads reads executions as pages and the API show them (executions.Service).
type executionReads interface {
	Detail(ctx context.Context, orgID, id string) (*executions.Detail, error)
	List(ctx context.Context, orgID string, f models.ExecutionFilter) ([]models.ExecutionRow, string, error)
}

// workflowLister lists the organization's workflows, for the filter and the step names
// (workflows.Service).
type workflowLister interface {
	All(ctx context.Context, orgID string) ([]models.Workflow, error)
}

// recoveryPanel is the actions panel of a pending dead letter, which a failed execution's
// page shows too (*DLQActionsHandler).
type recoveryPanel interface {
	recoveryVM(c echo.Context, dl *models.DeadLetter, code string, ex *models.Execution, def *definition.Definition,
		failedName string, form pages.RecoveryForm) *pages.RecoveryVM
}

var (
	_ executionReads = (*executions.Service)(nil)
	_ workflowLister = (*workflows.Service)(nil)
	_ recoveryPanel  = (*DLQActionsHandler)(nil)
)

// statusCompensated is a step's status on the page once a rollback undid it.
const statusCompensated = "COMPENSATED"

// statusReplaced is a step's (and its attempt's) status on the page when its open breaker
// refused it and its fallback ran instead.
const statusReplaced = "REPLACED"

// ExecutionsHandler serves the executions: the filtered list and an execution's page (its
// steps and attempts, its failure's recovery actions, its rollback), and the same in the
// API.
type ExecutionsHandler struct {
	*chrome
	execs    executionReads
	wfs      workflowLister
	recovery recoveryPanel
	// waiting is a waiting execution's request as its page shows it, and open its id for
	// the API (both nil without an engine).
	waiting func(c echo.Context, d *executions.Detail) (*pages.WaitingPanel, error)
	open    func(ctx context.Context, ex *models.Execution) (string, error)
}

// newExecutionsHandler returns the handler.
func newExecutionsHandler(ch *chrome, execs executionReads, wfs workflowLister, recovery recoveryPanel) *ExecutionsHandler {
	return &ExecutionsHandler{chrome: ch, execs: execs, wfs: wfs, recovery: recovery}
}

// detail reads the execution the URL names.
func (h *ExecutionsHandler) detail(c echo.Context) (*executions.Detail, error) {
	id := c.Param("id")
	if err := checkID(id, "execution"); err != nil {
		return nil, err
	}
	return h.execs.Detail(c.Request().Context(), principal(c).OrganizationID, id)
}

// executionRows are list rows; steps gives the current step's name (else its id shows).
func executionRows(lk links, l *i18n.Localizer, rows []models.ExecutionRow, steps workflowSteps) []pages.ExecutionRow {
	out := make([]pages.ExecutionRow, 0, len(rows))
	for _, r := range rows {
		if r.ErrorStepID != "" { // a failure names the step that failed
			r.CurrentStepID = &r.ErrorStepID
		}
		row := pages.ExecutionRow{ID: r.ID, ShortID: shortID(r.ID), Subject: deref(r.Subject), URL: lk.url("execution", r.ID), WorkflowName: r.WorkflowName,
			WorkflowURL: lk.url("workflow", r.WorkflowID), Status: r.Status, Trigger: r.TriggerType,
			CreatedAt: rfc(r.CreatedAt), CreatedAtText: displayTime(l, r.CreatedAt),
			CurrentStep: steps.name(r.WorkflowID, deref(r.CurrentStepID)), CurrentStepID: deref(r.CurrentStepID),
			ErrorType: r.ErrorType, ErrorMessage: l.Text(r.ErrorMessage), Rollback: deref(r.RollbackStatus),
			About: aboutLine(lk, l, r.About, deref(r.Subject), time.Now())}
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

// List lists executions. A filter that is not valid answers 422 with the form's
// field messages (the table, for htmx, says what to fix).
func (h *ExecutionsHandler) List(c echo.Context) error {
	p, l := principal(c), localizer(c)
	f, ferr := executionFilter(c)
	wfs, err := h.wfs.All(c.Request().Context(), p.OrganizationID)
	if err != nil {
		return err
	}
	status, table := http.StatusOK, pages.ExecutionTable{}
	vf := pages.ExecutionFilter{Action: h.url("executions"), Status: f.Status, WorkflowID: f.WorkflowID, Q: f.Q}
	var rows []models.ExecutionRow
	var next string
	if ferr == nil { // a cursor this server did not make is EINVALID too, shown as the filter's
		rows, next, ferr = h.execs.List(c.Request().Context(), p.OrganizationID, f)
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
		table.Rows = executionRows(h.links, l, rows, stepsOf(wfs))
		table.Filtered = f.Status != "" || f.WorkflowID != "" || f.Q != ""
		table.NextURL = nextPage(h.url("executions"), next, executionQuery(f))
	}
	vf.Sort = cmp.Or(f.Sort, models.ExecutionSorts[0])
	vf.Active = countSet(vf.Status, vf.WorkflowID, vf.Q)
	table.Sort = sortLinks(h.url("executions"), executionQuery(f), vf.Sort, executionColumns)
	if isHTMX(c) {
		return render(c, status, pages.ExecutionTableFragment(table))
	}
	vf.Statuses, vf.Workflows = options(models.ExecutionFilterStatuses, vf.Status, statusText(l)), workflowChoices(wfs, vf.WorkflowID)
	vm := pages.ExecutionsVM{Table: table, Filter: vf}
	return render(c, status, pages.Executions(h.page(c, "nav.executions", "executions"), vm))
}

// executionQuery is the query of a filtered executions list, as its form sends it.
func executionQuery(f models.ExecutionFilter) url.Values {
	q := url.Values{}
	set(q, "workflowId", f.WorkflowID)
	set(q, "status", f.Status)
	set(q, "q", f.Q)
	if f.Sort != models.ExecutionSorts[0] {
		set(q, "sort", f.Sort)
	}
	if f.Limit > 0 {
		q.Set("limit", strconv.Itoa(f.Limit))
	}
	return q
}

// executionColumns are the executions list's sortable columns (see dlqColumns).
var executionColumns = []sortColumn{{"subject", "subject", "-subject"}, {"started", "-started", "started"}}

// set sets key to v unless v is empty.
func set(q url.Values, key, v string) {
	if v != "" {
		q.Set(key, v)
	}
}

// Show: GET /executions/{id}, an execution's page (for htmx, its body alone: it refreshes
// while the execution or its rollback runs).
func (h *ExecutionsHandler) Show(c echo.Context) error {
	p := principal(c)
	d, err := h.detail(c)
	if err != nil {
		return err
	}
	vm := h.executionVM(localizer(c), d)
	if d.DLQ != nil && d.DLQ.Status == models.DLQPending && p.Can(models.RoleAccountant) {
		// The failed execution offers the recovery actions of its dead letter (scenario 4).
		name := d.DLQ.FailedStepID
		if i := d.Def.Index(name); i >= 0 {
			name = d.Def.Steps[i].Title()
		}
		code := "" // the failed step's last attempt's
		for _, sd := range d.Steps {
			if sd.Step.ID == d.DLQ.FailedStepID && len(sd.Attempts) > 0 {
				code = deref(sd.Attempts[len(sd.Attempts)-1].ErrorCode)
			}
		}
		vm.Recovery = h.recovery.recoveryVM(c, d.DLQ, code, d.Ex, d.Def, name, pages.RecoveryForm{})
		vm.Recovery.RollbackURL = "" // the page's rollback panel offers it
	}
	vm.Rollback = rollbackVM(h.links, c, d)
	if h.waiting != nil {
		if vm.Waiting, err = h.waiting(c, d); err != nil {
			return err
		}
	}
	if u := h.url("notifications.deliveries"); u != "" && p.Can(models.RoleAdmin) { // the app runs with notifications
		vm.DeliveriesURL = u + "?" + url.Values{"executionId": {d.Ex.ID}}.Encode()
	}
	if vm.Rollback != nil && vm.Rollback.Status == models.RollingBack {
		vm.Live = true // follow the rollback as it runs
	}
	title := cmp.Or(vm.Subject, d.WorkflowName+" · "+shortID(d.Ex.ID))
	if isHTMX(c) {
		return render(c, http.StatusOK, pages.ExecutionBody(vm))
	}
	return render(c, http.StatusOK, pages.Execution(h.page(c, title, "executions"), vm))
}

// runningStep is the step of execution id that runs or waits for its next attempt, as the
// execution's page shows it (nil: none yet, or the execution is not the organization's):
// what a dead letter's page shows while its replay runs.
func (h *ExecutionsHandler) runningStep(c echo.Context, id string) (*pages.StepVM, error) {
	d, err := h.execs.Detail(c.Request().Context(), principal(c).OrganizationID, id)
	if models.IsNotFound(err) || apperr.ErrorCode(err) == apperr.ENOTFOUND {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	vm := h.executionVM(localizer(c), d)
	for i := range vm.Steps {
		if st := vm.Steps[i]; st.NextRetryAtText != "" || st.Status == models.StepRunning || (st.Status == models.StepPending && len(st.Attempts) > 0) {
			return &st, nil
		}
	}
	return nil, nil
}

// undoneSteps are the steps a rollback undid: those with a completed compensation.
func undoneSteps(comps []models.CompensationAction) map[string]bool {
	undone := map[string]bool{}
	for _, c := range comps {
		if deref(c.Status) == models.CompCompleted {
			undone[c.StepID] = true
		}
	}
	return undone
}

func (h *ExecutionsHandler) executionVM(l *i18n.Localizer, d *executions.Detail) pages.ExecutionVM {
	ex := d.Ex
	vm := pages.ExecutionVM{ID: ex.ID, ShortID: shortID(ex.ID), Status: ex.Status, WorkflowName: d.WorkflowName,
		WorkflowURL: h.url("workflow", ex.WorkflowID), Trigger: ex.TriggerType, CorrelationID: ex.CorrelationID,
		CreatedAt: rfc(ex.CreatedAt), CreatedAtText: displayTime(l, ex.CreatedAt), InputJSON: prettyJSON(ex.Input),
		Live: ex.Status == models.ExecPending || ex.Status == models.ExecRunning, RefreshURL: h.url("execution", ex.ID)}
	vm.FinishedAt, vm.FinishedAtText = displayTimePtr(l, ex.FinishedAt)
	// An execution's time includes its rollback: it ends when the last compensation did.
	end := ex.FinishedAt
	for _, c := range d.Compensations {
		if c.FinishedAt != nil && end != nil && c.FinishedAt.After(*end) {
			end = c.FinishedAt
		}
	}
	vm.Duration = span(l, ex.StartedAt, end)
	if d.DLQ != nil {
		vm.DLQURL = h.url("dlq.item", d.DLQ.ID)
	}
	if ex.Subject != nil {
		vm.Subject = *ex.Subject
	}
	if ex.RetryOf != nil {
		vm.RetryOfURL, vm.RetryOfID = h.url("execution", *ex.RetryOf), shortID(*ex.RetryOf)
	}
	if d.RetriedAs != "" {
		vm.RetriedAsURL, vm.RetriedAsID = h.url("execution", d.RetriedAs), shortID(d.RetriedAs)
	}
	undone := undoneSteps(d.Compensations)
	for _, sd := range d.Steps {
		if sd.Step.Handler && len(sd.Attempts) == 0 {
			continue // a handler runs only when a failure is handed to it
		}
		st := pages.StepVM{Index: sd.Index + 1, ID: sd.Step.ID, Name: sd.Step.Title(), Type: sd.Step.Type, Status: sd.Status(ex), Handler: sd.Step.Handler}
		if undone[sd.Step.ID] {
			st.Status = statusCompensated // it succeeded, and a rollback undid it
		}
		for _, a := range sd.Attempts {
			av := pages.AttemptVM{Number: a.Attempt, Label: attemptLabel(l, a.Attempt, sd.LastAttempt), Status: a.Status, ErrorType: deref(a.ErrorType), ErrorCode: deref(a.ErrorCode),
				ErrorMessage: l.Text(deref(a.ErrorMessage)), StackTrace: deref(a.StackTrace), InputJSON: prettyJSON(a.Input),
				OutputJSON: prettyJSON(a.Output), IdempotencyKey: a.IdempotencyKey, Duration: attemptDuration(l, &a)}
			// Attempts to the second: they are seconds apart.
			av.StartedAt, av.StartedAtText = secondsPtr(l, a.StartedAt)
			av.FinishedAt, av.FinishedAtText = secondsPtr(l, a.FinishedAt)
			if a.Status == models.StepPending {
				av.StartedAt, av.StartedAtText = rfc(a.ScheduledAt), l.T("attempt.scheduled", "Time", l.TimeSec(a.ScheduledAt))
				st.NextRetryAt = rfc(a.ScheduledAt)
				st.NextRetryAtText = nextAttemptText(l, a.Attempt, sd.LastAttempt, a.ScheduledAt, time.Now())
				if deref(a.ErrorCode) == engine.CodeCircuitOpen {
					// Not an error: the step waits, unsent, for the breaker to let it through.
					av.BreakerWait = l.T("breakers.wait", "Time", displayTime(l, a.ScheduledAt), "Relative", until(l, a.ScheduledAt, time.Now()))
					av.BreakersURL = h.url("breakers") + "?" + url.Values{"workflowId": {ex.WorkflowID}}.Encode()
					av.ErrorType, av.ErrorCode, av.ErrorMessage = "", "", ""
					st.NextRetryAt, st.NextRetryAtText = "", ""
				}
			}
			if deref(a.ErrorCode) == engine.CodeFallback {
				// Not a failure: its breaker was open and the step's fallback ran instead.
				av.FellBack = fellBack(l, d, sd.Step)
				av.Status, av.ErrorType, av.ErrorCode, av.ErrorMessage = statusReplaced, "", "", ""
				st.FellBack, st.Status = av.FellBack, statusReplaced
				st.Attempts = append(st.Attempts, av)
				continue
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

// fellBack says why step's fallback ran instead of it: "Usługa kroku „Import wyciągu”
// niedostępna (bezpiecznik otwarty) — uruchomiono krok zastępczy „Import z pliku”".
func fellBack(l *i18n.Localizer, d *executions.Detail, step definition.Step) string {
	name := step.FallbackStepID
	if i := d.Def.Index(name); i >= 0 {
		name = d.Def.Steps[i].Title()
	}
	return l.T("fallback.ran", "Step", step.Title(), "Fallback", name)
}

// attemptLabel names an attempt out of the last its run may make ("Attempt 2 of 5"), or alone
// when that is not known or the attempt is past it (the policy changed since).
func attemptLabel(l *i18n.Localizer, n, last int) string {
	if last > 0 && n <= last {
		return l.T("execution.attempt.of", "N", n, "Max", last)
	}
	return l.T("execution.attempt", "N", n)
}

// nextAttemptText says where a step's retries stand while its next attempt (number next,
// due at at) waits: "Attempt 2 of 5 · next at 08:14:07 · in 12 s", counting the attempts
// made; before the first, "Attempt 1 of 5 at 08:14:07 · in 12 s".
func nextAttemptText(l *i18n.Localizer, next, last int, at, now time.Time) string {
	if next > 1 && last > 0 && next <= last {
		return l.T("execution.nextattempt.of", "N", next-1, "Max", last, "Time", l.TimeSec(at), "Relative", l.RelativeSec(at, now))
	}
	return l.T("execution.nextattempt", "Number", attemptLabel(l, next, last), "Time", l.TimeSec(at), "Relative", l.RelativeSec(at, now))
}

// handlerLinks links failed steps and the handlers that took their failures over (both
// ways), says where the execution went after each handler, and moves each handler that ran
// right after the step it handled. failure, when it is a handled one, names its handler.
func handlerLinks(d *executions.Detail, steps []pages.StepVM, failure *pages.FailureVM) []pages.StepVM {
	link := func(id string) pages.StepLink {
		if id == "" {
			return pages.StepLink{}
		}
		return pages.StepLink{ID: id, Name: d.Def.Steps[d.Def.Index(id)].Title()}
	}
	handled, handedTo := d.Handoffs()
	stoodFor, fellBackTo := d.Fallbacks()
	for i := range steps {
		sd := d.Steps[steps[i].Index-1]
		if !sd.Step.Handler || len(sd.Attempts) == 0 {
			continue
		}
		steps[i].Handles = link(handled[sd.Step.ID])
		steps[i].StandsIn = link(stoodFor[sd.Step.ID])
		if sd.Attempts[len(sd.Attempts)-1].Status == models.StepSucceeded {
			if s := steps[i].StandsIn.ID; s != "" { // a fallback: the sequence went on after the step it replaced
				if n := d.Def.After(d.Def.Index(s)); n >= 0 {
					steps[i].WentOn = link(d.Def.Steps[n].ID)
				}
			} else if n := d.Def.Index(sd.Step.Next); sd.Step.Next != "" && n >= 0 {
				steps[i].WentOn = pages.StepLink{ID: sd.Step.Next, Name: d.Def.Steps[n].Title()}
			} else {
				steps[i].EndedPartial = true
			}
		}
	}
	out := make([]pages.StepVM, 0, len(steps))
	for _, st := range steps {
		if st.Handler && (st.Handles.ID != "" || st.StandsIn.ID != "") {
			continue // placed after the step it handles, or stood in for
		}
		st.HandedTo, st.FallbackTo = link(handedTo[st.ID]), link(fellBackTo[st.ID])
		out = append(out, st)
		for _, h := range steps {
			if h.ID != "" && (h.ID == st.HandedTo.ID || h.ID == st.FallbackTo.ID) {
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
		Q: q.search("q"), Sort: q.oneOf("sort", models.ExecutionSorts), Limit: q.limit(), Cursor: q.cursor(), AboutFilter: q.about()}
	return f, q.err()
}

// APIList: GET /api/v1/executions, filtered and paged as the page is.
func (h *ExecutionsHandler) APIList(c echo.Context) error {
	f, err := executionFilter(c)
	if err != nil {
		return err
	}
	rows, next, err := h.execs.List(c.Request().Context(), principal(c).OrganizationID, f)
	if err != nil {
		return err
	}
	items := []apiExecution{}
	for i := range rows {
		items = append(items, apiExecutionSummary(&rows[i].Execution, rows[i].WorkflowName))
	}
	return c.JSON(http.StatusOK, map[string]any{"items": items, "next": nullIfEmpty(next)})
}

// APIGet: GET /api/v1/executions/{id}, with its steps, attempts and compensations.
func (h *ExecutionsHandler) APIGet(c echo.Context) error {
	d, err := h.detail(c)
	if err != nil {
		return err
	}
	out := apiExecutionDetail(d)
	if h.open != nil {
		if out.InterventionID, err = h.open(c.Request().Context(), d.Ex); err != nil {
			return err
		}
	}
	return c.JSON(http.StatusOK, out)
}

func nullIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}
