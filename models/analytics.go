package models

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"gorm.io/gorm"
)

// Error analytics (issue 24). The figures are computed in Go (services/analytics) from facts
// the database has already aggregated over the range: finished attempts by workflow, step,
// attempt number, error type and code; failures by day and error type; dead-letter arrivals
// and closures by day, workflow and how; arrivals by problem group; times to resolution as a
// histogram; executions that recovered by themselves. The facts of an organization are kept
// as narrow daily rollups (migration 00043) that RefreshAnalytics rebuilds for the recent
// days with INSERT … SELECT; AnalyticsFacts sums them with GROUP BY, so a report reads
// O(days × small dimensions) rows and returns fewer. A client filter reads the same
// SELECTs that fill the rollups, over the client's history (small and indexed), so both agree.

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

// resolutionBucketSQL is the SQL of the duration (whole seconds) a time to resolution col
// is counted as: itself under 10 minutes, its whole minute under a day, its whole hour
// beyond. The rollups keep closures per bucket (a histogram per day), so medians and p90s
// are exact to the second under 10 minutes and floored to the minute (the hour) above.
func resolutionBucketSQL(col string) string {
	return "CASE WHEN " + col + " < 600 THEN " + col + " WHEN " + col + " < 86400 THEN " + col + " - " + col + " % 60 ELSE " +
		col + " - " + col + " % 3600 END"
}

