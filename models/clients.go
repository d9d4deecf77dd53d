package models

import (
	"context"
	"time"

	"lifeline/models/apperr"
)

// ClientDeadline is one of a client's obligations for a period that has work not done:
// how many executions, and the earliest and latest status.
type ClientDeadline struct {
	Obligation string
	Period     string
	DueOn      string
	// Open counts the executions not done (not succeeded: execNotDone); Failed those
	// dead-lettered.
	Open   int
	Failed int
}

// ClientOverview is what the office has open for one client: its open dead letters (newest
// first, at most MaxClientFailures), the money they hold up, and its deadlines with work not
// done (soonest first).
type ClientOverview struct {
	Client    string
	Failures  []DLQRow
	More      bool // more failures than listed
	Stuck     []CurrencySum
	Deadlines []ClientDeadline
	// LastSeen is when the client's newest execution started (zero when none).
	LastSeen time.Time
	// RiskWorkingDays is the organization's: work due within as many working days is at risk.
	RiskWorkingDays int
}

// MaxClientFailures bounds the failures a client overview lists.
const MaxClientFailures = 100

// execNotDone is work not done, as SQL: every execution that has not succeeded. A failed
// one that an on-failure handler took over, or that a person skipped past, has not filed
// anything; one a full retry replaced is counted with its successor (clients are counted
// once). dlqOpen is openDLQ. The values are written out: they are the predicates of the
// partial indexes of open work (migrations 00034 and 00039), which a query must repeat as
// they are for SQLite to use them.
const (
	execNotDone = "status <> '" + ExecSucceeded + "'"
	dlqOpen     = "status IN ('" + DLQPending + "', '" + DLQProcessing + "')"
)

// Client returns the organization's overview of client (its key, e.g. a NIP): ENOTFOUND when
// no execution of the organization is about it.
func (db *DB) Client(ctx context.Context, orgID, client string) (*ClientOverview, error) {
	var last []Execution
	if err := db.Conn(ctx).Select("id, created_at").Where("organization_id = ? AND client = ?", orgID, client).
		Order("created_at DESC").Limit(1).Find(&last).Error; err != nil {
		return nil, err
	}
	if len(last) == 0 {
		return nil, apperr.NotFound("client")
	}
	o := &ClientOverview{Client: client, LastSeen: last[0].CreatedAt}
	f := AboutFilter{Client: client}
	q := db.Conn(ctx).Table("dead_letter_queue").Select(dlqListColumns+", workflows.name AS workflow_name").
		Joins("JOIN workflows ON workflows.id = dead_letter_queue.workflow_id").
		Where("dead_letter_queue.organization_id = ? AND dead_letter_queue.status IN ?", orgID, openDLQ)
	q = f.where(q, "dead_letter_queue")
	if err := q.Order("COALESCE(dead_letter_queue.due_on, '" + noDue + "'), dead_letter_queue.created_at DESC, dead_letter_queue.id").
		Limit(MaxClientFailures + 1).Scan(&o.Failures).Error; err != nil {
		return nil, err
	}
	if len(o.Failures) > MaxClientFailures {
		o.Failures, o.More = o.Failures[:MaxClientFailures], true
	}
	var err error
	if o.Stuck, err = db.StuckMoney(ctx, orgID, f, ""); err != nil {
		return nil, err
	}
	if err := db.Conn(ctx).Table("workflow_executions").
		Select("obligation, period, due_on, COUNT(*) AS open, SUM(CASE WHEN status = ? THEN 1 ELSE 0 END) AS failed", ExecDLQPending).
		Where("organization_id = ? AND client = ? AND "+execNotDone+" AND due_on IS NOT NULL", orgID, client).
		Group("obligation, period, due_on").Order("due_on, obligation, period").Limit(100).Scan(&o.Deadlines).Error; err != nil {
		return nil, err
	}
	return o, nil
}
