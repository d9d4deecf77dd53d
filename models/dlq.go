package models

import (
	"context"
	"lifeline/models/apperr"
	"time"

	"gorm.io/gorm"
)

// DLQFilter narrows ListDLQ. Zero fields do not filter.
type DLQFilter struct {
	WorkflowID string
	Status     string
	ErrorType  string
	StepID     string    // the failed step's id
	GroupID    string    // the failure group's id
	From, To   time.Time // created_at in [From, To)
	// Q is text the subject, the reason or an input value contains, ignoring case and
	// diacritics (search_text, folded by Fold). On PostgreSQL a trigram index answers it.
	Q string
	AboutFilter
	// Sort is the order, one of DLQSorts ("" is the first, "age": newest first).
	Sort   string
	Cursor string // a previous page's next cursor (of the same Sort); "" for the first page
	Limit  int    // 1-200; anything else is 50
}

// dlqSorts are the dead-letter list's orders, named for the column and its direction as
// the reader sees it: "age" is youngest first (ages ascending), "-age" oldest first;
// "expires" soonest expiry first; "retries" fewest retries first (then oldest); "subject"
// A to Z (no subject first), each "-" the other way round.
var dlqSorts = append([]listSort{
	{name: "age", keys: []sortKey{{"dead_letter_queue.created_at", keyTime}}, desc: true},
	{name: "-age", keys: []sortKey{{"dead_letter_queue.created_at", keyTime}}},
	{name: "expires", keys: []sortKey{{"dead_letter_queue.expires_at", keyTime}}},
	{name: "-expires", keys: []sortKey{{"dead_letter_queue.expires_at", keyTime}}, desc: true},
	{name: "retries", keys: []sortKey{{"dead_letter_queue.retry_count", keyInt}, {"dead_letter_queue.created_at", keyTime}}},
	{name: "-retries", keys: []sortKey{{"dead_letter_queue.retry_count", keyInt}, {"dead_letter_queue.created_at", keyTime}}, desc: true},
	{name: "subject", keys: []sortKey{{"COALESCE(dead_letter_queue.subject, '')", keyText}}},
	{name: "-subject", keys: []sortKey{{"COALESCE(dead_letter_queue.subject, '')", keyText}}, desc: true},
}, append(aboutSorts("dead_letter_queue"), urgencySort)...)

// DLQSorts are the names of the dead-letter list's orders, the default first.
var DLQSorts = sortNames(dlqSorts)

// dlqKeys are a dead letter's values of sort s's keys.
func dlqKeys(s listSort, r *DLQRow) []any {
	if s.name == urgencySort.name {
		return r.About.urgencyValues(r.Status, r.CreatedAt)
	}
	if v, ok := r.About.sortValue(s); ok {
		return []any{v}
	}
	switch s.keys[0].expr {
	case "dead_letter_queue.expires_at":
		return []any{r.ExpiresAt}
	case "dead_letter_queue.retry_count":
		return []any{r.RetryCount, r.CreatedAt}
	case "dead_letter_queue.created_at":
		return []any{r.CreatedAt}
	}
	subject := ""
	if r.Subject != nil {
		subject = *r.Subject
	}
	return []any{subject}
}

// DLQRow is a dead letter with its workflow's name. ListDLQ reads only the dead letter's own
// columns (no original input or step states, no error record); GetDLQ reads everything,
// and the error record's code, message and trace.
type DLQRow struct {
	DeadLetter
	WorkflowName string
	ErrorCode    *string
	ErrorMessage string
	StackTrace   *string
}

// dlqListColumns are what the list shows and filters by: not the original input and step
// states, which can be large.
const dlqListColumns = "dead_letter_queue.id, dead_letter_queue.organization_id, dead_letter_queue.error_id, " +
	"dead_letter_queue.workflow_id, dead_letter_queue.execution_id, dead_letter_queue.failed_step_id, dead_letter_queue.status, " +
	"dead_letter_queue.manual_retry_count, dead_letter_queue.last_manual_retry_at, dead_letter_queue.expires_at, " +
	"dead_letter_queue.subject, dead_letter_queue.error_type, dead_letter_queue.reason, dead_letter_queue.retry_count, " +
	"dead_letter_queue.resolved_by, dead_letter_queue.resolved_at, dead_letter_queue.resolution_notes, dead_letter_queue.replay_execution_id, " +
	"dead_letter_queue.group_id, dead_letter_queue.created_at, dead_letter_queue.updated_at, " +
	"dead_letter_queue.client, dead_letter_queue.period, dead_letter_queue.obligation, dead_letter_queue.due_on, " +
	"dead_letter_queue.amount_minor, dead_letter_queue.currency"

