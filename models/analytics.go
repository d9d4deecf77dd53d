package models

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"time"

	"gorm.io/gorm"
)

// Error analytics (issue 24). The figures are computed in Go (services/analytics) from facts:
// daily counts of finished attempts, of dead letters' arrivals and closures (with the
// closures' times to resolution), and of executions that recovered by themselves. The facts
// of an organization are kept as daily rollups (migration 00043) that RefreshAnalytics
// recomputes for the recent days; AnalyticsFacts reads them. A client filter reads the same
// facts from the attempts, dead letters and executions themselves (one client's history is
// small and indexed), with the same code that fills the rollups, so both agree.

// Ways a dead letter is closed (AnalyticsDLQ.How).
const (
	ClosedByReplay = "replay"   // resolved by a manual replay that succeeded
	ClosedResolved = "resolved" // resolved by hand
	ClosedSkipped  = "skipped"
	ClosedExpired  = "expired"
)

// ClosedHows lists them in the order figures show them.
var ClosedHows = []string{ClosedByReplay, ClosedResolved, ClosedSkipped, ClosedExpired}

// AnalyticsDay formats t's UTC calendar day as the rollups key it.
func AnalyticsDay(t time.Time) string { return t.UTC().Format(time.DateOnly) }

// AnalyticsAttempts counts the finished attempts of a day (finished_at, UTC) of one step of a
// workflow, attempt number and error (ErrorType "" for attempts that did not fail).
type AnalyticsAttempts struct {
	Day        string
	WorkflowID string
	StepID     string
	Attempt    int
	ErrorType  string
	ErrorCode  string
	Attempts   int
	Succeeded  int
	// Retried counts the failed attempts the retry policy retried (status RETRYING).
	Retried int
}

// AnalyticsDLQ counts a day's dead-letter arrivals (How "") or closures (How one of
// ClosedHows, on the day they closed) of a workflow's step, error and group, with the
// closures' times to resolution (created → closed, whole seconds, ascending).
type AnalyticsDLQ struct {
	Day        string
	WorkflowID string
	StepID     string
	ErrorType  string
	ErrorCode  string
	GroupID    string
	How        string
	Arrivals   int
	Closures   int
	Seconds    []int64 `gorm:"-"`
}

// AnalyticsRecovery counts a day's executions (finished_at) of a workflow that had a failed
// attempt and ended without a dead letter: all (Ended) and those that succeeded.
type AnalyticsRecovery struct {
	Day        string
	WorkflowID string
	Ended      int
	Recovered  int
}

// AnalyticsFacts are the facts of a range.
type AnalyticsFacts struct {
	Attempts []AnalyticsAttempts
	DLQ      []AnalyticsDLQ
	Recovery []AnalyticsRecovery
	// AsOf is when the rollups read were computed (nil: never, or read live for a client).
	AsOf *time.Time
}

// AnalyticsScope narrows the facts: days From..To inclusive (YYYY-MM-DD), and optionally a
// workflow, a step, an error type (failures and dead letters only: the attempts that
// succeeded are kept, as rates need them) and a client (read live).
type AnalyticsScope struct {
	From, To   string
	WorkflowID string
	StepID     string
	ErrorType  string
	Client     string
}

