package handlers

import (
	"cmp"
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"lifeline/models"
	"lifeline/services/classify"
	"lifeline/services/definition"
	"lifeline/services/executions"
	"lifeline/views/i18n"
	"lifeline/views/pages"
)

// dlqStore is what the dead-letter list needs (executions.Service).
type dlqStore interface {
	ListDLQ(ctx context.Context, orgID string, f models.DLQFilter) ([]models.DLQRow, string, error)
	DLQStatusCounts(ctx context.Context, orgID string) (map[string]int, error)
}

var _ dlqStore = (*executions.Service)(nil)

// expiringWithin is how close to its expiry an open dead letter is flagged.
const expiringWithin = 3 * 24 * time.Hour

// DLQHandler serves the dead-letter list: the page (GET /dlq) and the API (GET /api/v1/dlq),
// with the same query keys: workflowId, status, errorType, stepId, from, to (dates in the
// user's time zone), q, limit (1-200) and cursor. A value that is not valid is a 422 with
// a message per key, never ignored.
type DLQHandler struct {
	*chrome
	store dlqStore
	wfs   workflowLister
	// rules say whether accountants may close items (the bulk bar's resolve and skip).
	rules rulesReader
	// deadlines says what is at risk (the banner; nil: no banner).
	deadlines atRiskReader
	// Now is the clock of ages, expiries and the expiring flag.
	Now func() time.Time
}

// newDLQHandler returns the handler.
func newDLQHandler(ch *chrome, store dlqStore, wfs workflowLister, rules rulesReader) *DLQHandler {
	return &DLQHandler{chrome: ch, store: store, wfs: wfs, rules: rules, Now: time.Now}
}

// errorTypes are the classifier's nine error types (seed 000).
func errorTypes() []string {
	var out []string
	for _, t := range classify.Types() {
		out = append(out, string(t))
	}
	return out
}

// DLQFilterOf reads a dead-letter filter from query keys (the list's, and a bulk action's
// filter): an EINVALID error names every key that is not valid, in l's language.
func DLQFilterOf(l *i18n.Localizer, v url.Values) (models.DLQFilter, error) {
	q := queryOf(l, v)
	f := models.DLQFilter{WorkflowID: q.workflowID("workflowId"), Status: q.oneOf("status", models.DLQStatuses),
		ErrorType: q.oneOf("errorType", errorTypes()), StepID: q.stepID("stepId"), GroupID: q.groupID("groupId"), Q: q.search("q"),
		Sort: q.oneOf("sort", models.DLQSorts), Limit: q.limit(), Cursor: q.cursor(), AboutFilter: q.about()}
	f.From, f.To = q.days("lists.error.range")
	return f, q.err()
}

// dlqQuery is the query of a filtered list as its form sends it (dates as given).
func dlqQuery(f models.DLQFilter, from, to string) url.Values {
	q := url.Values{}
	set(q, "workflowId", f.WorkflowID)
	set(q, "status", f.Status)
	set(q, "errorType", f.ErrorType)
	set(q, "stepId", f.StepID)
	set(q, "groupId", f.GroupID)
	if !f.From.IsZero() {
		set(q, "from", from)
	}
	if !f.To.IsZero() {
		set(q, "to", to)
	}
	set(q, "q", f.Q)
	if f.Sort != models.DLQUrgency { // the page's default
		set(q, "sort", f.Sort)
	}
	if f.Limit > 0 {
		q.Set("limit", strconv.Itoa(f.Limit))
	}
	return q
}

// dlqColumns are the dead-letter list's sortable columns, each with its first order (the
// one a click on another column's header chooses) and its other one.
var dlqColumns = []sortColumn{{"subject", "subject", "-subject"}, {"retries", "-retries", "retries"},
	{"age", "age", "-age"}, {"expires", "expires", "-expires"}}

