package models

import (
	"context"
	"encoding/base64"
	"lifeline/models/apperr"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"gorm.io/gorm"
)

// Every query here takes the organization id and never returns another organization's rows.

// GetWorkflow returns a workflow of the organization, or ENOTFOUND.
func (db *DB) GetWorkflow(ctx context.Context, orgID, id string) (*Workflow, error) {
	var wf Workflow
	if err := db.Conn(ctx).Where("organization_id = ? AND id = ?", orgID, id).First(&wf).Error; err != nil {
		if IsNotFound(err) {
			return nil, apperr.NotFound("workflow")
		}
		return nil, err
	}
	return &wf, db.openWorkflows(&wf)
}

// WorkflowByWebhookToken finds the workflow an inbound webhook token belongs to.
func (db *DB) WorkflowByWebhookToken(ctx context.Context, token string) (*Workflow, error) {
	var wf Workflow
	if err := db.Conn(ctx).Where("webhook_token = ?", token).First(&wf).Error; err != nil {
		if IsNotFound(err) {
			return nil, apperr.NotFound("webhook")
		}
		return nil, err
	}
	return &wf, db.openWorkflows(&wf)
}

// WorkflowStats summarizes a workflow's executions.
type WorkflowStats struct {
	WorkflowID string
	Executions int
	LastStatus string
	LastRunAt  *time.Time
}

// Workflows returns the organization's workflows by name.
func (db *DB) Workflows(ctx context.Context, orgID string) ([]Workflow, error) {
	var wfs []Workflow
	if err := db.Conn(ctx).Where("organization_id = ?", orgID).Order("name, id").Find(&wfs).Error; err != nil {
		return nil, err
	}
	for i := range wfs {
		if err := db.openWorkflows(&wfs[i]); err != nil {
			return nil, err
		}
	}
	return wfs, nil
}

// ListWorkflows returns the organization's workflows by name with their execution stats
// (two more queries over the executions: use Workflows when the stats are not shown).
func (db *DB) ListWorkflows(ctx context.Context, orgID string) ([]Workflow, map[string]WorkflowStats, error) {
	wfs, err := db.Workflows(ctx, orgID)
	if err != nil {
		return nil, nil, err
	}
	var counts []struct {
		WorkflowID string
		N          int
	}
	if err := db.Conn(ctx).Model(&Execution{}).Select("workflow_id, count(*) AS n").Where("organization_id = ?", orgID).
		Group("workflow_id").Scan(&counts).Error; err != nil {
		return nil, nil, err
	}
	var last []Execution
	if err := db.Conn(ctx).Where("organization_id = ? AND created_at = (SELECT max(e2.created_at) FROM workflow_executions e2 WHERE e2.workflow_id = workflow_executions.workflow_id)", orgID).
		Find(&last).Error; err != nil {
		return nil, nil, err
	}
	stats := map[string]WorkflowStats{}
	for _, c := range counts {
		stats[c.WorkflowID] = WorkflowStats{WorkflowID: c.WorkflowID, Executions: c.N}
	}
	for _, e := range last {
		s := stats[e.WorkflowID]
		at := e.CreatedAt
		s.LastStatus, s.LastRunAt = e.Status, &at
		stats[e.WorkflowID] = s
	}
	return wfs, stats, nil
}

// ExecutionFilter narrows ListExecutions. Zero fields do not filter.
type ExecutionFilter struct {
	Status     string // an execution status, or a rollback status (ExecutionFilterStatuses)
	WorkflowID string
	// Q is text the subject or an input value contains, ignoring case and diacritics
	// (search_text, folded by Fold; on PostgreSQL a trigram index answers it).
	Q string
	AboutFilter
	// Sort is the order, one of ExecutionSorts ("" is the first, "-started": newest first).
	Sort   string
	Cursor string // from a previous page's Next (of the same Sort)
	Limit  int
}

// executionSorts are the executions list's orders: "-started" newest first (by when it was
// created, which is when it was queued to start), "started" oldest first, "subject" A to Z
// (no subject first) and "-subject" Z to A.
var executionSorts = append([]listSort{
	{name: "-started", keys: []sortKey{{"workflow_executions.created_at", keyTime}}, desc: true},
	{name: "started", keys: []sortKey{{"workflow_executions.created_at", keyTime}}},
	{name: "subject", keys: []sortKey{{"COALESCE(workflow_executions.subject, '')", keyText}}},
	{name: "-subject", keys: []sortKey{{"COALESCE(workflow_executions.subject, '')", keyText}}, desc: true},
}, aboutSorts("workflow_executions")...)

