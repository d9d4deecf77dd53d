package engine

import (
	"database/sql"
	"errors"

	"lifeline/models"
	"lifeline/services/fingerprint"
)

// A group's counters without a hot row (models/groupcounts.go, migration 00046). On
// PostgreSQL (models.GroupCountDeltas) the transitions of transitions_group.go write a
// change of a group's arrivals, counts, open amount or last seen as a delta row instead of
// updating the group's row, which every item of one problem queued on for the length of
// each commit; on SQLite they update the row as before. What still takes the row's lock is
// what changes its state (resolve, reopen, mute, escalate, a split's guard) and the fold;
// a failure that joins an open group holds the row in share mode (failures share it), so
// that a state change waits for it and then sees its delta.

// joinDeltaSQL is JoinGroup's statement on PostgreSQL for a group that is open, or muted
// until later: its row held in share mode, a delta of one arrival, the item's count and
// amount and its time; it returns the group (no row when the group is new, resolved, or
// muted until before now: those update the row, joinGroupSQL). It does not add up the
// group's arrivals (its deltas not yet folded: as many as failures since the last fold),
// which every failure would pay for. Its arguments are join's counted.
const joinDeltaSQL = `WITH g AS (
  SELECT id, organization_id, state, arrivals FROM dlq_groups WHERE organization_id = $1 AND fingerprint = $2
    AND (state = 'open' OR (state = 'muted' AND muted_until > $3)) FOR SHARE),
ins AS (
  INSERT INTO dlq_group_counts (organization_id, group_id, arrivals, pending_count, processing_count, closed_count, open_count,
    open_amount_minor, seen_at)
  SELECT organization_id, id, 1, $4, $5, $6, $7, $8, $3 FROM g RETURNING group_id)
SELECT g.id, g.state FROM g JOIN ins ON ins.group_id = g.id`

// joinNewSQL makes a new group on PostgreSQL, and does nothing when the fingerprint has one
// (having waited for a failure making it at the same time to commit).
const joinNewSQL = newGroupSQL + ` ON CONFLICT (organization_id, fingerprint) DO NOTHING RETURNING id`

// joinDelta is join on PostgreSQL: the delta when the group is open or muted until later
// (the common case, which waits on no other failure of the problem); else a new group; else
// the delta again (the group was made by a failure that committed meanwhile). It reports
// false when none of them could (the group is resolved, or its mute has ended): the caller
// upserts the row (joinGroupSQL), which reopens it. Of two failures that reopen one group,
// the second waits for the first's row lock and then updates the open row too, still
// exact. The join's Arrivals is 0 (not read) when it wrote a delta: whoever needs the count
// reads models.GroupsNow. counted are join's.
func (s groupTx) joinDelta(dl *models.DeadLetter, code string, p fingerprint.Print, counted []any) (bool, GroupJoin, error) {
	delta := func() (bool, GroupJoin, error) {
		var id, state string
		err := models.QueryRow(s.tx, joinDeltaSQL, counted...).Scan(&id, &state)
		if errors.Is(err, sql.ErrNoRows) {
			return false, GroupJoin{}, nil
		}
		if err != nil {
			return false, GroupJoin{}, err
		}
		dl.GroupID = &id
		return true, GroupJoin{GroupID: id, Muted: state == models.GroupMuted, Title: p.Template}, nil
	}
	if ok, j, err := delta(); ok || err != nil {
		return ok, j, err
	}
	var made string
	err := models.QueryRow(s.tx, joinNewSQL, groupArgs(counted, dl, code, p)...).Scan(&made)
	if errors.Is(err, sql.ErrNoRows) {
		return delta()
	}
	if err != nil {
		return false, GroupJoin{}, err
	}
	dl.GroupID = &made
	return true, GroupJoin{GroupID: made, New: true, Arrivals: 1, Title: p.Template}, nil
}

// countDeltaSQL is countItems' delta on PostgreSQL (pending, processing, closed, open, open
// amount) for the group the clause after "WHERE id = " names.
const countDeltaSQL = `INSERT INTO dlq_group_counts (organization_id, group_id, pending_count, processing_count, closed_count, open_count,
  open_amount_minor)
SELECT organization_id, id, ?, ?, ?, ?, %s FROM dlq_groups WHERE id = `

// leaveDeltaSQL is leaveGroup's delta on PostgreSQL, guarded as leaveGroup says on the
// group's counts with its deltas (its row is locked first).
const leaveDeltaSQL = `INSERT INTO dlq_group_counts (organization_id, group_id, pending_count, processing_count, closed_count, open_count,
  open_amount_minor)
SELECT organization_id, id, ?, ?, ?, ?, CAST(? AS BIGINT) FROM ` + models.GroupsNow + `
WHERE id = ? AND pending_count + processing_count + closed_count > 1`