// List renders the page, or for htmx the table alone.
func (h *DLQHandler) List(c echo.Context) error {
	p, l, ctx := principal(c), localizer(c), c.Request().Context()
	v := c.QueryParams()
	f, ferr := DLQFilterOf(l, v)
	if v.Get("sort") == "" {
		f.Sort = models.DLQUrgency // the page puts urgent work first (the API's default stays "age")
	}
	vf := pages.DLQFilter{Action: h.url("dlq"), WorkflowID: f.WorkflowID, Status: f.Status, ErrorType: f.ErrorType, StepID: f.StepID,
		From: queryOf(l, v).shown("from"), To: queryOf(l, v).shown("to"), Q: f.Q}
	vm := pages.DLQVM{Filtered: f != (models.DLQFilter{Cursor: f.Cursor, Limit: f.Limit, Sort: f.Sort}), ProblemsURL: h.url("dlq.problems")}
	status := http.StatusOK
	wfs, err := h.wfs.All(ctx, p.OrganizationID)
	if err != nil {
		return err
	}
	steps := stepsOf(wfs)
	var rows []models.DLQRow
	var next string
	if ferr == nil { // a cursor this server did not make is EINVALID too, shown as the filter's
		rows, next, ferr = h.store.ListDLQ(ctx, p.OrganizationID, f)
	}
	if me := invalid(ferr); me != nil {
		status = http.StatusUnprocessableEntity
		vm.Error, vm.FieldErrors = translated(l, me.Message, me.Fields)
		vf.Errors = vm.FieldErrors
		raw := queryOf(l, v)
		vf.WorkflowID, vf.Status, vf.ErrorType, vf.StepID, vf.Q = raw.shown("workflowId"), raw.shown("status"), raw.shown("errorType"), raw.shown("stepId"), raw.shown("q")
	} else if ferr != nil {
		return ferr
	} else {
		for i := range rows {
			vm.Rows = append(vm.Rows, h.row(l, &rows[i], steps))
		}
		vm.NextURL = nextPage(h.url("dlq"), next, dlqQuery(f, vf.From, vf.To))
	}
	vf.Sort = cmp.Or(f.Sort, models.DLQSorts[0])
	vf.Active = countSet(vf.WorkflowID, vf.Status, vf.ErrorType, vf.StepID, vf.From, vf.To, vf.Q)
	vm.Sort = sortLinks(h.url("dlq"), dlqQuery(f, vf.From, vf.To), vf.Sort, dlqColumns)
	if ferr == nil && h.url("dlq.bulk.start") != "" && p.Can(models.RoleAccountant) {
		only, err := adminOnly(c, h.rules)
		if err != nil {
			return err
		}
		vm.Bulk = &pages.BulkBar{Action: h.url("dlq.bulk.start"), CSRF: csrfToken(c), CanSettle: !only, AdminOnly: only}
		for k, vals := range dlqQuery(f, vf.From, vf.To) {
			if k != "limit" && k != "status" && k != "sort" {
				vm.Bulk.Fields = append(vm.Bulk.Fields, pages.HiddenField{Name: k, Value: vals[0]})
			}
		}
		sort.Slice(vm.Bulk.Fields, func(i, j int) bool { return vm.Bulk.Fields[i].Name < vm.Bulk.Fields[j].Name })
	}
	// The live refresh (X-Live) takes the whole page: it swaps in the counts and the
	// navigation's badge too.
	if isHTMX(c) && c.Request().Header.Get("X-Live") == "" {
		return render(c, status, pages.DLQTableFragment(vm))
	}
	counts, err := h.store.DLQStatusCounts(ctx, p.OrganizationID)
	if err != nil {
		return err
	}
	if vm.Deadlines, err = deadlineAlerts(c, h.deadlines, h.url("dlq")); err != nil {
		return err
	}
	for _, st := range models.DLQStatuses {
		vm.Counts = append(vm.Counts, pages.StatusCount{Status: st, Label: l.N("dlq.count."+st, min(counts[st], models.DLQCountCap+1)), Count: countText(l, counts[st]),
			URL: h.url("dlq") + "?" + url.Values{"status": {st}}.Encode(), Active: st == vf.Status})
	}
	vf.Workflows = workflowChoices(wfs, vf.WorkflowID)
	vf.Statuses = options(models.DLQStatuses, vf.Status, statusText(l))
	vf.ErrorTypes = options(errorTypes(), vf.ErrorType, func(t string) string { return l.TOr("errortype."+t, t) })
	vf.Steps = stepChoices(wfs, steps, vf.WorkflowID, vf.StepID)
	vm.Filter = vf
	return render(c, status, pages.DLQ(h.page(c, "nav.dlq", "dlq"), vm))
}