// AnalyticsFacts returns the organization's facts of scope: from the rollups, or, with a
// client, from the history itself.
func (db *DB) AnalyticsFacts(ctx context.Context, orgID string, s AnalyticsScope) (*AnalyticsFacts, error) {
	if s.Client != "" {
		from, err := time.Parse(time.DateOnly, s.From)
		if err != nil {
			return nil, fmt.Errorf("analytics from: %w", err)
		}
		to, err := time.Parse(time.DateOnly, s.To)
		if err != nil {
			return nil, fmt.Errorf("analytics to: %w", err)
		}
		f, err := db.collectAnalytics(db.Conn(ctx), orgID, from, to.AddDate(0, 0, 1), s.Client)
		if err != nil {
			return nil, err
		}
		return f.narrow(s), nil
	}
	conn := db.Conn(ctx)
	out := &AnalyticsFacts{}
	where := func(q *gorm.DB, failures bool) *gorm.DB {
		q = q.Where("organization_id = ? AND day >= ? AND day <= ?", orgID, s.From, s.To)
		if s.WorkflowID != "" {
			q = q.Where("workflow_id = ?", s.WorkflowID)
		}
		if s.StepID != "" {
			q = q.Where("step_id = ?", s.StepID)
		}
		if s.ErrorType != "" {
			if failures {
				q = q.Where("error_type = ?", s.ErrorType)
			} else {
				q = q.Where("(error_type = ? OR error_type = '')", s.ErrorType)
			}
		}
		return q
	}
	if err := where(conn.Table("analytics_attempts_daily"), false).
		Select("day, workflow_id, step_id, attempt, error_type, error_code, attempts, succeeded, retried").
		Scan(&out.Attempts).Error; err != nil {
		return nil, err
	}
	var dlq []struct {
		AnalyticsDLQ
		Packed []byte `gorm:"column:seconds"`
	}
	if err := where(conn.Table("analytics_dlq_daily"), true).
		Select("day, workflow_id, step_id, error_type, error_code, group_id, how, arrivals, closures, seconds").
		Scan(&dlq).Error; err != nil {
		return nil, err
	}
	out.DLQ = make([]AnalyticsDLQ, len(dlq))
	for i, r := range dlq {
		secs, err := UnpackSeconds(r.Packed)
		if err != nil {
			return nil, err
		}
		out.DLQ[i] = r.AnalyticsDLQ
		out.DLQ[i].Seconds = secs
	}
	rq := conn.Table("analytics_recovery_daily").Where("organization_id = ? AND day >= ? AND day <= ?", orgID, s.From, s.To)
	if s.WorkflowID != "" {
		rq = rq.Where("workflow_id = ?", s.WorkflowID)
	}
	if err := rq.Select("day, workflow_id, ended, recovered").Scan(&out.Recovery).Error; err != nil {
		return nil, err
	}
	var at []time.Time
	if err := conn.Table("analytics_refreshes").Where("organization_id = ?", orgID).Limit(1).Pluck("refreshed_at", &at).Error; err != nil {
		return nil, err
	}
	if len(at) == 1 {
		t := at[0].UTC()
		out.AsOf = &t
	}
	return out, nil
}

// narrow keeps the facts of s's workflow, step and error type (as the rollups' query does).
func (f *AnalyticsFacts) narrow(s AnalyticsScope) *AnalyticsFacts {
	keep := func(wf, step string) bool {
		return (s.WorkflowID == "" || wf == s.WorkflowID) && (s.StepID == "" || step == s.StepID)
	}
	f.Attempts = slices.DeleteFunc(f.Attempts, func(r AnalyticsAttempts) bool {
		return !keep(r.WorkflowID, r.StepID) || (s.ErrorType != "" && r.ErrorType != "" && r.ErrorType != s.ErrorType)
	})
	f.DLQ = slices.DeleteFunc(f.DLQ, func(r AnalyticsDLQ) bool {
		return !keep(r.WorkflowID, r.StepID) || (s.ErrorType != "" && r.ErrorType != s.ErrorType)
	})
	f.Recovery = slices.DeleteFunc(f.Recovery, func(r AnalyticsRecovery) bool { return !keep(r.WorkflowID, "") })
	return f
}

// RefreshLookback is how far before its last run a refresh starts again: the day before, so
// a change committed around midnight, or late, is counted in its day.
const RefreshLookback = 24 * time.Hour