// executionKeys are the values of s's keys for row r, for the next page's cursor.
func executionKeys(s listSort, r *ExecutionRow) []any {
	if v, ok := r.About.sortValue(s); ok {
		return []any{v}
	}
	if s.keys[0].expr == "workflow_executions.created_at" {
		return []any{r.CreatedAt}
	}
	return []any{deref(r.Subject)}
}

// ExecutionSorts are the names of the executions list's orders, the default first.
var ExecutionSorts = sortNames(executionSorts)

// ExecutionRow is an execution with its workflow's name and its open or final error. The
// list reads the columns it shows: Input, OriginalInput and RetryOverride stay empty.
type ExecutionRow struct {
	Execution
	WorkflowName string
	ErrorType    string `gorm:"-"`
	ErrorMessage string `gorm:"-"`
	ErrorStepID  string `gorm:"-"` // the step that failed
}

// executionListColumns are the columns ListExecutions reads (not the inputs, which may be large).
const executionListColumns = "workflow_executions.id, workflow_executions.organization_id, workflow_executions.workflow_id, " +
	"workflow_executions.workflow_version, workflow_executions.status, workflow_executions.trigger_type, " +
	"workflow_executions.correlation_id, workflow_executions.current_step_id, workflow_executions.created_by, " +
	"workflow_executions.subject, workflow_executions.retry_of, workflow_executions.dead_letter_id, " +
	"workflow_executions.started_at, workflow_executions.finished_at, workflow_executions.created_at, workflow_executions.updated_at, " +
	"workflow_executions.rollback_status, workflow_executions.client, workflow_executions.period, workflow_executions.obligation, " +
	"workflow_executions.due_on, workflow_executions.amount_minor, workflow_executions.currency"

// ListExecutions returns executions in f.Sort's order (by default newest first: created_at,
// then id), and the cursor of the next page ("" at the end). A cursor this server did not
// make for f.Sort is an apperr.EINVALID error on the "cursor" field, an unknown sort one on
// "sort".
func (db *DB) ListExecutions(ctx context.Context, orgID string, f ExecutionFilter) ([]ExecutionRow, string, error) {
	limit := clampLimit(f.Limit)
	q := db.Conn(ctx).Table("workflow_executions").
		Select(executionListColumns+", workflows.name AS workflow_name").
		Joins("JOIN workflows ON workflows.id = workflow_executions.workflow_id").
		Where("workflow_executions.organization_id = ?", orgID)
	switch {
	case slices.Contains(RollbackStatuses, f.Status):
		q = q.Where("workflow_executions.rollback_status = ?", f.Status)
	case f.Status != "":
		q = q.Where("workflow_executions.status = ?", f.Status)
	}
	if f.WorkflowID != "" {
		q = q.Where("workflow_executions.workflow_id = ?", f.WorkflowID)
	}
	if f.Q != "" {
		q = q.Where(db.contains("workflow_executions.search_text"), containsPattern(Fold(f.Q)))
	}
	q = f.AboutFilter.where(q, "workflow_executions")
	s, err := findSort(executionSorts, f.Sort)
	if err != nil {
		return nil, "", err
	}
	if s.name == executionSorts[0].name { // the cursors the list made before it had orders
		q, err = keyset(q, "workflow_executions", f.Cursor)
	} else {
		var vals []any
		var id string
		if vals, id, err = s.decode(f.Cursor); id != "" {
			q = s.after(q, "workflow_executions", vals, id)
		}
	}
	if err != nil {
		return nil, "", err
	}
	var rows []ExecutionRow
	if err := q.Order(s.orderBy("workflow_executions")).Limit(limit + 1).Scan(&rows).Error; err != nil {
		return nil, "", err
	}
	next := ""
	if len(rows) > limit {
		rows = rows[:limit]
		last := rows[limit-1]
		if s.name == executionSorts[0].name {
			next = encodeCursor(last.CreatedAt, last.ID)
		} else {
			next = s.encode(executionKeys(s, &last), last.ID)
		}
	}
	return rows, next, db.attachErrors(ctx, orgID, rows)
}

// keyset narrows q to the rows after the cursor in the order (created_at DESC, id DESC) of
// table. The first condition alone is an index range; the second breaks ties.
func keyset(q *gorm.DB, table, cursor string) (*gorm.DB, error) {
	at, id, err := decodeCursor(cursor)
	if err != nil || id == "" {
		return q, err
	}
	return q.Where(table+".created_at <= ? AND ("+table+".created_at < ? OR "+table+".id < ?)", at, at, id), nil
}

