package models

import (
	"context"
	"database/sql"
	"fmt"
	"math/big"
	"sort"
	"strconv"
	"strings"
	"time"
)

// DLQUrgency is the dead-letter list's order by urgency (issue 23): overdue first, then due
// today, at risk, later and none, and within a due date the largest amount first, then the
// newest. The bands follow from the due date itself (due dates are working days: overdue <
// today ≤ the at-risk horizon < later), so the order needs no clock and pages on one index
// (migration 00034): the due date as a number, negated, so every key runs the same way.
const DLQUrgency = "urgency"

// urgencyDueKey is the due date of a dead letter still to handle as a negated number
// (2026-11-25 → -20261125); a closed one's (resolved, skipped, expired: nothing to do by
// then) and none are the smallest, so last in a descending order (migration 00040).
const urgencyDueKey = "(CASE WHEN dead_letter_queue." + dlqOpen + " " +
	"THEN -CAST(REPLACE(COALESCE(dead_letter_queue.due_on, '" + noDue + "'), '-', '') AS INTEGER) ELSE " + noDueKey + " END)"

// noDueKey is urgencyDueKey's value for no due date.
const noDueKey = "-99991231"

var urgencySort = listSort{name: DLQUrgency, desc: true, keys: []sortKey{
	{urgencyDueKey, keyBig},
	{"COALESCE(dead_letter_queue.amount_minor, " + strconv.Itoa(noAmount) + ")", keyBig},
	{"dead_letter_queue.created_at", keyTime},
}}

// urgencyValues are a's values of the urgency order's keys, for a row of status made at
// created.
func (a About) urgencyValues(status string, created time.Time) []any {
	due := noDue
	if a.DueOn != nil && *a.DueOn != "" && (status == DLQPending || status == DLQProcessing) {
		due = *a.DueOn
	}
	n, _ := strconv.ParseInt(strings.ReplaceAll(due, "-", ""), 10, 64)
	amount := int64(noAmount)
	if a.AmountMinor != nil {
		amount = *a.AmountMinor
	}
	return []any{-n, amount, created}
}

// openDLQ are the statuses of the dead letters still to handle.
var openDLQ = []string{DLQPending, DLQProcessing}

// AtRiskDue is the open work of one obligation, period and due date.
type AtRiskDue struct {
	Obligation, Period, DueOn string
	// Clients counts the distinct clients (work without a client counts as one); Items the
	// rows.
	Clients, Items int
}

// AtRiskDeadLetters returns the organization's dead letters still to handle (pending or
// being processed) that are due on or before horizon (YYYY-MM-DD: overdue, due today and at
// risk), per obligation, period and due date, the soonest first (at most 50). It reads the
// counters of open work (openwork.go), whatever the number of items.
func (db *DB) AtRiskDeadLetters(ctx context.Context, orgID, horizon string) ([]AtRiskDue, error) {
	u, args := openWorkUnion(orgID, srcDeadLetters, false, "due_on <= ?", horizon)
	var out []AtRiskDue
	err := db.Conn(ctx).Raw(`SELECT obligation, period, due_on, CAST(SUM(clients) AS BIGINT) AS clients, CAST(SUM(items) AS BIGINT) AS items
FROM (`+u+`) w GROUP BY due_on, obligation, period HAVING SUM(items) > 0 ORDER BY due_on, obligation, period LIMIT 50`,
		args...).Scan(&out).Error
	return out, err
}

// GroupDue is what a failure group's items still to handle say of deadlines.
type GroupDue struct {
	GroupID string
	// NearestDue is the soonest due date of its items (YYYY-MM-DD; "" when none has one).
	NearestDue string
	// AtRisk counts its items due on or before the horizon.
	AtRisk int
	// Amount sums its items' amounts in minor units (of whatever currency: an order, not a
	// figure to show).
	Amount int64
}

// groupsDueSQL is GroupsDue's one query, the same on both databases: per group, its nearest
// due date is the first entry of its open items on idx_dlq_group_open_due (migration 00035)
// and its items at risk a range of it, and its amount is its own (OpenAmountMinor): what
// it reads of a group is its items at risk, whatever its size.
const groupsDueSQL = `SELECT g.id AS group_id,
  (SELECT MIN(d.due_on) FROM dead_letter_queue d WHERE d.organization_id = g.organization_id AND d.group_id = g.id
     AND d.due_on IS NOT NULL AND d.` + dlqOpen + `) AS nearest_due,
  (SELECT COUNT(*) FROM dead_letter_queue d WHERE d.organization_id = g.organization_id AND d.group_id = g.id
     AND d.due_on IS NOT NULL AND d.due_on <= @horizon AND d.` + dlqOpen + `) AS at_risk,
  g.open_amount_minor AS amount
FROM dlq_groups_now g WHERE g.organization_id = @org AND g.id IN @ids AND g.open_count > 0`