// RefreshAnalytics recomputes the organization's rollups of every day since the day of its
// last refresh less RefreshLookback (all its history the first time), up to now (the
// database clock), in one transaction, and records now as their freshness. It returns now.
// Days before that keep their rows: a dead letter reopened after that is still counted as
// closed on the day it closed.
func (db *DB) RefreshAnalytics(ctx context.Context, orgID string) (time.Time, error) {
	now, err := db.Now(ctx)
	if err != nil {
		return time.Time{}, err
	}
	now = now.UTC()
	err = db.Tx(ctx, func(tx *gorm.DB) error {
		var last []time.Time
		if err := tx.Table("analytics_refreshes").Where("organization_id = ?", orgID).Limit(1).Pluck("refreshed_at", &last).Error; err != nil {
			return err
		}
		since := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
		if len(last) == 1 {
			l := last[0].UTC().Add(-RefreshLookback)
			since = time.Date(l.Year(), l.Month(), l.Day(), 0, 0, 0, 0, time.UTC)
		}
		f, err := db.collectAnalytics(tx, orgID, since, now.Add(time.Second), "")
		if err != nil {
			return err
		}
		day := AnalyticsDay(since)
		for _, t := range []string{"analytics_attempts_daily", "analytics_dlq_daily", "analytics_recovery_daily"} {
			if err := tx.Exec("DELETE FROM "+t+" WHERE organization_id = ? AND day >= ?", orgID, day).Error; err != nil {
				return err
			}
		}
		if err := insertRollup(tx, "analytics_attempts_daily", len(f.Attempts), func(i int) map[string]any {
			r := f.Attempts[i]
			return map[string]any{"organization_id": orgID, "day": r.Day, "workflow_id": r.WorkflowID, "step_id": r.StepID, "attempt": r.Attempt,
				"error_type": r.ErrorType, "error_code": r.ErrorCode, "attempts": r.Attempts, "succeeded": r.Succeeded, "retried": r.Retried}
		}); err != nil {
			return err
		}
		if err := insertRollup(tx, "analytics_dlq_daily", len(f.DLQ), func(i int) map[string]any {
			r := f.DLQ[i]
			return map[string]any{"organization_id": orgID, "day": r.Day, "workflow_id": r.WorkflowID, "step_id": r.StepID, "error_type": r.ErrorType,
				"error_code": r.ErrorCode, "group_id": r.GroupID, "how": r.How, "arrivals": r.Arrivals, "closures": r.Closures, "seconds": PackSeconds(r.Seconds)}
		}); err != nil {
			return err
		}
		if err := insertRollup(tx, "analytics_recovery_daily", len(f.Recovery), func(i int) map[string]any {
			r := f.Recovery[i]
			return map[string]any{"organization_id": orgID, "day": r.Day, "workflow_id": r.WorkflowID, "ended": r.Ended, "recovered": r.Recovered}
		}); err != nil {
			return err
		}
		if err := tx.Exec("DELETE FROM analytics_refreshes WHERE organization_id = ?", orgID).Error; err != nil {
			return err
		}
		return tx.Exec("INSERT INTO analytics_refreshes (organization_id, refreshed_at) VALUES (?, ?)", orgID, now).Error
	})
	return now, err
}

// insertRollup inserts n rows of table in batches.
func insertRollup(tx *gorm.DB, table string, n int, row func(int) map[string]any) error {
	const batch = 500
	for i := 0; i < n; i += batch {
		rows := make([]map[string]any, 0, batch)
		for j := i; j < n && j < i+batch; j++ {
			rows = append(rows, row(j))
		}
		if err := tx.Table(table).Create(rows).Error; err != nil {
			return err
		}
	}
	return nil
}

// OrganizationIDs returns the ids of every organization (the analytics refresh visits each).
func (db *DB) OrganizationIDs(ctx context.Context) ([]string, error) {
	var ids []string
	return ids, db.Conn(ctx).Model(&Organization{}).Order("id").Pluck("id", &ids).Error
}

// dayExpr is the SQL of the UTC day (YYYY-MM-DD) of the timestamp column col.
func (db *DB) dayExpr(col string) string {
	if db.Dialect == Postgres {
		return "to_char(" + col + " AT TIME ZONE 'UTC', 'YYYY-MM-DD')"
	}
	return "strftime('%Y-%m-%d', " + col + ")"
}