// ListDLQ returns the organization's dead letters that match f in f.Sort's order (by
// default newest first: created_at, then id), and the next page's cursor ("" at the end).
// It reads the dead letters' own columns and their workflows' names, nothing else; every
// filter but the search and the failed step has an index that ends in the default order
// (migration 00007), and each other order has one of its own (migration 00022). A cursor
// this server did not make for f.Sort is an apperr.EINVALID error on the "cursor" field, an
// unknown sort one on "sort".
func (db *DB) ListDLQ(ctx context.Context, orgID string, f DLQFilter) ([]DLQRow, string, error) {
	limit := clampLimit(f.Limit)
	q := db.Conn(ctx).Table("dead_letter_queue").
		Select(dlqListColumns+", workflows.name AS workflow_name").
		Joins("JOIN workflows ON workflows.id = dead_letter_queue.workflow_id").
		Where("dead_letter_queue.organization_id = ?", orgID)
	q = db.dlqWhere(q, f)
	s, err := findSort(dlqSorts, f.Sort)
	if err != nil {
		return nil, "", err
	}
	if s.name == dlqSorts[0].name { // the cursors the list made before it had orders
		q, err = keyset(q, "dead_letter_queue", f.Cursor)
	} else {
		var vals []any
		var id string
		if vals, id, err = s.decode(f.Cursor); id != "" {
			q = s.after(q, "dead_letter_queue", vals, id)
		}
	}
	if err != nil {
		return nil, "", err
	}
	var rows []DLQRow
	if err := q.Order(s.orderBy("dead_letter_queue")).Limit(limit + 1).Scan(&rows).Error; err != nil {
		return nil, "", err
	}
	next := ""
	if len(rows) > limit {
		rows = rows[:limit]
		last := &rows[limit-1]
		if s.name == dlqSorts[0].name {
			next = encodeCursor(last.CreatedAt, last.ID)
		} else {
			next = s.encode(dlqKeys(s, last), last.ID)
		}
	}
	return rows, next, nil
}

// dlqWhere adds f's conditions (not the cursor) to a query over dead_letter_queue.
func (db *DB) dlqWhere(q *gorm.DB, f DLQFilter) *gorm.DB {
	if f.WorkflowID != "" {
		q = q.Where("dead_letter_queue.workflow_id = ?", f.WorkflowID)
	}
	if f.Status != "" {
		q = q.Where("dead_letter_queue.status = ?", f.Status)
	}
	if f.ErrorType != "" {
		q = q.Where("dead_letter_queue.error_type = ?", f.ErrorType)
	}
	if f.StepID != "" {
		q = q.Where("dead_letter_queue.failed_step_id = ?", f.StepID)
	}
	if f.GroupID != "" {
		q = q.Where("dead_letter_queue.group_id = ?", f.GroupID)
	}
	q = f.AboutFilter.where(q, "dead_letter_queue")
	if !f.From.IsZero() {
		q = q.Where("dead_letter_queue.created_at >= ?", f.From.UTC())
	}
	if !f.To.IsZero() {
		q = q.Where("dead_letter_queue.created_at < ?", f.To.UTC())
	}
	if f.Q != "" {
		q = q.Where(db.contains("dead_letter_queue.search_text"), containsPattern(Fold(f.Q)))
	}
	return q
}

// DLQCountCap bounds each figure of DLQStatusCounts, so that counting costs the same with a
// million dead letters as with a thousand.
const DLQCountCap = 10000

// DLQStatusCounts counts the organization's dead letters in each status (every status of
// DLQStatuses is in the map). A count above DLQCountCap is DLQCountCap+1: "more than".
func (db *DB) DLQStatusCounts(ctx context.Context, orgID string) (map[string]int, error) {
	var (
		sql  string
		args []any
	)
	for i, st := range DLQStatuses {
		if i > 0 {
			sql += " UNION ALL "
		}
		sql += "SELECT ? AS status, count(*) AS n FROM (SELECT 1 FROM dead_letter_queue WHERE organization_id = ? AND status = ? LIMIT ?) s" + st
		args = append(args, st, orgID, st, DLQCountCap+1)
	}
	var rows []struct {
		Status string
		N      int
	}
	if err := db.Conn(ctx).Raw(sql, args...).Scan(&rows).Error; err != nil {
		return nil, err
	}
	out := make(map[string]int, len(DLQStatuses))
	for _, st := range DLQStatuses {
		out[st] = 0
	}
	for _, r := range rows {
		out[r.Status] = r.N
	}
	return out, nil
}

// GetDLQ returns one dead letter of the organization with its error record's code, message
// and trace, or ENOTFOUND.
func (db *DB) GetDLQ(ctx context.Context, orgID, id string) (*DLQRow, error) {
	var rows []DLQRow
	err := db.Conn(ctx).Table("dead_letter_queue").
		Select("dead_letter_queue.*, workflows.name AS workflow_name, e.error_code, e.error_message, e.stack_trace").
		Joins("JOIN workflows ON workflows.id = dead_letter_queue.workflow_id").
		Joins("JOIN workflow_execution_errors e ON e.id = dead_letter_queue.error_id").
		Where("dead_letter_queue.organization_id = ? AND dead_letter_queue.id = ?", orgID, id).
		Limit(1).Scan(&rows).Error
	if err != nil {
		return nil, err
	}
	if len(rows) == 0 {
		return nil, apperr.NotFound("dead letter")
	}
	return &rows[0], nil
}

// DLQForExecution returns the newest dead letter of an execution, or nil.
func (db *DB) DLQForExecution(ctx context.Context, orgID, executionID string) (*DeadLetter, error) {
	var rows []DeadLetter
	err := db.Conn(ctx).Where("organization_id = ? AND execution_id = ?", orgID, executionID).Order("created_at DESC").Limit(1).Find(&rows).Error
	if err != nil || len(rows) == 0 {
		return nil, err
	}
	return &rows[0], nil
}

// PendingBadgeCap bounds CountDLQPending: the navigation badge shows "999+" beyond 999.
const PendingBadgeCap = 1000

// CountDLQPending counts the organization's dead letters waiting for someone, up to
// PendingBadgeCap (the navigation shows it on every page, so it must stay cheap).
func (db *DB) CountDLQPending(ctx context.Context, orgID string) (int, error) {
	var n int
	err := db.Conn(ctx).Raw("SELECT count(*) FROM (SELECT 1 FROM dead_letter_queue WHERE organization_id = ? AND status = ? LIMIT ?) s",
		orgID, DLQPending, PendingBadgeCap).Scan(&n).Error
	return n, err
}