// GroupsDue returns, for each of the organization's groups ids that has items still to
// handle, their nearest due date, how many are due on or before horizon (YYYY-MM-DD), and
// their amounts' sum: one query for the page of groups (groupsDueSQL).
func (db *DB) GroupsDue(ctx context.Context, orgID string, ids []string, horizon string) (map[string]GroupDue, error) {
	out := make(map[string]GroupDue, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	var rows []struct {
		GroupID    string
		NearestDue *string
		AtRisk     int
		Amount     int64
	}
	if err := db.Conn(ctx).Raw(groupsDueSQL, sql.Named("org", orgID), sql.Named("ids", ids), sql.Named("horizon", horizon)).
		Scan(&rows).Error; err != nil {
		return nil, err
	}
	for _, r := range rows {
		out[r.GroupID] = GroupDue{GroupID: r.GroupID, NearestDue: deref(r.NearestDue), AtRisk: r.AtRisk, Amount: r.Amount}
	}
	return out, nil
}

// MaxDeadlineClients bounds the client keys OpenDeadlines lists per due date.
const MaxDeadlineClients = 10

// DueOpen is the open work (executions not succeeded: execNotDone) of one obligation and due
// date.
type DueOpen struct {
	Obligation, DueOn string
	// Open counts the executions; Clients the distinct clients among them, ClientKeys the
	// first MaxDeadlineClients of them in key order; Periods the periods they are for.
	Open, Clients int
	ClientKeys    []string
	Periods       []string
	// Amounts sums the amounts per currency, in minor units as exact decimal text (summed by
	// the database: never a float).
	Amounts map[string]string
}

// OpenDeadlines returns the organization's open work per obligation and due date, due from
// from to to (YYYY-MM-DD, inclusive), the soonest first: it reads the counters of open work
// (openwork.go), as many rows as there are obligations, periods, due dates and currencies,
// and each due date's first clients from the counters per client.
func (db *DB) OpenDeadlines(ctx context.Context, orgID, from, to string) ([]DueOpen, error) {
	const cond = "due_on >= ? AND due_on <= ?"
	u, args := openWorkUnion(orgID, srcExecutions, true, cond, from, to)
	var heads []struct {
		Obligation, DueOn string
		Open, Clients     int
	}
	if err := db.Conn(ctx).Raw(`SELECT obligation, due_on, CAST(SUM(items) AS BIGINT) AS open, CAST(SUM(clients) AS BIGINT) AS clients
FROM (`+u+`) w GROUP BY due_on, obligation HAVING SUM(items) > 0 ORDER BY due_on, obligation LIMIT 1000`, args...).
		Scan(&heads).Error; err != nil {
		return nil, err
	}
	out := make([]DueOpen, len(heads))
	at := make(map[[2]string]int, len(heads))
	for i, h := range heads {
		out[i] = DueOpen{Obligation: h.Obligation, DueOn: h.DueOn, Open: h.Open, Clients: h.Clients, Amounts: map[string]string{}}
		at[[2]string{h.Obligation, h.DueOn}] = i
	}
	if len(out) == 0 {
		return out, nil
	}
	// The money per currency and the periods: per due date, obligation, period and currency
	// (a handful of rows), the sums added across periods here, exactly; work without a
	// currency is in złoty.
	var parts []struct {
		Obligation, DueOn, Period, Currency string
		Priced                              int64
		Total                               string
	}
	if err := db.Conn(ctx).Raw(`SELECT obligation, due_on, period, currency, CAST(SUM(priced) AS BIGINT) AS priced,
  CAST(SUM(amount_minor) AS TEXT) AS total
FROM open_work WHERE organization_id = ? AND src = ? AND `+cond+`
GROUP BY due_on, obligation, period, currency HAVING SUM(items) > 0 ORDER BY period`, orgID, srcExecutions, from, to).
		Scan(&parts).Error; err != nil {
		return nil, err
	}
	totals := make([]map[string]*big.Int, len(out))
	for _, p := range parts {
		i, ok := at[[2]string{p.Obligation, p.DueOn}]
		if !ok {
			continue
		}
		d := &out[i]
		if p.Period != "" && (len(d.Periods) == 0 || d.Periods[len(d.Periods)-1] != p.Period) {
			d.Periods = append(d.Periods, p.Period)
		}
		if p.Priced == 0 {
			continue
		}
		sum, ok := new(big.Int).SetString(p.Total, 10)
		if !ok {
			return nil, fmt.Errorf("deadlines: the database summed %q", p.Total)
		}
		currency := p.Currency
		if currency == "" {
			currency = "PLN"
		}
		if totals[i] == nil {
			totals[i] = map[string]*big.Int{}
		}
		if prev := totals[i][currency]; prev != nil {
			sum.Add(sum, prev)
		}
		totals[i][currency] = sum
	}
	for i, byCurrency := range totals {
		for currency, sum := range byCurrency {
			out[i].Amounts[currency] = sum.String()
		}
	}
	// Each due date's first clients in key order: a short range of the counters per client
	// (idx_open_work_clients) per due date, in statements of at most 50 of them.
	const each = `SELECT * FROM (SELECT obligation, due_on, client FROM open_work_clients
  WHERE organization_id = ? AND src = ? AND obligation = ? AND due_on = ? AND client <> ''
  GROUP BY obligation, due_on, client HAVING SUM(items) > 0 ORDER BY client LIMIT ?) c`
	for lo := 0; lo < len(out); lo += 50 {
		hi := min(lo+50, len(out))
		var parts []string
		var args []any
		for _, d := range out[lo:hi] {
			parts = append(parts, each)
			args = append(args, orgID, srcExecutions, d.Obligation, d.DueOn, MaxDeadlineClients)
		}
		var clients []struct{ Obligation, DueOn, Client string }
		if err := db.Conn(ctx).Raw(strings.Join(parts, "\nUNION ALL\n"), args...).Scan(&clients).Error; err != nil {
			return nil, err
		}
		for _, c := range clients {
			if i, ok := at[[2]string{c.Obligation, c.DueOn}]; ok {
				out[i].ClientKeys = append(out[i].ClientKeys, c.Client)
			}
		}
	}
	for i := range out {
		sort.Strings(out[i].ClientKeys)
	}
	return out, nil
}