// collectAnalytics reads the facts of [from, until) from the history, with conn; client ""
// is every client.
func (db *DB) collectAnalytics(conn *gorm.DB, orgID string, from, until time.Time, client string) (*AnalyticsFacts, error) {
	f := &AnalyticsFacts{}
	clientCond, args := "", []any{orgID, from, until}
	if client != "" {
		clientCond, args = " AND e.client = ?", append(args, client)
	}
	day := db.dayExpr("s.finished_at")
	if err := conn.Raw(`SELECT `+day+` AS day, e.workflow_id, s.step_id, s.attempt,
  COALESCE(s.error_type, '') AS error_type, COALESCE(s.error_code, '') AS error_code, COUNT(*) AS attempts,
  SUM(CASE WHEN s.status = 'SUCCEEDED' THEN 1 ELSE 0 END) AS succeeded,
  SUM(CASE WHEN s.status = 'RETRYING' THEN 1 ELSE 0 END) AS retried
FROM step_executions s JOIN workflow_executions e ON e.id = s.execution_id
WHERE s.organization_id = ? AND s.finished_at >= ? AND s.finished_at < ?
  AND s.status IN ('SUCCEEDED', 'RETRYING', 'FAILED', 'DLQ')`+clientCond+`
GROUP BY `+day+`, e.workflow_id, s.step_id, s.attempt, COALESCE(s.error_type, ''), COALESCE(s.error_code, '')`, args...).
		Scan(&f.Attempts).Error; err != nil {
		return nil, fmt.Errorf("analytics attempts: %w", err)
	}
	if err := db.collectDLQ(conn, orgID, from, until, client, f); err != nil {
		return nil, err
	}
	day = db.dayExpr("e.finished_at")
	if err := conn.Raw(`SELECT `+day+` AS day, e.workflow_id, COUNT(*) AS ended,
  SUM(CASE WHEN e.status = 'SUCCEEDED' THEN 1 ELSE 0 END) AS recovered
FROM workflow_executions e
WHERE e.organization_id = ? AND e.finished_at >= ? AND e.finished_at < ?`+clientCond+`
  AND e.status IN ('SUCCEEDED', 'FAILED', 'PARTIAL') AND e.dead_letter_id IS NULL AND e.replayed_at IS NULL
  AND NOT EXISTS (SELECT 1 FROM dead_letter_queue d WHERE d.execution_id = e.id)
  AND EXISTS (SELECT 1 FROM step_executions s WHERE s.execution_id = e.id AND s.status IN ('RETRYING', 'FAILED', 'DLQ'))
GROUP BY `+day+`, e.workflow_id`, args...).Scan(&f.Recovery).Error; err != nil {
		return nil, fmt.Errorf("analytics recovery: %w", err)
	}
	return f, nil
}

// dlqFact is a dead letter as the analytics read it.
type dlqFact struct {
	CreatedAt    time.Time
	WorkflowID   string
	StepID       string
	ErrorType    string
	ErrorCode    string
	GroupID      string
	Status       string
	ResolvedAt   *time.Time
	UpdatedAt    time.Time
	ReplayStatus *string
}

// how says how a closed dead letter was closed, and when.
func (d dlqFact) how() (string, time.Time) {
	switch d.Status {
	case DLQResolved:
		at := d.UpdatedAt
		if d.ResolvedAt != nil {
			at = *d.ResolvedAt
		}
		if d.ReplayStatus != nil && *d.ReplayStatus == ExecSucceeded {
			return ClosedByReplay, at
		}
		return ClosedResolved, at
	case DLQSkipped:
		at := d.UpdatedAt
		if d.ResolvedAt != nil {
			at = *d.ResolvedAt
		}
		return ClosedSkipped, at
	case DLQExpired:
		return ClosedExpired, d.UpdatedAt // the retention pass's time
	}
	return "", time.Time{}
}

// collectDLQ adds the arrivals and closures of [from, until) to f: the dead letters created,
// and those closed, in it (two reads: each by its own time).
func (db *DB) collectDLQ(conn *gorm.DB, orgID string, from, until time.Time, client string, f *AnalyticsFacts) error {
	sel := `SELECT d.created_at, d.workflow_id, d.failed_step_id AS step_id, d.error_type, COALESCE(er.error_code, '') AS error_code,
  COALESCE(CAST(d.group_id AS TEXT), '') AS group_id, d.status, d.resolved_at, d.updated_at, re.status AS replay_status
FROM dead_letter_queue d
LEFT JOIN workflow_execution_errors er ON er.id = d.error_id
LEFT JOIN workflow_executions re ON re.id = d.replay_execution_id
WHERE d.organization_id = ?`
	cc, ca := "", []any{}
	if client != "" {
		cc, ca = " AND d.client = ?", []any{client}
	}
	var arrived, closed []dlqFact
	if err := conn.Raw(sel+" AND d.created_at >= ? AND d.created_at < ?"+cc, append([]any{orgID, from, until}, ca...)...).Scan(&arrived).Error; err != nil {
		return fmt.Errorf("analytics dead letters: %w", err)
	}
	if err := conn.Raw(sel+` AND d.status IN ('resolved', 'skipped', 'expired')
  AND COALESCE(d.resolved_at, d.updated_at) >= ? AND COALESCE(d.resolved_at, d.updated_at) < ?`+cc, append([]any{orgID, from, until}, ca...)...).
		Scan(&closed).Error; err != nil {
		return fmt.Errorf("analytics closures: %w", err)
	}
	type key struct{ day, wf, step, typ, code, group, how string }
	at := map[key]int{}
	add := func(k key) *AnalyticsDLQ {
		i, ok := at[k]
		if !ok {
			i = len(f.DLQ)
			at[k] = i
			f.DLQ = append(f.DLQ, AnalyticsDLQ{Day: k.day, WorkflowID: k.wf, StepID: k.step, ErrorType: k.typ, ErrorCode: k.code, GroupID: k.group, How: k.how})
		}
		return &f.DLQ[i]
	}
	for _, d := range arrived {
		add(key{AnalyticsDay(d.CreatedAt), d.WorkflowID, d.StepID, d.ErrorType, d.ErrorCode, d.GroupID, ""}).Arrivals++
	}
	for _, d := range closed {
		how, when := d.how()
		if how == "" || when.Before(from) || !when.Before(until) {
			continue
		}
		r := add(key{AnalyticsDay(when), d.WorkflowID, d.StepID, d.ErrorType, d.ErrorCode, d.GroupID, how})
		r.Closures++
		r.Seconds = append(r.Seconds, max(0, int64(when.Sub(d.CreatedAt)/time.Second)))
	}
	for i := range f.DLQ {
		slices.Sort(f.DLQ[i].Seconds)
	}
	return nil
}

