package engine

import (
	"database/sql"
	"errors"

	"lifeline/models"
	"lifeline/services/fingerprint"
)

// A failure joins its group (transitions_group.go): JoinGroup and its statements.

// GroupJoin is what JoinGroup did.
type GroupJoin struct {
	GroupID string
	// New: the group was made for this item. Reopened: it was resolved and this item
	// reopened it. Muted: it is muted (the item joins it silently).
	New, Reopened, Muted bool
	// Arrivals counts the items that ever joined the group, this one included (0 on
	// PostgreSQL for a failure that joined an open group: not read, see joinDelta); Title
	// is the group's title (the reason with its variable parts as placeholders).
	Arrivals int
	Title    string
}

// joinGroupSQL is JoinGroup's one statement, the same on both databases: the group of the
// fingerprint is made, or it counts one more arrival; a resolved group reopens (remembering
// when it was resolved), a muted one whose time has passed opens.
const joinGroupSQL = newGroupSQL + `
ON CONFLICT (organization_id, fingerprint) DO UPDATE SET
  arrivals = dlq_groups.arrivals + 1,
  pending_count = dlq_groups.pending_count + excluded.pending_count,
  processing_count = dlq_groups.processing_count + excluded.processing_count,
  closed_count = dlq_groups.closed_count + excluded.closed_count,
  open_count = dlq_groups.open_count + excluded.open_count,
  open_amount_minor = dlq_groups.open_amount_minor + excluded.open_amount_minor,
  last_seen_at = CASE WHEN excluded.last_seen_at > dlq_groups.last_seen_at THEN excluded.last_seen_at ELSE dlq_groups.last_seen_at END,
  state = CASE WHEN dlq_groups.state = 'resolved' OR (dlq_groups.state = 'muted' AND dlq_groups.muted_until <= excluded.updated_at)
    THEN 'open' ELSE dlq_groups.state END,
  muted_until = CASE WHEN dlq_groups.state = 'muted' AND dlq_groups.muted_until <= excluded.updated_at THEN NULL ELSE dlq_groups.muted_until END,
  resolved_before = CASE WHEN dlq_groups.state = 'resolved' THEN dlq_groups.resolved_at ELSE dlq_groups.resolved_before END,
  reopened_at = CASE WHEN dlq_groups.state = 'resolved' THEN excluded.updated_at ELSE dlq_groups.reopened_at END,
  reopen_cause = CASE WHEN dlq_groups.state = 'resolved' THEN 'recurrence' ELSE dlq_groups.reopen_cause END,
  resolved_at = NULL,
  updated_at = excluded.updated_at
RETURNING id, state, arrivals + (SELECT COALESCE(SUM(c.arrivals), 0) FROM dlq_group_counts c
    WHERE c.organization_id = dlq_groups.organization_id AND c.group_id = dlq_groups.id) AS arrivals,
  (reopened_at IS NOT NULL AND reopened_at = updated_at) AS reopened`

// The join's statements share their arguments' numbers: $1 the organization, $2 the
// fingerprint, $3 now, $4–$7 the item's pending, processing, closed and open counts, $8 its
// open amount (joinOpenSQL and, on PostgreSQL, joinDeltaSQL need no more: counted), then
// for a group to make (newGroupSQL, joinGroupSQL) $9 its id, $10 the fingerprint's version,
// $11 the workflow, $12 the step, $13 the error type, $14 its code, $15 the title, $16 its
// search text (groupArgs).

// joinOpenSQL is JoinGroup's statement on SQLite for a group that is open, or muted until
// later (the common case): it counts one more arrival, the item by its status and amount,
// and its time, as joinGroupSQL does for such a group, and returns the group; no row when
// the fingerprint has no group, or its group is resolved or its mute has ended (those go
// through joinGroupSQL, which makes or reopens it). An update of a row found by its key
// costs the single writer less than an insert turned into an update.
const joinOpenSQL = `UPDATE dlq_groups SET
  arrivals = arrivals + 1,
  pending_count = pending_count + $4,
  processing_count = processing_count + $5,
  closed_count = closed_count + $6,
  open_count = open_count + $7,
  open_amount_minor = open_amount_minor + $8,
  last_seen_at = CASE WHEN $3 > last_seen_at THEN $3 ELSE last_seen_at END,
  updated_at = $3
WHERE organization_id = $1 AND fingerprint = $2 AND (state = 'open' OR (state = 'muted' AND muted_until > $3))
RETURNING id, state, arrivals`

