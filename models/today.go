package models

import (
	"context"
	"sort"
	"time"
)

// Today's page (issue 23): an accountant's morning on one screen.

// DueGroup is one obligation's period and due date with work not done: how many clients and
// executions, how many of them failed, and the money of the failed ones per currency.
type DueGroup struct {
	Obligation string
	Period     string
	DueOn      string
	Clients    int
	Open       int
	Failed     int
	Stuck      []CurrencySum `gorm:"-"`
}

// DueBy returns the organization's obligations with work not done (executions not
// succeeded: execNotDone) due on or before last (YYYY-MM-DD), the soonest first, at most
// limit of them, each with the money of its open dead letters per currency (the largest
// first, as StuckMoney orders them). It reads the counters of open work (openwork.go): as
// many rows as there are obligations, periods and due dates, whatever the number of items.
func (db *DB) DueBy(ctx context.Context, orgID, last string, limit int) ([]DueGroup, error) {
	const cond = "due_on <= ? AND obligation <> ''"
	u, args := openWorkUnion(orgID, srcExecutions, false, cond, last)
	var groups []DueGroup
	if err := db.Conn(ctx).Raw(`SELECT obligation, period, due_on, CAST(SUM(clients) AS BIGINT) AS clients,
  CAST(SUM(items) AS BIGINT) AS open, CAST(SUM(failed) AS BIGINT) AS failed
FROM (`+u+`) w GROUP BY due_on, obligation, period HAVING SUM(items) > 0 ORDER BY due_on, obligation, period LIMIT ?`,
		append(args, limit)...).Scan(&groups).Error; err != nil {
		return nil, err
	}
	if len(groups) == 0 {
		return groups, nil
	}
	// The money of every group's open failures in one query, per obligation, period and
	// currency, over the same due dates.
	var sums []struct {
		Obligation, Period, DueOn string
		CurrencySum
	}
	if err := db.Conn(ctx).Raw(`SELECT obligation, period, due_on, currency, CAST(SUM(amount_minor) AS BIGINT) AS minor,
  CAST(SUM(priced) AS BIGINT) AS count
FROM open_work WHERE organization_id = ? AND src = ? AND `+cond+`
GROUP BY due_on, obligation, period, currency HAVING SUM(priced) > 0 ORDER BY minor DESC, currency`,
		orgID, srcDeadLetters, last).Scan(&sums).Error; err != nil {
		return nil, err
	}
	at := make(map[[3]string]int, len(groups))
	for i, g := range groups {
		at[[3]string{g.Obligation, g.Period, g.DueOn}] = i
	}
	for _, s := range sums {
		if i, ok := at[[3]string{s.Obligation, s.Period, s.DueOn}]; ok {
			groups[i].Stuck = append(groups[i].Stuck, s.CurrencySum)
		}
	}
	return groups, nil
}

// ClientMoney is the money one client's open failures hold up, in one currency.
type ClientMoney struct {
	Client   string
	Currency string
	Minor    int64
	Count    int
}

// StuckByClient returns the clients whose open failures hold up the most money (per
// currency, the largest first), at most limit. It reads the counters of open money per
// client (openwork.go): a row per client and currency, whatever the number of items.
func (db *DB) StuckByClient(ctx context.Context, orgID string, limit int) ([]ClientMoney, error) {
	var rows []ClientMoney
	err := db.Conn(ctx).Raw(`SELECT client, currency, CAST(SUM(amount_minor) AS BIGINT) AS minor, CAST(SUM(items) AS BIGINT) AS count
FROM open_client_money WHERE organization_id = ? GROUP BY client, currency HAVING SUM(items) > 0
ORDER BY minor DESC, client LIMIT ?`, orgID, limit).Scan(&rows).Error
	return rows, err
}

// MyRequest is something a user asked an admin for about a dead letter: an "ask an admin"
// (Kind "ask") or an edited input waiting for approval or decided (Kind "change").
type MyRequest struct {
	Kind         string
	DeadLetterID string
	Subject      *string
	// Status is the request's: for an ask, the item's (pending while nobody acted); for a
	// change, pending, approved or rejected.
	Status string
	At     time.Time
}

// MyRequests returns what user asked admins for in the organization since since, the
// newest first, at most limit.
func (db *DB) MyRequests(ctx context.Context, orgID, userID string, since time.Time, limit int) ([]MyRequest, error) {
	var asks []struct {
		EntityID  string
		CreatedAt time.Time
	}
	if err := db.Conn(ctx).Table("audit_log").Select("entity_id, created_at").
		Where("organization_id = ? AND actor_id = ? AND action = ? AND created_at >= ?", orgID, userID, "dlq.admin_asked", since).
		Order("created_at DESC").Limit(limit).Scan(&asks).Error; err != nil {
		return nil, err
	}
	var changes []InputChangeRequest
	if err := db.Conn(ctx).Select("id, dead_letter_id, status, created_at").
		Where("organization_id = ? AND requested_by = ? AND created_at >= ?", orgID, userID, since).
		Order("created_at DESC").Limit(limit).Find(&changes).Error; err != nil {
		return nil, err
	}
	ids := make([]string, 0, len(asks)+len(changes))
	for _, a := range asks {
		ids = append(ids, a.EntityID)
	}
	for _, c := range changes {
		ids = append(ids, c.DeadLetterID)
	}
	byID := map[string]DeadLetter{}
	if len(ids) > 0 {
		var dls []DeadLetter
		if err := db.Conn(ctx).Select("id, subject, status").Where("organization_id = ? AND id IN ?", orgID, ids).Find(&dls).Error; err != nil {
			return nil, err
		}
		for _, d := range dls {
			byID[d.ID] = d
		}
	}
	var out []MyRequest
	for _, a := range asks {
		if d, ok := byID[a.EntityID]; ok {
			out = append(out, MyRequest{Kind: "ask", DeadLetterID: d.ID, Subject: d.Subject, Status: d.Status, At: a.CreatedAt})
		}
	}
	for _, c := range changes {
		if d, ok := byID[c.DeadLetterID]; ok {
			out = append(out, MyRequest{Kind: "change", DeadLetterID: d.ID, Subject: d.Subject, Status: c.Status, At: c.CreatedAt})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].At.After(out[j].At) })
	if len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}