// AnalyticsAttempts counts the finished attempts of a range of one step of a workflow,
// attempt number and error (ErrorType "" for attempts that did not fail).
type AnalyticsAttempts struct {
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

// AnalyticsDayFailures counts a day's failed attempts of an error type.
type AnalyticsDayFailures struct {
	Day       string
	ErrorType string
	Failures  int
}

// AnalyticsDLQ counts a day's dead-letter arrivals (How "") or closures (How one of
// ClosedHows, on the day they closed) of a workflow.
type AnalyticsDLQ struct {
	Day        string
	WorkflowID string
	How        string
	Arrivals   int
	Closures   int
}

// AnalyticsGroup counts a problem group's dead-letter arrivals in a range.
type AnalyticsGroup struct {
	GroupID  string
	Arrivals int
}

// AnalyticsTotals are a span's failures, and its dead letters closed, all and by a replay.
type AnalyticsTotals struct {
	Failures int
	Closed   int
	ByReplay int
}

// AnalyticsResolution counts the closures of a range of a workflow, closed How, whose time
// to resolution was Seconds (a bucket: the whole second under 10 minutes, the whole
// minute under a day, the whole hour beyond).
type AnalyticsResolution struct {
	WorkflowID string
	How        string
	Seconds    int64
	Closures   int
}

// AnalyticsRecovery counts a range's executions (finished_at) of a workflow that had a
// failed attempt and ended without a dead letter: all (Ended) and those that succeeded.
type AnalyticsRecovery struct {
	WorkflowID string
	Ended      int
	Recovered  int
}

// AnalyticsFacts are the facts of a range.
type AnalyticsFacts struct {
	Attempts      []AnalyticsAttempts
	FailuresByDay []AnalyticsDayFailures
	DLQ           []AnalyticsDLQ
	Groups        []AnalyticsGroup
	// PreviousGroups are the groups' arrivals in AnalyticsScope's previous span, and
	// Previous its totals (nil: no previous span asked for).
	PreviousGroups []AnalyticsGroup
	Previous       *AnalyticsTotals
	Resolution     []AnalyticsResolution
	Recovery       []AnalyticsRecovery
	// AsOf is when the rollups read were computed (nil: never, or read live for a client).
	AsOf *time.Time
}

// AnalyticsScope narrows the facts: days From..To inclusive (YYYY-MM-DD), and optionally a
// workflow, a step, an error type (failures and dead letters only: the attempts that
// succeeded are kept, as rates need them) and a client (read live). PrevFrom..PrevTo, when
// set, is a span whose group arrivals are read too (the top reasons' trend).
type AnalyticsScope struct {
	From, To         string
	PrevFrom, PrevTo string
	WorkflowID       string
	StepID           string
	ErrorType        string
	Client           string
}

// AnalyticsFacts returns the organization's facts of scope, aggregated in the database: from
// the rollups, or, with a client, from the history itself.
func (db *DB) AnalyticsFacts(ctx context.Context, orgID string, s AnalyticsScope) (*AnalyticsFacts, error) {
	conn := db.Conn(ctx)
	out := &AnalyticsFacts{}
	src := func(table string) (string, []any) { return table + " t", nil }
	if s.Client != "" {
		live, err := db.liveSource(orgID, s)
		if err != nil {
			return nil, err
		}
		src = live
	}
	read := func(dest any, table, cols string, failures, steps bool, group string, from, to string, conds ...string) error {
		sql, args := src(table)
		where := append([]string{"t.organization_id = ?", "t.day >= ?", "t.day <= ?"}, conds...)
		args = append(args, orgID, from, to)
		if s.WorkflowID != "" {
			where, args = append(where, "t.workflow_id = ?"), append(args, s.WorkflowID)
		}
		if steps && s.StepID != "" {
			where, args = append(where, "t.step_id = ?"), append(args, s.StepID)
		}
		if steps && s.ErrorType != "" {
			if failures {
				where, args = append(where, "t.error_type = ?"), append(args, s.ErrorType)
			} else {
				where, args = append(where, "(t.error_type = ? OR t.error_type = '')"), append(args, s.ErrorType)
			}
		}
		q := "SELECT " + cols + " FROM " + sql + " WHERE " + strings.Join(where, " AND ")
		if group != "" {
			q += " GROUP BY " + group
		}
		if err := conn.Raw(q, args...).Scan(dest).Error; err != nil {
			return fmt.Errorf("analytics %s: %w", table, err)
		}
		return nil
	}
	if err := read(&out.Attempts, "analytics_attempts_daily", `t.workflow_id, t.step_id, t.attempt, t.error_type, t.error_code,
  SUM(t.attempts) AS attempts, SUM(t.succeeded) AS succeeded, SUM(t.retried) AS retried`, false, true,
		"t.workflow_id, t.step_id, t.attempt, t.error_type, t.error_code", s.From, s.To); err != nil {
		return nil, err
	}
	if err := read(&out.FailuresByDay, "analytics_attempts_daily", "t.day, t.error_type, SUM(t.attempts) AS failures", true, true,
		"t.day, t.error_type", s.From, s.To, "t.error_type <> ''"); err != nil {
		return nil, err
	}
	if err := read(&out.DLQ, "analytics_dlq_daily", "t.day, t.workflow_id, t.how, SUM(t.arrivals) AS arrivals, SUM(t.closures) AS closures",
		true, true, "t.day, t.workflow_id, t.how", s.From, s.To); err != nil {
		return nil, err
	}
	if err := read(&out.Groups, "analytics_groups_daily", "t.group_id, SUM(t.arrivals) AS arrivals", true, true, "t.group_id", s.From, s.To); err != nil {
		return nil, err
	}
	if s.PrevFrom != "" {
		if err := read(&out.PreviousGroups, "analytics_groups_daily", "t.group_id, SUM(t.arrivals) AS arrivals", true, true, "t.group_id",
			s.PrevFrom, s.PrevTo); err != nil {
			return nil, err
		}
		var failures, closed []AnalyticsTotals
		if err := read(&failures, "analytics_attempts_daily", "COALESCE(SUM(t.attempts), 0) AS failures", true, true,
			"", s.PrevFrom, s.PrevTo, "t.error_type <> ''"); err != nil {
			return nil, err
		}
		if err := read(&closed, "analytics_dlq_daily", `COALESCE(SUM(t.closures), 0) AS closed,
  COALESCE(SUM(CASE WHEN t.how = 'replay' THEN t.closures ELSE 0 END), 0) AS by_replay`, true, true, "", s.PrevFrom, s.PrevTo); err != nil {
			return nil, err
		}
		out.Previous = &AnalyticsTotals{}
		if len(failures) == 1 {
			out.Previous.Failures = failures[0].Failures
		}
		if len(closed) == 1 {
			out.Previous.Closed, out.Previous.ByReplay = closed[0].Closed, closed[0].ByReplay
		}
	}
	ttr, steps := "analytics_ttr_daily", false
	if s.StepID != "" || s.ErrorType != "" {
		ttr, steps = "analytics_ttr_steps_daily", true
	}
	if err := read(&out.Resolution, ttr, "t.workflow_id, t.how, t.seconds, SUM(t.closures) AS closures", true, steps,
		"t.workflow_id, t.how, t.seconds", s.From, s.To); err != nil {
		return nil, err
	}
	if err := read(&out.Recovery, "analytics_recovery_daily", "t.workflow_id, SUM(t.ended) AS ended, SUM(t.recovered) AS recovered",
		false, false, "t.workflow_id", s.From, s.To); err != nil {
		return nil, err
	}
	if s.Client != "" {
		return out, nil
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

// liveSource reads a client's facts from its history: each rollup's filling SELECT over the
// days of s (and its previous span), with the client's closures from the ledger and those
// not yet in it.
func (db *DB) liveSource(orgID string, s AnalyticsScope) (func(string) (string, []any), error) {
	first := s.From
	if s.PrevFrom != "" && s.PrevFrom < first {
		first = s.PrevFrom
	}
	from, err := time.Parse(time.DateOnly, first)
	if err != nil {
		return nil, fmt.Errorf("analytics from: %w", err)
	}
	to, err := time.Parse(time.DateOnly, s.To)
	if err != nil {
		return nil, fmt.Errorf("analytics to: %w", err)
	}
	w := analyticsWindow{org: orgID, from: from, until: to.AddDate(0, 0, 1), client: s.Client}
	return func(table string) (string, []any) {
		sql, args := db.rollupSelect(table, w, true)
		return "(" + sql + ") t", args
	}, nil
}

// analyticsWindow is the part of an organization's history a rollup SELECT reads: times in
// [from, until), of one client or of all ("").
type analyticsWindow struct {
	org         string
	from, until time.Time
	client      string
}

// dayExpr is the SQL of the UTC day (YYYY-MM-DD) of the timestamp column col.
func (db *DB) dayExpr(col string) string {
	if db.Dialect == Postgres {
		return "to_char(" + col + " AT TIME ZONE 'UTC', 'YYYY-MM-DD')"
	}
	return "strftime('%Y-%m-%d', " + col + ")"
}

// secondsSQL is the SQL of the whole seconds from timestamp a to timestamp b (at least 0).
func (db *DB) secondsSQL(a, b string) string {
	if db.Dialect == Postgres {
		return "GREATEST(0, CAST(FLOOR(EXTRACT(EPOCH FROM (" + b + " - " + a + "))) AS BIGINT))"
	}
	return "MAX(0, CAST(ROUND((julianday(" + b + ") - julianday(" + a + ")) * 86400000) AS INTEGER) / 1000)"
}

// closedAtSQL is when a closed dead letter d was closed: its resolution (resolved, skipped),
// or the retention pass's update (expired).
const closedAtSQL = "CASE WHEN d.status = 'expired' THEN d.updated_at ELSE COALESCE(d.resolved_at, d.updated_at) END"

// closureCols are the ledger's columns, in the order the closure SELECTs give them.
const closureCols = "organization_id, dead_letter_id, closed_at, how, workflow_id, step_id, error_type, client, seconds"

// closuresFromDLQ is the SELECT of the closures of w's dead letters that are closed now
// (the ledger's rows).
func (db *DB) closuresFromDLQ(w analyticsWindow) (string, []any) {
	q := `SELECT d.organization_id, d.id AS dead_letter_id, ` + closedAtSQL + ` AS closed_at,
  CASE WHEN d.status = 'resolved' AND re.status = 'SUCCEEDED' THEN 'replay' WHEN d.status = 'resolved' THEN 'resolved'
    WHEN d.status = 'skipped' THEN 'skipped' ELSE 'expired' END AS how,
  CAST(d.workflow_id AS TEXT) AS workflow_id, d.failed_step_id AS step_id, d.error_type, d.client,
  ` + db.secondsSQL("d.created_at", closedAtSQL) + ` AS seconds
FROM dead_letter_queue d LEFT JOIN workflow_executions re ON re.id = d.replay_execution_id
WHERE d.organization_id = ? AND d.status IN ('resolved', 'skipped', 'expired') AND d.updated_at >= ?
  AND ` + closedAtSQL + ` >= ? AND ` + closedAtSQL + ` < ?`
	args := []any{w.org, w.from, w.from, w.until}
	if w.client != "" {
		q, args = q+" AND d.client = ?", append(args, w.client)
	}
	return q, args
}

// closuresOf is the SELECT of w's closures: the ledger's, and, live, those not yet in it.
func (db *DB) closuresOf(w analyticsWindow, live bool) (string, []any) {
	q := "SELECT " + closureCols + " FROM analytics_dlq_closures WHERE organization_id = ? AND closed_at >= ? AND closed_at < ?"
	args := []any{w.org, w.from, w.until}
	if w.client != "" {
		q, args = q+" AND client = ?", append(args, w.client)
	}
	if live {
		dq, da := db.closuresFromDLQ(w)
		q, args = q+" UNION "+dq, append(args, da...)
	}
	return q, args
}

// rollupSelect is the SELECT that fills table (one of the daily rollups, its columns in
// rollupCols' order) from w's history.
func (db *DB) rollupSelect(table string, w analyticsWindow, live bool) (string, []any) {
	cc, ca := "", []any{}
	if w.client != "" { // x's organization too: the client indexes begin with it
		cc, ca = " AND x.organization_id = ? AND x.client = ?", []any{w.org, w.client}
	}
	win := func() []any { return append([]any{w.org, w.from, w.until}, ca...) }
	switch table {
	case "analytics_attempts_daily":
		day := db.dayExpr("s.finished_at")
		execs, args := "workflow_executions", []any{}
		if w.client != "" {
			// The client's executions first (its index), fenced by OFFSET 0 on PostgreSQL so
			// that the planner, which overestimates a step's attempts per execution, does not scan
			// every execution in parallel instead.
			fence := ""
			if db.Dialect == Postgres {
				fence = " OFFSET 0"
			}
			execs, args = "(SELECT id, workflow_id FROM workflow_executions WHERE organization_id = ? AND client = ?"+fence+")", []any{w.org, w.client}
		}
		return `SELECT s.organization_id, ` + day + ` AS day, CAST(x.workflow_id AS TEXT) AS workflow_id, s.step_id, s.attempt,
  COALESCE(s.error_type, '') AS error_type, COALESCE(s.error_code, '') AS error_code, COUNT(*) AS attempts,
  SUM(CASE WHEN s.status = 'SUCCEEDED' THEN 1 ELSE 0 END) AS succeeded,
  SUM(CASE WHEN s.status = 'RETRYING' THEN 1 ELSE 0 END) AS retried
FROM step_executions s JOIN ` + execs + ` x ON x.id = s.execution_id
WHERE s.organization_id = ? AND s.finished_at >= ? AND s.finished_at < ?
  AND s.status IN ('SUCCEEDED', 'RETRYING', 'FAILED', 'DLQ')
GROUP BY s.organization_id, ` + day + `, x.workflow_id, s.step_id, s.attempt, COALESCE(s.error_type, ''), COALESCE(s.error_code, '')`,
			append(args, w.org, w.from, w.until)
	case "analytics_dlq_daily":
		day, cday := db.dayExpr("x.created_at"), db.dayExpr("c.closed_at")
		cq, cargs := db.closuresOf(w, live)
		return `SELECT x.organization_id, ` + day + ` AS day, CAST(x.workflow_id AS TEXT) AS workflow_id, x.failed_step_id AS step_id,
  x.error_type, '' AS how, COUNT(*) AS arrivals, 0 AS closures
FROM dead_letter_queue x WHERE x.organization_id = ? AND x.created_at >= ? AND x.created_at < ?` + cc + `
GROUP BY x.organization_id, ` + day + `, x.workflow_id, x.failed_step_id, x.error_type
UNION ALL
SELECT c.organization_id, ` + cday + `, c.workflow_id, c.step_id, c.error_type, c.how, 0, COUNT(*)
FROM (` + cq + `) c GROUP BY c.organization_id, ` + cday + `, c.workflow_id, c.step_id, c.error_type, c.how`, append(win(), cargs...)
	case "analytics_groups_daily":
		day := db.dayExpr("x.created_at")
		return `SELECT x.organization_id, ` + day + ` AS day, CAST(x.workflow_id AS TEXT) AS workflow_id, x.failed_step_id AS step_id,
  x.error_type, CAST(x.group_id AS TEXT) AS group_id, COUNT(*) AS arrivals
FROM dead_letter_queue x WHERE x.organization_id = ? AND x.created_at >= ? AND x.created_at < ? AND x.group_id IS NOT NULL` + cc + `
GROUP BY x.organization_id, ` + day + `, x.workflow_id, x.failed_step_id, x.error_type, x.group_id`, win()
	case "analytics_ttr_daily", "analytics_ttr_steps_daily":
		day, bucket := db.dayExpr("c.closed_at"), resolutionBucketSQL("c.seconds")
		keys := "c.workflow_id, c.how"
		if table == "analytics_ttr_steps_daily" {
			keys = "c.workflow_id, c.step_id, c.error_type, c.how"
		}
		cq, cargs := db.closuresOf(w, live)
		return `SELECT c.organization_id, ` + day + ` AS day, ` + keys + `, ` + bucket + ` AS seconds, COUNT(*) AS closures
FROM (` + cq + `) c GROUP BY c.organization_id, ` + day + `, ` + keys + `, ` + bucket, cargs
	case "analytics_recovery_daily":
		day := db.dayExpr("x.finished_at")
		return `SELECT x.organization_id, ` + day + ` AS day, CAST(x.workflow_id AS TEXT) AS workflow_id, COUNT(*) AS ended,
  SUM(CASE WHEN x.status = 'SUCCEEDED' THEN 1 ELSE 0 END) AS recovered
FROM workflow_executions x
WHERE x.organization_id = ? AND x.finished_at >= ? AND x.finished_at < ?` + cc + `
  AND x.status IN ('SUCCEEDED', 'FAILED', 'PARTIAL') AND x.dead_letter_id IS NULL AND x.replayed_at IS NULL
  AND NOT EXISTS (SELECT 1 FROM dead_letter_queue d WHERE d.execution_id = x.id)
  AND EXISTS (SELECT 1 FROM step_executions s WHERE s.execution_id = x.id AND s.status IN ('RETRYING', 'FAILED', 'DLQ'))
GROUP BY x.organization_id, ` + day + `, x.workflow_id`, win()
	}
	panic("analytics: no rollup " + table)
}

// rollupCols are the daily rollups' columns, in the order their SELECTs give them.
var rollupCols = map[string]string{
	"analytics_attempts_daily":  "organization_id, day, workflow_id, step_id, attempt, error_type, error_code, attempts, succeeded, retried",
	"analytics_dlq_daily":       "organization_id, day, workflow_id, step_id, error_type, how, arrivals, closures",
	"analytics_groups_daily":    "organization_id, day, workflow_id, step_id, error_type, group_id, arrivals",
	"analytics_ttr_daily":       "organization_id, day, workflow_id, how, seconds, closures",
	"analytics_ttr_steps_daily": "organization_id, day, workflow_id, step_id, error_type, how, seconds, closures",
	"analytics_recovery_daily":  "organization_id, day, workflow_id, ended, recovered",
}

// rollupTables in the order a refresh rebuilds them.
var rollupTables = []string{"analytics_attempts_daily", "analytics_dlq_daily", "analytics_groups_daily", "analytics_ttr_daily",
	"analytics_ttr_steps_daily", "analytics_recovery_daily"}

// RefreshLookback is how far before its last run a refresh starts again: the day before, so
// a change committed around midnight, or late, is counted in its day.
const RefreshLookback = 24 * time.Hour

// RefreshAnalytics brings the organization's rollups up to now (the database clock) in one
// transaction, and records now as their freshness; it returns now. It adds to the closures'
// ledger the dead letters closed since the day of its last refresh less RefreshLookback (all
// its history the first time) that it does not hold yet, then rebuilds the daily rollups of
// those days, and only those, with INSERT … SELECT in the database. A closure stays in the
// ledger, so a dead letter reopened after it closed still counts as closed on the day it
// closed, even when that day is rebuilt.
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
		w := analyticsWindow{org: orgID, from: since, until: now.Add(time.Second)}
		cq, cargs := db.closuresFromDLQ(w)
		if err := tx.Exec("INSERT INTO analytics_dlq_closures ("+closureCols+") "+cq+" ON CONFLICT DO NOTHING", cargs...).Error; err != nil {
			return fmt.Errorf("analytics closures: %w", err)
		}
		day := AnalyticsDay(since)
		for _, t := range rollupTables {
			if err := tx.Exec("DELETE FROM "+t+" WHERE organization_id = ? AND day >= ?", orgID, day).Error; err != nil {
				return err
			}
			q, args := db.rollupSelect(t, w, false)
			if err := tx.Exec("INSERT INTO "+t+" ("+rollupCols[t]+") "+q, args...).Error; err != nil {
				return fmt.Errorf("analytics %s: %w", t, err)
			}
		}
		if err := tx.Exec("DELETE FROM analytics_refreshes WHERE organization_id = ?", orgID).Error; err != nil {
			return err
		}
		return tx.Exec("INSERT INTO analytics_refreshes (organization_id, refreshed_at) VALUES (?, ?)", orgID, now).Error
	})
	return now, err
}

// OrganizationIDs returns the ids of every organization (the analytics refresh visits each).
func (db *DB) OrganizationIDs(ctx context.Context) ([]string, error) {
	var ids []string
	return ids, db.Conn(ctx).Model(&Organization{}).Order("id").Pluck("id", &ids).Error
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