// newGroupSQL makes the group of a fingerprint for its first item (joinGroupSQL, and on
// PostgreSQL joinNewSQL).
const newGroupSQL = `INSERT INTO dlq_groups (id, organization_id, fingerprint, version, workflow_id, step_id, error_type, error_code,
  title, search_text, state, arrivals, pending_count, processing_count, closed_count, open_count, open_amount_minor, first_seen_at, last_seen_at,
  created_at, updated_at)
VALUES ($9, $1, $2, $10, $11, $12, $13, $14, $15, $16, 'open', 1, $4, $5, $6, $7, $8, $3, $3, $3, $3)`

// counted are the join's arguments $1–$8 for the failure dl with fingerprint p.
func (s groupTx) counted(dl *models.DeadLetter, p fingerprint.Print) []any {
	c := statusCounts(dl.Status, 1)
	return []any{dl.OrganizationID, p.Hash, s.now, c.Pending, c.Processing, c.Closed, c.Pending + c.Processing, openAmount(c, dl.AmountMinor)}
}

// groupArgs are counted followed by $9–$16, what a new group of dl (with error code code)
// is made of.
func groupArgs(counted []any, dl *models.DeadLetter, code string, p fingerprint.Print) []any {
	return append(counted[:8:8], models.NewID(), p.Version, dl.WorkflowID, dl.FailedStepID, dl.ErrorType, code, p.Template,
		models.SearchText(p.Template))
}

// JoinGroup puts a new failure (dl: organization, workflow, failed step, error type, reason)
// with error code code into its group by fingerprint, counting the item in the group by
// dl.Status (the caller writes the item: a new one, or one that returns to pending,
// ReturnToGroup): an update of the group when it is open or muted until later (on
// PostgreSQL a delta, joinDelta), else one upsert that makes or reopens it. It sets
// dl.GroupID and says whether the group is new, reopened (it was resolved) or muted. It
// cannot lose: the update and the upsert are atomic on both databases, and two failures of
// one new problem make one group.
func (s groupTx) JoinGroup(dl *models.DeadLetter, code string) (GroupJoin, error) {
	return s.join(dl, code, printOf(dl, code))
}

// printOf is the fingerprint of the failure dl with error code code.
func printOf(dl *models.DeadLetter, code string) fingerprint.Print {
	return fingerprint.Of(fingerprint.Failure{WorkflowID: dl.WorkflowID, StepID: dl.FailedStepID, ErrorType: dl.ErrorType,
		ErrorCode: code, Reason: dl.Reason})
}

// join is JoinGroup with dl's fingerprint p worked out: the open group's update (on
// PostgreSQL its delta, joinDelta), and when that finds no such group, the upsert.
func (s groupTx) join(dl *models.DeadLetter, code string, p fingerprint.Print) (GroupJoin, error) {
	counted := s.counted(dl, p)
	var (
		id, state string
		arrivals  int
		reopened  bool
		err       = sql.ErrNoRows // no open group joined yet
	)
	if models.GroupCountDeltas(s.tx) {
		if ok, j, err := s.joinDelta(dl, code, p, counted); ok || err != nil {
			return j, err
		}
	} else {
		err = models.QueryRow(s.tx, joinOpenSQL, counted...).Scan(&id, &state, &arrivals)
	}
	if errors.Is(err, sql.ErrNoRows) {
		err = models.QueryRow(s.tx, joinGroupSQL, groupArgs(counted, dl, code, p)...).Scan(&id, &state, &arrivals, &reopened)
	}
	if err != nil {
		return GroupJoin{}, err
	}
	dl.GroupID = &id
	return GroupJoin{GroupID: id, New: arrivals == 1 && !reopened, Reopened: reopened, Muted: state == models.GroupMuted,
		Arrivals: arrivals, Title: p.Template}, nil
}
