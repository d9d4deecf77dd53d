package handlers

import (
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	"lifeline/models"
	"lifeline/services/auth"
	"lifeline/services/engine"
	"lifeline/services/retry"
	"lifeline/services/workflows"
	"lifeline/views/i18n"
)

// MaxBody bounds request bodies of the API and webhooks.
const MaxBody = 1 << 20

func readBody(c echo.Context) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(c.Request().Body, MaxBody+1))
	if err != nil {
		return nil, err
	}
	if len(b) > MaxBody {
		return nil, models.Invalid("request.toolarge", map[string]string{"body": "input.toolarge.field"})
	}
	return b, nil
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

// saveWorkflow reads a definition from the body, saves it with save and answers with the workflow.
func (s *Server) saveWorkflow(c echo.Context, status int, save func(*auth.Principal, []byte) (*models.Workflow, error)) error {
	body, err := readBody(c)
	if err != nil {
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
		return models.Invalid("This Idempotency-Key is reserved.",
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

// maxListLimit is the largest page a list serves; without "limit" it serves 50.
const maxListLimit = 200

// maxSearch bounds the search text q.
const maxSearch = 200

// stepIDPattern is a step id as definitions allow it.
var stepIDPattern = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_-]{0,99}$`)

// listQuery reads the query of a list page or list API: the keys are the same in the page's
// form, its links and the API (workflowId, status, q, limit, cursor, and a list's own).
// Each reader returns the value, or "" / zero and a field message (in the request's
// language) when it is not valid; err reports them all at once.
type listQuery struct {
	l      *i18n.Localizer
	v      url.Values
	fields map[string]string
}

func newListQuery(c echo.Context) *listQuery {
	return &listQuery{l: localizer(c), v: c.QueryParams(), fields: map[string]string{}}
}

func (q *listQuery) get(key string) string { return strings.TrimSpace(q.v.Get(key)) }

// oneOf reads a value that must be one of allowed.
func (q *listQuery) oneOf(key string, allowed []string) string {
	v := q.get(key)
	if v != "" && !oneOf(v, allowed) {
		q.fields[key] = q.l.T("lists.error.oneof", "Values", strings.Join(allowed, ", "))
		return ""
	}
	return v
}

// workflowID reads a workflow id (a UUID in its canonical form).
func (q *listQuery) workflowID(key string) string {
	v := q.get(key)
	if v != "" && checkID(v, "workflow") != nil {
		q.fields[key] = q.l.T("lists.error.workflow")
		return ""
	}
	return v
}

// stepID reads a step id.
func (q *listQuery) stepID(key string) string {
	v := q.get(key)
	if v != "" && !stepIDPattern.MatchString(v) {
		q.fields[key] = q.l.T("lists.error.step")
		return ""
	}
	return v
}

// search reads free text: at most maxSearch characters, no control characters.
func (q *listQuery) search(key string) string {
	v := q.get(key)
	if utf8.RuneCountInString(v) > maxSearch || !utf8.ValidString(v) || strings.IndexFunc(v, unicode.IsControl) >= 0 {
		q.fields[key] = q.l.T("lists.error.search", "Max", maxSearch)
		return ""
	}
	return v
}

// limit reads the page size: empty is the default (0), otherwise a whole number from 1 to
// maxListLimit.
func (q *listQuery) limit() int {
	v := q.get("limit")
	if v == "" {
		return 0
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > maxListLimit {
		q.fields["limit"] = q.l.T("lists.error.limit", "Max", maxListLimit)
		return 0
	}
	return n
}

// day reads a date (YYYY-MM-DD) as the start of that day in the user's time zone.
func (q *listQuery) day(key string) time.Time {
	v := q.get(key)
	if v == "" {
		return time.Time{}
	}
	t, err := time.ParseInLocation(time.DateOnly, v, q.l.Zone())
	if err != nil {
		q.fields[key] = q.l.T("lists.error.date")
		return time.Time{}
	}
	return t
}

// days reads the "from" and "to" dates: from the start of "from" to the end of "to".
func (q *listQuery) days() (from, to time.Time) {
	from, to = q.day("from"), q.day("to")
	if !to.IsZero() {
		to = to.AddDate(0, 0, 1)
	}
	if !from.IsZero() && !to.IsZero() && !from.Before(to) {
		q.fields["to"] = q.l.T("lists.error.range")
	}
	return from, to
}

// err is the EINVALID error with every field message, or nil.
func (q *listQuery) err() error {
	if len(q.fields) == 0 {
		return nil
	}
	return models.Invalid(q.l.T("lists.error.filter"), q.fields)
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