// contains is the condition "column contains the text" for a pattern made by
// containsPattern: ILIKE on PostgreSQL (a trigram index can answer it), LIKE on SQLite
// (case-insensitive for ASCII letters).
func (db *DB) contains(column string) string {
	if db.Dialect == Postgres {
		return column + " ILIKE ?"
	}
	return column + ` LIKE ? ESCAPE '\'`
}

// containsPattern is the LIKE pattern of "contains text": its %, _ and \ match themselves.
func containsPattern(text string) string {
	r := strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`)
	return "%" + r.Replace(text) + "%"
}

// attachErrors fills each row's latest unresolved error (one query for the page).
func (db *DB) attachErrors(ctx context.Context, orgID string, rows []ExecutionRow) error {
	if len(rows) == 0 {
		return nil
	}
	ids := make([]string, len(rows))
	for i, r := range rows {
		ids[i] = r.ID
	}
	var errs []ExecutionError
	if err := db.Conn(ctx).Where("organization_id = ? AND execution_id IN ? AND status IN ?", orgID, ids,
		[]string{ErrPending, ErrRetrying, ErrDeadLetter, ErrEscalated}).Order("updated_at").Find(&errs).Error; err != nil {
		return err
	}
	byExec := map[string]ExecutionError{}
	for _, e := range errs {
		byExec[e.ExecutionID] = e
	}
	for i := range rows {
		if e, ok := byExec[rows[i].ID]; ok {
			rows[i].ErrorType, rows[i].ErrorMessage, rows[i].ErrorStepID = e.ErrorType, e.ErrorMessage, e.StepID
		}
	}
	return nil
}

// GetExecution returns an execution of the organization, or ENOTFOUND.
func (db *DB) GetExecution(ctx context.Context, orgID, id string) (*Execution, error) {
	var ex Execution
	if err := db.Conn(ctx).Where("organization_id = ? AND id = ?", orgID, id).First(&ex).Error; err != nil {
		if IsNotFound(err) {
			return nil, apperr.NotFound("execution")
		}
		return nil, err
	}
	return &ex, nil
}

// Attempts returns every attempt of an execution in step order.
func (db *DB) Attempts(ctx context.Context, orgID, executionID string) ([]StepAttempt, error) {
	var out []StepAttempt
	err := db.Conn(ctx).Where("organization_id = ? AND execution_id = ?", orgID, executionID).Order("step_index, attempt").Find(&out).Error
	return out, err
}

// WorkflowVersionDef returns the definition of a workflow version.
func (db *DB) WorkflowVersionDef(ctx context.Context, orgID, workflowID string, version int) (JSON, error) {
	var v WorkflowVersion
	if err := db.Conn(ctx).Where("organization_id = ? AND workflow_id = ? AND version = ?", orgID, workflowID, version).First(&v).Error; err != nil {
		return nil, err
	}
	return db.Open(v.Definition, VersionAAD(workflowID, version))
}

func clampLimit(n int) int {
	if n <= 0 || n > 200 {
		return 50
	}
	return n
}

func encodeCursor(at time.Time, id string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(at.UTC().Format(time.RFC3339Nano) + "|" + id))
}

// maxCursor bounds the length of a cursor (encodeCursor makes about 90 characters).
const maxCursor = 200

// decodeCursor reads a cursor made by encodeCursor. An empty cursor is the first page (zero
// time, empty id). Anything else that encodeCursor could not have made (bad base64, no
// separator, a time that is not RFC 3339 or outside years 1-9999, an id that is not a
// canonical UUID) is an apperr.EINVALID error on the "cursor" field, the same on every database.
func decodeCursor(c string) (time.Time, string, error) {
	if c == "" {
		return time.Time{}, "", nil
	}
	bad := func(why string) (time.Time, string, error) {
		return time.Time{}, "", apperr.Invalid("The page cursor is not valid.",
			map[string]string{"cursor": why + "; use the \"next\" value of the previous page, or leave it out for the first page"})
	}
	if len(c) > maxCursor {
		return bad("is too long")
	}
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil {
		return bad("is not a cursor this server made")
	}
	at, id, ok := strings.Cut(string(b), "|")
	if !ok {
		return bad("is not a cursor this server made")
	}
	t, err := time.Parse(time.RFC3339Nano, at)
	if t = t.UTC(); err != nil || t.Year() < 1 || t.Year() > 9999 {
		return bad("has an invalid time")
	}
	if u, err := uuid.Parse(id); err != nil || len(id) != 36 || u.String() != id {
		return bad("has an invalid id")
	}
	return t, id, nil
}
