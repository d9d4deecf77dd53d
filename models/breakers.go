package models

import (
	"context"
	"database/sql/driver"
	"fmt"
	"lifeline/models/apperr"
	"slices"
	"strings"
	"time"
)

// BreakerStates are the states of a circuit breaker (circuit_breaker_state.state), in the
// order the list shows them.
var BreakerStates = []string{"open", "half_open", "closed"}

// BreakerWindow is the sliding window over which a breaker counts failures (the engine's).
const BreakerWindow = 60 * time.Second

// BreakerListCap bounds ListBreakers. An organization has a breaker per step that ever
// failed and per host when host scope is on: hundreds, not millions, so the list is one
// page in a fixed order, not keyset pages.
const BreakerListCap = 1000

// BreakerFilter narrows ListBreakers. Zero fields do not filter.
type BreakerFilter struct {
	State string
	// WorkflowID keeps the workflow's step breakers, and the host breakers of Hosts (the
	// hosts its steps call with host scope), which trip it too.
	WorkflowID string
	Hosts      []string
}

// BreakerRow is a breaker with what the list shows beside it.
type BreakerRow struct {
	CircuitBreaker
	// WorkflowName is the name of the breaker's workflow ("" for a host breaker).
	WorkflowName string
	// InWindow counts the failures in the last BreakerWindow, by the database clock.
	InWindow int
	// LastFailureAt (of CircuitBreaker) is the latest failure: the engine writes a breaker's
	// row only when it changes state, so the latest failure counted in the window since is
	// taken from the failures themselves.
	// Waiting counts the attempts waiting on the breaker (PENDING with waiting_breaker_id).
	Waiting int
}

// ListBreakers returns the organization's breakers that match f (at most BreakerListCap):
// open first, then half-open, then closed, each the most recently failed first. It takes
// three queries whatever the number of breakers: the breakers with their workflows' names,
// the failures in the window and the waiting attempts, both grouped by breaker.
func (db *DB) ListBreakers(ctx context.Context, orgID string, f BreakerFilter) ([]BreakerRow, error) {
	q := db.Conn(ctx).Table("circuit_breaker_state").
		Select("circuit_breaker_state.*, COALESCE(workflows.name, '') AS workflow_name").
		Joins("LEFT JOIN workflows ON workflows.id = circuit_breaker_state.workflow_id").
		Where("circuit_breaker_state.organization_id = ?", orgID)
	if f.State != "" {
		q = q.Where("circuit_breaker_state.state = ?", f.State)
	}
	if f.WorkflowID != "" {
		if len(f.Hosts) > 0 {
			q = q.Where("(circuit_breaker_state.workflow_id = ? OR circuit_breaker_state.host IN ?)", f.WorkflowID, f.Hosts)
		} else {
			q = q.Where("circuit_breaker_state.workflow_id = ?", f.WorkflowID)
		}
	}
	var rows []BreakerRow
	err := q.Order("CASE circuit_breaker_state.state WHEN 'open' THEN 0 WHEN 'half_open' THEN 1 ELSE 2 END").
		Order("circuit_breaker_state.last_failure_at IS NULL, circuit_breaker_state.last_failure_at DESC, circuit_breaker_state.id").
		Limit(BreakerListCap).Scan(&rows).Error
	if err != nil {
		return nil, err
	}
	if err := db.breakerCounts(ctx, orgID, rows); err != nil {
		return nil, err
	}
	// Failures since the rows were written may make a breaker the more recently failed.
	rank := map[string]int{"open": 0, "half_open": 1}
	slices.SortStableFunc(rows, func(a, b BreakerRow) int {
		ra, ok := rank[a.State]
		if !ok {
			ra = 2
		}
		rb, ok := rank[b.State]
		if !ok {
			rb = 2
		}
		if ra != rb {
			return ra - rb
		}
		switch {
		case a.LastFailureAt == nil && b.LastFailureAt == nil:
		case a.LastFailureAt == nil:
			return 1
		case b.LastFailureAt == nil:
			return -1
		default:
			if c := b.LastFailureAt.Compare(*a.LastFailureAt); c != 0 {
				return c
			}
		}
		return strings.Compare(a.ID, b.ID)
	})
	return rows, nil
}