// PackSeconds encodes ascending non-negative seconds as unsigned varint deltas.
func PackSeconds(secs []int64) []byte {
	out := make([]byte, 0, len(secs)*2)
	var prev int64
	for _, s := range secs {
		out = binary.AppendUvarint(out, uint64(s-prev))
		prev = s
	}
	return out
}

// UnpackSeconds decodes PackSeconds.
func UnpackSeconds(b []byte) ([]int64, error) {
	var out []int64
	var prev int64
	for len(b) > 0 {
		d, n := binary.Uvarint(b)
		if n <= 0 {
			return nil, errors.New("analytics: a corrupt list of seconds")
		}
		prev += int64(d)
		out = append(out, prev)
		b = b[n:]
	}
	return out, nil
}

// BreakerTransition is an audited change of a breaker's state (circuit.opened,
// circuit.half_opened, circuit.closed), with the breaker's scope.
type BreakerTransition struct {
	BreakerID  string
	Action     string
	At         time.Time
	WorkflowID *string
	StepID     *string
	Host       *string
}

// BreakerTransitions returns the organization's breaker transitions from `from` until
// `until`, and each breaker's last one before from (so an opening that began before the
// range counts its time in it), oldest first, at most limit.
func (db *DB) BreakerTransitions(ctx context.Context, orgID string, from, until time.Time, limit int) ([]BreakerTransition, error) {
	var rows []struct {
		EntityID  string
		Action    string
		CreatedAt time.Time
	}
	err := db.Conn(ctx).Table("audit_log").Select("entity_id, action, created_at").
		Where("organization_id = ? AND entity_type = 'circuit_breaker_state' AND created_at >= ? AND created_at < ?", orgID, from.Add(-7*24*time.Hour), until).
		Where("action IN ?", []string{"circuit.opened", "circuit.half_opened", "circuit.closed"}).
		Order("created_at, id").Limit(limit).Scan(&rows).Error
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, r := range rows {
		if !slices.Contains(ids, r.EntityID) {
			ids = append(ids, r.EntityID)
		}
	}
	scopes := map[string]CircuitBreaker{}
	if len(ids) > 0 {
		var bs []CircuitBreaker
		if err := db.Conn(ctx).Where("organization_id = ? AND id IN ?", orgID, ids).Find(&bs).Error; err != nil {
			return nil, err
		}
		for _, b := range bs {
			scopes[b.ID] = b
		}
	}
	out := make([]BreakerTransition, 0, len(rows))
	for _, r := range rows {
		b, ok := scopes[r.EntityID]
		if !ok {
			continue // deleted with its workflow
		}
		out = append(out, BreakerTransition{BreakerID: r.EntityID, Action: r.Action, At: r.CreatedAt.UTC(), WorkflowID: b.WorkflowID, StepID: b.StepID, Host: b.Host})
	}
	return out, nil
}

// GroupTitles returns the titles of the organization's failure groups ids, by id.
func (db *DB) GroupTitles(ctx context.Context, orgID string, ids []string) (map[string]string, error) {
	out := make(map[string]string, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	var rows []struct{ ID, Title string }
	for chunk := range slices.Chunk(ids, 500) {
		if err := db.Conn(ctx).Table("dlq_groups").Select("id, title").Where("organization_id = ? AND id IN ?", orgID, chunk).Scan(&rows).Error; err != nil {
			return nil, err
		}
		for _, r := range rows {
			out[r.ID] = r.Title
		}
	}
	return out, nil
}