// stillOpenElsewhere reports, on PostgreSQL, whether the group groupID has an item to
// handle that no other transaction is changing now, held in share mode until this one
// ends: the group cannot be done when this transaction commits (whoever closes that item
// waits for it, and then looks for itself), so ResolveGroupIfDone need not lock the group's
// row, which every close of a bulk of one problem would otherwise queue on. The oldest
// pending item first (a bulk takes the newest first: models.DB.DLQIDs, so it reaches the
// one held here last), then the oldest processing one. It waits for nothing (SKIP LOCKED):
// an item being changed is passed over.
func (s groupTx) stillOpenElsewhere(groupID string) (bool, error) {
	if !models.GroupCountDeltas(s.tx) {
		return false, nil
	}
	for _, status := range []string{models.DLQPending, models.DLQProcessing} {
		var ids []string
		// On idx_dlq_group (organization, group, status, created_at DESC, id DESC), read backwards.
		if err := s.tx.Raw(`SELECT id FROM dead_letter_queue
WHERE organization_id = (SELECT organization_id FROM dlq_groups WHERE id = ?) AND group_id = ? AND status = ?
ORDER BY created_at, id LIMIT 1 FOR SHARE OF dead_letter_queue SKIP LOCKED`, groupID, groupID, status).Scan(&ids).Error; err != nil || len(ids) > 0 {
			return len(ids) > 0, err
		}
	}
	return false, nil
}

// repairGroupSQL is RepairGroupCounts' one statement, the same on both databases: the
// group's row gets its items' counts less its deltas not yet folded (so that the row and
// the deltas add up to the recount), read in one snapshot; lost when they already do.
const repairGroupSQL = `UPDATE dlq_groups SET
  pending_count = (SELECT COUNT(*) FROM dead_letter_queue WHERE organization_id = @org AND group_id = @id AND status = 'pending')
    - (SELECT COALESCE(SUM(pending_count), 0) FROM dlq_group_counts WHERE organization_id = @org AND group_id = @id),
  processing_count = (SELECT COUNT(*) FROM dead_letter_queue WHERE organization_id = @org AND group_id = @id AND status = 'processing')
    - (SELECT COALESCE(SUM(processing_count), 0) FROM dlq_group_counts WHERE organization_id = @org AND group_id = @id),
  closed_count = (SELECT COUNT(*) FROM dead_letter_queue WHERE organization_id = @org AND group_id = @id AND status NOT IN ('pending', 'processing'))
    - (SELECT COALESCE(SUM(closed_count), 0) FROM dlq_group_counts WHERE organization_id = @org AND group_id = @id),
  open_count = (SELECT COUNT(*) FROM dead_letter_queue WHERE organization_id = @org AND group_id = @id AND status IN ('pending', 'processing'))
    - (SELECT COALESCE(SUM(open_count), 0) FROM dlq_group_counts WHERE organization_id = @org AND group_id = @id),
  open_amount_minor = (SELECT CAST(COALESCE(SUM(amount_minor), 0) AS BIGINT) FROM dead_letter_queue WHERE organization_id = @org AND group_id = @id AND status IN ('pending', 'processing'))
    - (SELECT CAST(COALESCE(SUM(open_amount_minor), 0) AS BIGINT) FROM dlq_group_counts WHERE organization_id = @org AND group_id = @id),
  updated_at = @now
WHERE id = @id AND organization_id = @org AND NOT (
  pending_count = (SELECT COUNT(*) FROM dead_letter_queue WHERE organization_id = @org AND group_id = @id AND status = 'pending')
    - (SELECT COALESCE(SUM(pending_count), 0) FROM dlq_group_counts WHERE organization_id = @org AND group_id = @id)
  AND processing_count = (SELECT COUNT(*) FROM dead_letter_queue WHERE organization_id = @org AND group_id = @id AND status = 'processing')
    - (SELECT COALESCE(SUM(processing_count), 0) FROM dlq_group_counts WHERE organization_id = @org AND group_id = @id)
  AND closed_count = (SELECT COUNT(*) FROM dead_letter_queue WHERE organization_id = @org AND group_id = @id AND status NOT IN ('pending', 'processing'))
    - (SELECT COALESCE(SUM(closed_count), 0) FROM dlq_group_counts WHERE organization_id = @org AND group_id = @id)
  AND open_count = (SELECT COUNT(*) FROM dead_letter_queue WHERE organization_id = @org AND group_id = @id AND status IN ('pending', 'processing'))
    - (SELECT COALESCE(SUM(open_count), 0) FROM dlq_group_counts WHERE organization_id = @org AND group_id = @id)
  AND open_amount_minor = (SELECT CAST(COALESCE(SUM(amount_minor), 0) AS BIGINT) FROM dead_letter_queue WHERE organization_id = @org AND group_id = @id AND status IN ('pending', 'processing'))
    - (SELECT CAST(COALESCE(SUM(open_amount_minor), 0) AS BIGINT) FROM dlq_group_counts WHERE organization_id = @org AND group_id = @id))`