// GetBreaker returns one breaker of the organization with its counts, or ENOTFOUND.
func (db *DB) GetBreaker(ctx context.Context, orgID, id string) (*BreakerRow, error) {
	var rows []BreakerRow
	err := db.Conn(ctx).Table("circuit_breaker_state").
		Select("circuit_breaker_state.*, COALESCE(workflows.name, '') AS workflow_name").
		Joins("LEFT JOIN workflows ON workflows.id = circuit_breaker_state.workflow_id").
		Where("circuit_breaker_state.organization_id = ? AND circuit_breaker_state.id = ?", orgID, id).
		Limit(1).Scan(&rows).Error
	if err != nil {
		return nil, err
	}
	if len(rows) == 0 {
		return nil, apperr.NotFound("circuit breaker")
	}
	return &rows[0], db.breakerCounts(ctx, orgID, rows)
}

// WorkflowBreakers returns the breakers a workflow's steps pass: its step breakers and the
// host breakers of hosts (see BreakerFilter), in no particular order.
func (db *DB) WorkflowBreakers(ctx context.Context, orgID, workflowID string, hosts []string) ([]CircuitBreaker, error) {
	q := db.Conn(ctx).Where("organization_id = ?", orgID)
	if len(hosts) > 0 {
		q = q.Where("(workflow_id = ? OR host IN ?)", workflowID, hosts)
	} else {
		q = q.Where("workflow_id = ?", workflowID)
	}
	var out []CircuitBreaker
	return out, q.Find(&out).Error
}

// breakerCounts fills InWindow and Waiting of rows, and brings LastFailureAt up to the
// latest failure in the window, with one grouped query each.
func (db *DB) breakerCounts(ctx context.Context, orgID string, rows []BreakerRow) error {
	if len(rows) == 0 {
		return nil
	}
	ids := make([]string, len(rows))
	at := make(map[string]int, len(rows))
	for i, r := range rows {
		ids[i], at[r.ID] = r.ID, i
	}
	now, err := db.Now(ctx)
	if err != nil {
		return err
	}
	var failures []struct {
		ID   string
		N    int
		Last aggTime
	}
	if err := db.Conn(ctx).Model(&BreakerFailure{}).Select("breaker_id AS id, count(*) AS n, max(at) AS last").
		Where("breaker_id IN ? AND at > ?", ids, now.Add(-BreakerWindow)).Group("breaker_id").Scan(&failures).Error; err != nil {
		return err
	}
	for _, c := range failures {
		r := &rows[at[c.ID]]
		r.InWindow = c.N
		if last := c.Last.UTC(); !c.Last.IsZero() && (r.LastFailureAt == nil || last.After(*r.LastFailureAt)) {
			r.LastFailureAt = &last
		}
	}
	var counts []struct {
		ID string
		N  int
	}
	if err := db.Conn(ctx).Model(&StepAttempt{}).Select("waiting_breaker_id AS id, count(*) AS n").
		Where("organization_id = ? AND waiting_breaker_id IN ? AND status = ?", orgID, ids, StepPending).
		Group("waiting_breaker_id").Scan(&counts).Error; err != nil {
		return err
	}
	for _, c := range counts {
		rows[at[c.ID]].Waiting = c.N
	}
	return nil
}

// aggTime scans a time an aggregate (max) returns: a time on PostgreSQL; on SQLite its text,
// as the driver writes times, since an aggregate has no declared type to parse it by.
type aggTime struct{ time.Time }

// Value lets GORM take aggTime for a column type of its own (it is never written).
func (t aggTime) Value() (driver.Value, error) { return t.Time, nil }

func (t *aggTime) Scan(v any) error {
	switch x := v.(type) {
	case nil:
		t.Time = time.Time{}
		return nil
	case time.Time:
		t.Time = x
		return nil
	case []byte:
		return t.parse(string(x))
	case string:
		return t.parse(x)
	}
	return fmt.Errorf("scan %T as a time", v)
}

func (t *aggTime) parse(s string) error {
	for _, layout := range []string{"2006-01-02 15:04:05.999999999-07:00", time.RFC3339Nano, "2006-01-02 15:04:05.999999999"} {
		if p, err := time.Parse(layout, strings.TrimSuffix(s, "Z")); err == nil {
			t.Time = p
			return nil
		}
		if p, err := time.Parse(layout, s); err == nil {
			t.Time = p
			return nil
		}
	}
	return fmt.Errorf("scan %q as a time", s)
}