// API answers a page of dead letters as JSON: {"items": […], "next": cursor or null}.
func (h *DLQHandler) API(c echo.Context) error {
	f, err := DLQFilterOf(localizer(c), c.QueryParams())
	if err != nil {
		return err
	}
	rows, next, err := h.store.ListDLQ(c.Request().Context(), principal(c).OrganizationID, f)
	if err != nil {
		return err
	}
	items := make([]apiDLQItem, 0, len(rows))
	for i := range rows {
		items = append(items, apiDLQ(&rows[i], false))
	}
	return c.JSON(http.StatusOK, map[string]any{"items": items, "next": nullIfEmpty(next)})
}

// row is one dead letter for the list.
func (h *DLQHandler) row(l *i18n.Localizer, r *models.DLQRow, steps workflowSteps) pages.DLQRow {
	now := h.Now()
	subject := deref(r.Subject)
	out := pages.DLQRow{ID: r.ID, URL: h.url("dlq.item", r.ID), ExecutionURL: h.url("execution", r.ExecutionID),
		WorkflowName: r.WorkflowName, WorkflowURL: h.url("workflow", r.WorkflowID),
		FailedStep: steps.name(r.WorkflowID, r.FailedStepID), FailedStepID: r.FailedStepID,
		ErrorType: r.ErrorType, ErrorMessage: l.Text(r.Reason), Reason: l.Text(r.Reason), RetryCount: r.RetryCount, Status: r.Status,
		Title: cmp.Or(subject, shortID(r.ExecutionID)), HasSubject: subject != "", ShortID: shortID(r.ExecutionID),
		CreatedAt: rfc(r.CreatedAt), CreatedAtText: displayTime(l, r.CreatedAt), Age: l.Relative(r.CreatedAt, now),
		ExpiresAt: rfc(r.ExpiresAt), ExpiresAtText: displayTime(l, r.ExpiresAt)}
	out.About = aboutLine(h.links, l, r.About, out.Title, now)
	if r.Status == models.DLQPending || r.Status == models.DLQProcessing {
		out.ExpiresIn = l.Relative(r.ExpiresAt, now)
		out.Expiring = r.ExpiresAt.Sub(now) <= expiringWithin
	}
	return out
}

// countText shows a status count; above the cap, "10 000+".
func countText(l *i18n.Localizer, n int) string {
	if n > models.DLQCountCap {
		return l.Number(models.DLQCountCap, 0) + "+"
	}
	return l.Number(float64(n), 0)
}

// workflowSteps are the steps of each workflow's current definition, by workflow id.
type workflowSteps map[string][]definition.Step

func stepsOf(wfs []models.Workflow) workflowSteps {
	out := make(workflowSteps, len(wfs))
	for _, wf := range wfs {
		var def definition.Definition
		if json.Unmarshal(wf.Definition, &def) == nil {
			out[wf.ID] = def.Steps
		}
	}
	return out
}

// name is a step's name, else its id (a step the current definition no longer has).
func (ws workflowSteps) name(workflowID, stepID string) string {
	for _, st := range ws[workflowID] {
		if st.ID == stepID {
			return st.Title()
		}
	}
	return stepID
}

func workflowChoices(wfs []models.Workflow, selected string) []pages.Option {
	out := make([]pages.Option, 0, len(wfs))
	for _, wf := range wfs {
		out = append(out, pages.Option{Value: wf.ID, Label: wf.Name, Selected: wf.ID == selected})
	}
	return out
}

// stepChoices are the failed-step filter's choices: the chosen workflow's steps in order,
// or every workflow's; a chosen step that no definition has any more stays.
func stepChoices(wfs []models.Workflow, ws workflowSteps, workflowID, selected string) []pages.Option {
	var out []pages.Option
	seen := map[string]bool{}
	for _, wf := range wfs {
		if workflowID != "" && wf.ID != workflowID {
			continue
		}
		for _, st := range ws[wf.ID] {
			if !seen[st.ID] {
				seen[st.ID] = true
				out = append(out, pages.Option{Value: st.ID, Label: st.Title(), Selected: st.ID == selected})
			}
		}
	}
	if selected != "" && !seen[selected] {
		out = append(out, pages.Option{Value: selected, Label: selected, Selected: true})
	}
	return out
}
