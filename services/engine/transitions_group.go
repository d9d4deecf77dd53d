package engine

import (
	"cmp"
	"fmt"
	"time"

	"lifeline/models"
	"lifeline/models/apperr"
)

// Transitions of failure groups (issue 22): see transitions.go. A group's state is open,
// resolved or muted (models.Group). Its counts (pending, processing, closed, open) are kept
// by every transition that changes one of its items' status or group, in the same
// transaction (countItems), on its row on SQLite and as a delta row on PostgreSQL
// (transitions_groupcounts.go): JoinGroup and BackfillGroup count the item that joins,
// ClaimDeadLetter, ResolveReplayed and ExpireDeadLetters the item whose status changes,
// ReopenDeadLetter the item reopened (ReopenGroupOf, which also reopens a resolved group),
// ReturnToGroup and SplitOut the item that moves. models.DB.GroupCountDrift
// recounts them from the items.

// ResolveGroupOf resolves the group of the dead letter dlID when none of its items is pending
// or processing any more (call it after the item closed and was counted, in the same
// transaction): open or muted → resolved, resolved_at now. Lost (false) when the item has no
// group, the group still has items to handle (its open count), or it is already resolved.
// The group's row is locked first (an update of updated_at; the count's update locks it
// too), so that of two transactions closing its last two items at once the second waits for
// the first and then sees that nothing is open: one of them resolves it.
func (s groupTx) ResolveGroupOf(dlID string) (bool, error) {
	var ids []string
	if err := s.tx.Model(&models.DeadLetter{}).Where("id = ? AND group_id IS NOT NULL", dlID).Pluck("group_id", &ids).Error; err != nil || len(ids) == 0 {
		return false, err
	}
	return s.ResolveGroupIfDone(ids[0])
}

// ResolveGroupIfDone is ResolveGroupOf for the group groupID. Resolving ends the group's
// escalation (its level back to 0, so that a reopened group starts again from the first
// level) and its items' error records still escalated go back to dead_letter. On
// PostgreSQL it first looks for another open item that no transaction is changing
// (stillOpenElsewhere): when there is one it loses without locking the group's row.
func (s groupTx) ResolveGroupIfDone(groupID string) (bool, error) {
	if open, err := s.stillOpenElsewhere(groupID); err != nil || open {
		return false, err
	}
	if err := s.tx.Model(&models.Group{}).Where("id = ?", groupID).Update("updated_at", s.now).Error; err != nil {
		return false, err
	}
	r := s.tx.Exec(`UPDATE dlq_groups SET state = ?, resolved_at = ?, muted_until = NULL, updated_at = ?,
  escalation_level = 0, escalated_at = NULL, escalated_to = NULL
WHERE id = ? AND state IN (?, ?) AND open_count + (SELECT COALESCE(SUM(c.open_count), 0) FROM dlq_group_counts c
    WHERE c.organization_id = dlq_groups.organization_id AND c.group_id = dlq_groups.id) = 0`, models.GroupResolved, s.now, s.now, groupID, models.GroupOpen, models.GroupMuted)
	if r.Error != nil || r.RowsAffected != 1 {
		return false, r.Error
	}
	_, err := stateTx(s).errors().DeEscalateErrors(groupID)
	return true, err
}

// EscalateGroup raises the organization's group groupID from escalation level from to level
// to (its items waited past that level of the policy), since now, naming who (a JSON array of
// the level's roles and people). Lost (false, nothing written) when the group is not at
// level from any more (another pass raised it, or it was resolved: level 0 again) or is
// not open (resolved, or muted until later).
func (s groupTx) EscalateGroup(orgID, groupID string, from, to int, who string) (bool, error) {
	r := s.tx.Model(&models.Group{}).
		Where("id = ? AND organization_id = ? AND escalation_level = ? AND (state = ? OR (state = ? AND muted_until <= ?))",
			groupID, orgID, from, models.GroupOpen, models.GroupMuted, s.now).
		Updates(map[string]any{"escalation_level": to, "escalated_at": s.now, "escalated_to": who, "updated_at": s.now})
	return r.RowsAffected == 1, r.Error
}

// closedInGroups counts the dead letters dlIDs, which have just gone from status from to
// status to together (ExpireDeadLetters), in their groups, and resolves each group that has
// nothing left to handle: one pass per group.
func (s groupTx) closedInGroups(dlIDs []string, from, to string) error {
	perGroup, amounts := map[string]int{}, map[string]int64{}
	var order []string
	for start := 0; start < len(dlIDs); start += 500 {
		var rows []struct {
			GroupID string
			N       int
			Amount  int64
		}
		if err := s.tx.Model(&models.DeadLetter{}).Select("group_id, count(*) AS n, CAST(COALESCE(SUM(amount_minor), 0) AS BIGINT) AS amount").
			Where("id IN ? AND group_id IS NOT NULL", dlIDs[start:min(start+500, len(dlIDs))]).Group("group_id").Scan(&rows).Error; err != nil {
			return err
		}
		for _, r := range rows {
			if _, ok := perGroup[r.GroupID]; !ok {
				order = append(order, r.GroupID)
			}
			perGroup[r.GroupID] += r.N
			amounts[r.GroupID] += r.Amount
		}
	}
	for _, g := range order {
		if err := s.countItems(g, from, to, perGroup[g], amounts[g]); err != nil {
			return err
		}
		if _, err := s.ResolveGroupIfDone(g); err != nil {
			return err
		}
	}
	return nil
}

// statusCounts is n items of status in a group's counts (status "" is none).
func statusCounts(status string, n int) models.GroupCounts {
	switch status {
	case "":
		return models.GroupCounts{}
	case models.DLQPending:
		return models.GroupCounts{Pending: n}
	case models.DLQProcessing:
		return models.GroupCounts{Processing: n}
	default:
		return models.GroupCounts{Closed: n}
	}
}

// openAmount is an item's amount (minor units; nil for none) in its group's open amount
// when c counts it: its amount when it counts as pending or processing, else 0.
func openAmount(c models.GroupCounts, amount *int64) int64 {
	if amount == nil || c.Pending+c.Processing == 0 {
		return 0
	}
	return *amount
}

// countItemsSQL changes a group's counts by deltas (pending, processing, closed, open, open
// amount); the group is named by the clause after "WHERE id = ".
const countItemsSQL = `UPDATE dlq_groups SET pending_count = pending_count + ?, processing_count = processing_count + ?,
  closed_count = closed_count + ?, open_count = open_count + ?, open_amount_minor = open_amount_minor + %s WHERE id = `

// countItems moves n items of the group groupID, whose amounts sum to amount (minor units),
// from status from to status to in its counts ("" for no status: an item that joins the
// group, or leaves it). Nothing to write when both are the same kind (resolved and skipped
// are both closed). It cannot lose: it adds to what the row holds, under the row's lock.
func (s groupTx) countItems(groupID, from, to string, n int, amount int64) error {
	return s.countWhere("?", groupID, from, to, n, "CAST(? AS BIGINT)", amount)
}

// countItemOf is countItems for the group of the dead letter dlID (nothing when it has none),
// with the amount the item holds.
func (s groupTx) countItemOf(dlID, from, to string) error {
	return s.countWhere("(SELECT group_id FROM dead_letter_queue WHERE id = ?)", dlID, from, to, 1,
		"(SELECT COALESCE(amount_minor, 0) FROM dead_letter_queue WHERE id = ?)", dlID)
}

// countWhere writes countItems' deltas to the group the clause where (with arg) names; the
// open amount's change is ±(amountSQL with amountArg), by whether the items became open or
// stopped being open.
func (s groupTx) countWhere(where string, arg any, from, to string, n int, amountSQL string, amountArg any) error {
	a, b := statusCounts(from, n), statusCounts(to, n)
	d := models.GroupCounts{Pending: b.Pending - a.Pending, Processing: b.Processing - a.Processing, Closed: b.Closed - a.Closed}
	if d == (models.GroupCounts{}) {
		return nil
	}
	open := d.Pending + d.Processing
	amount := "0"
	switch {
	case open > 0:
		amount = amountSQL
	case open < 0:
		amount = "-(" + amountSQL + ")"
	}
	args := []any{d.Pending, d.Processing, d.Closed, open}
	if open != 0 {
		args = append(args, amountArg)
	}
	stmt := countItemsSQL
	if models.GroupCountDeltas(s.tx) {
		stmt = countDeltaSQL
	}
	return s.tx.Exec(fmt.Sprintf(stmt, amount)+where, append(args, arg)...).Error
}

// MuteGroup mutes the organization's group until until: open or muted → muted (a muted
// group's time is changed). New items join it silently until then; after it, it is open
// again (models.Group.StateAt, and the next item's JoinGroup). ENOTFOUND when the
// organization has no such group; ECONFLICT (group.conflict.resolved) when it is resolved.
func (s groupTx) MuteGroup(orgID, groupID string, until time.Time) error {
	r := s.tx.Model(&models.Group{}).Where("id = ? AND organization_id = ? AND state IN ?", groupID, orgID, []string{models.GroupOpen, models.GroupMuted}).
		Updates(map[string]any{"state": models.GroupMuted, "muted_until": until.UTC(), "updated_at": s.now})
	if r.Error != nil || r.RowsAffected == 1 {
		return r.Error
	}
	return s.groupConflict(orgID, groupID)
}

func (s groupTx) groupConflict(orgID, groupID string) error {
	var g models.Group
	if err := s.tx.Select("state").Where("id = ? AND organization_id = ?", groupID, orgID).First(&g).Error; err != nil {
		if models.IsNotFound(err) {
			return apperr.NotFound("group")
		}
		return err
	}
	return &apperr.Error{Code: apperr.ECONFLICT, Message: "group.conflict." + g.State}
}

// SplitOut moves the dead letter dl out of its group into a group of its own (the normalizer
// put it with failures that are another problem): a new group with the old one's workflow,
// step, type, code and title, split_from the old one, open (resolved when the item is
// closed), the item counted in it and no longer in the old one; the old group is resolved
// if it has nothing left to handle. It returns the new
// group's id. Later failures with the old fingerprint still join the old group. ECONFLICT:
// group.split.alone when the item is its group's only item (also when it became so while
// this split ran: another item's split won), group.split.moved when it left its group
// since dl was read (another split won). On an error the caller's transaction must roll
// back (the new group and the item's move are written before the last guard).
func (s groupTx) SplitOut(dl *models.DeadLetter) (string, error) {
	if dl.GroupID == nil {
		return "", &apperr.Error{Code: apperr.ECONFLICT, Message: "group.split.ungrouped"}
	}
	from := *dl.GroupID
	var old models.Group
	if err := s.tx.Table(models.GroupsNow).Where("id = ? AND organization_id = ?", from, dl.OrganizationID).First(&old).Error; err != nil {
		return "", err
	}
	alone := &apperr.Error{Code: apperr.ECONFLICT, Message: "group.split.alone"}
	if old.PendingCount+old.ProcessingCount+old.ClosedCount <= 1 {
		return "", alone
	}
	if s.hold != nil {
		s.hold(TransitionSplitOut, from)
	}
	state, resolvedAt := models.GroupOpen, (*time.Time)(nil)
	if dl.Status != models.DLQPending && dl.Status != models.DLQProcessing {
		state, resolvedAt = models.GroupResolved, &s.now
	}
	id := models.NewID()
	g := models.Group{ID: id, OrganizationID: dl.OrganizationID, Fingerprint: "split:" + id, Version: old.Version,
		WorkflowID: old.WorkflowID, StepID: old.StepID, ErrorType: old.ErrorType, ErrorCode: old.ErrorCode, Title: old.Title,
		SearchText: old.SearchText, State: state, SplitFrom: &from, Arrivals: 1, FirstSeenAt: dl.CreatedAt, LastSeenAt: dl.CreatedAt,
		ResolvedAt: resolvedAt, CreatedAt: s.now, UpdatedAt: s.now}
	// The new group first (the item's foreign key needs it); a lost guard returns an error,
	// and the caller's transaction takes the group back with it.
	if err := s.tx.Create(&g).Error; err != nil {
		return "", err
	}
	r := s.tx.Model(&models.DeadLetter{}).Where("id = ? AND organization_id = ? AND group_id = ?", dl.ID, dl.OrganizationID, from).
		Updates(map[string]any{"group_id": g.ID, "updated_at": s.now})
	if r.Error != nil {
		return "", r.Error
	}
	if r.RowsAffected == 0 {
		return "", &apperr.Error{Code: apperr.ECONFLICT, Message: "group.split.moved"}
	}
	dl.GroupID = &g.ID
	// Counted by the status the item has now (the guarded update above holds its row): it
	// may have changed since dl was read.
	var cur []struct {
		Status string
		Amount int64
	}
	if err := s.tx.Model(&models.DeadLetter{}).Select("status, COALESCE(amount_minor, 0) AS amount").Where("id = ?", dl.ID).
		Scan(&cur).Error; err != nil || len(cur) == 0 {
		return "", cmp.Or(err, errLost)
	}
	// Out of the old group only while it keeps another item: of two splits of a group's
	// last two items at once, both past the check above on what they read, the second
	// waits here for the first's lock and then finds one item left (PostgreSQL re-reads the
	// row it waited for): it loses, and its transaction takes everything back.
	if left, err := s.leaveGroup(from, cur[0].Status, cur[0].Amount); err != nil || !left {
		return "", cmp.Or(err, error(alone))
	}
	if err := s.countItems(g.ID, "", cur[0].Status, 1, cur[0].Amount); err != nil {
		return "", err
	}
	if _, err := s.ResolveGroupIfDone(from); err != nil {
		return "", err
	}
	return g.ID, nil
}

// leaveGroup counts an item of status and amount out of the group groupID, guarded: only while the
// group counts more than one item (a group is never left empty by a split). Lost (false,
// nothing written) when it counts one or none.
func (s groupTx) leaveGroup(groupID, status string, amount int64) (bool, error) {
	c := statusCounts(status, 1)
	if models.GroupCountDeltas(s.tx) {
		if r := s.tx.Exec("UPDATE dlq_groups SET updated_at = updated_at WHERE id = ?", groupID); r.Error != nil {
			return false, r.Error
		}
		r := s.tx.Exec(leaveDeltaSQL, -c.Pending, -c.Processing, -c.Closed, -(c.Pending + c.Processing), -openAmount(c, &amount), groupID)
		return r.RowsAffected == 1, r.Error
	}
	r := s.tx.Exec(fmt.Sprintf(countItemsSQL, "CAST(? AS BIGINT)")+"? AND pending_count + processing_count + closed_count > 1",
		-c.Pending, -c.Processing, -c.Closed, -(c.Pending + c.Processing), -openAmount(c, &amount), groupID)
	return r.RowsAffected == 1, r.Error
}

// movedInGroup counts the dead letter dlID, which has just gone from status from to status
// to, in its group, and resolves the group when that closed the item (resolved, skipped,
// expired) and the group has nothing left to handle.
func (s groupTx) movedInGroup(dlID, from, to string) error {
	if err := s.countItemOf(dlID, from, to); err != nil {
		return err
	}
	if to == models.DLQPending || to == models.DLQProcessing {
		return nil
	}
	_, err := s.ResolveGroupOf(dlID)
	return err
}

// reopenItemSQL is ReopenGroupOf's one statement, the same on both databases: the group of
// a dead letter counts it pending instead of closed and, when the group was resolved, is
// open again, remembering when it was resolved and why it came back (as joinGroupSQL does
// for a recurrence). Every SET expression reads the row as it was.
const reopenItemSQL = `UPDATE dlq_groups SET pending_count = pending_count + 1, closed_count = closed_count - 1,
  open_count = open_count + 1,
  open_amount_minor = open_amount_minor + (SELECT COALESCE(amount_minor, 0) FROM dead_letter_queue WHERE id = @dl),
  state = CASE WHEN state = 'resolved' THEN 'open' ELSE state END,
  resolved_before = CASE WHEN state = 'resolved' THEN resolved_at ELSE resolved_before END,
  reopened_at = CASE WHEN state = 'resolved' THEN @now ELSE reopened_at END,
  reopen_cause = CASE WHEN state = 'resolved' THEN @cause ELSE reopen_cause END,
  resolved_at = NULL, updated_at = @now
WHERE id = (SELECT group_id FROM dead_letter_queue WHERE id = @dl)
RETURNING (reopened_at IS NOT NULL AND reopened_at = updated_at AND reopen_cause = @cause) AS reopened`

// ReopenGroupOf counts the dead letter dlID, which an admin has just reopened (closed by
// hand → pending: ReopenDeadLetter, in the same transaction), as pending in its group, and
// reopens the group if it was resolved: resolved → open, resolved_before the time it was
// resolved, reopened_at now, reopen_cause GroupReopenedByItem (the group's pages say it came
// back because an item was reopened). One statement under the group row's lock. Lost
// (false, the item still counted) when the group was not resolved (open, or muted: it stays
// muted), or the item has no group (nothing written).
func (s groupTx) ReopenGroupOf(dlID string) (bool, error) {
	var rows []struct{ Reopened bool }
	err := s.tx.Raw(reopenItemSQL, map[string]any{"now": s.now, "cause": models.GroupReopenedByItem, "dl": dlID}).Scan(&rows).Error
	return len(rows) == 1 && rows[0].Reopened, err
}

// ReturnToGroup is ReturnDeadLetter for an item whose new failure joined the group dl.GroupID
// (JoinGroup, which counted it pending there): it is no longer counted processing in the
// group it was in, and when that is another group than dl.GroupID, the one it left is
// resolved if it has nothing left to handle. ReturnDeadLetter is never called alone: this
// keeps the counts.
func (s groupTx) ReturnToGroup(id string, dl *models.DeadLetter) (bool, error) {
	// Its group and the amount it was counted with there, before its new failure (which an
	// edited input may have given another amount) is written.
	var prev []struct {
		GroupID string
		Amount  int64
	}
	if err := s.tx.Model(&models.DeadLetter{}).Select("group_id, COALESCE(amount_minor, 0) AS amount").
		Where("id = ? AND group_id IS NOT NULL", id).Scan(&prev).Error; err != nil {
		return false, err
	}
	returned, err := stateTx(s).deadLetters().ReturnDeadLetter(id, dl)
	if err != nil || !returned {
		return returned, err
	}
	if len(prev) == 1 {
		if err := s.countItems(prev[0].GroupID, models.DLQProcessing, "", 1, prev[0].Amount); err != nil {
			return true, err
		}
		if dl.GroupID == nil || prev[0].GroupID != *dl.GroupID {
			_, err = s.ResolveGroupIfDone(prev[0].GroupID)
		}
	}
	return true, err
}

// BackfillGroup puts a dead letter made before failure groups (no group_id) into its group,
// as JoinGroup puts a new failure (at s.now: the caller passes the time the item failed).
// Lost (false, nothing written) when the item has a group already (another backfill, on
// another process, was first): the item's row is claimed (locked, on PostgreSQL) before its
// group counts it, by the status it has then (dl.Status is set to it).
func (s groupTx) BackfillGroup(dl *models.DeadLetter, code string) (bool, error) {
	r := s.tx.Exec("UPDATE dead_letter_queue SET group_id = NULL WHERE id = ? AND group_id IS NULL", dl.ID)
	if r.Error != nil || r.RowsAffected == 0 {
		return false, r.Error
	}
	var status []string
	if err := s.tx.Model(&models.DeadLetter{}).Where("id = ?", dl.ID).Pluck("status", &status).Error; err != nil || len(status) == 0 {
		return false, err
	}
	dl.Status = status[0]
	if _, err := s.JoinGroup(dl, code); err != nil {
		return false, err
	}
	r = s.tx.Model(&models.DeadLetter{}).Where("id = ? AND group_id IS NULL", dl.ID).Update("group_id", *dl.GroupID)
	return r.RowsAffected == 1, r.Error
}

// RepairGroupCounts sets the kept counts of the group groupID (pending, processing, closed,
// open, open amount) to its items' counted by status: the repair of a drift (models.DB.GroupCountDrift)
// that a writer outside the transitions left. The group's row is locked first, so that the
// items are counted once every transition that was changing one of them and its group has
// committed (one that changes an item after this count waits for the lock and then adds its
// own change to the repaired counts). With deltas (PostgreSQL) the row gets the recount less
// the deltas not yet folded, read in the same statement (repairGroupSQL): a transition that
// commits later adds its item's change and its delta together; a fold waits for the lock,
// or the repair for the fold's. Lost (false, nothing written) when the counts already
// match the items', or the group is gone.
func (s groupTx) RepairGroupCounts(groupID string) (bool, error) {
	if r := s.tx.Exec("UPDATE dlq_groups SET updated_at = updated_at WHERE id = ?", groupID); r.Error != nil || r.RowsAffected == 0 {
		return false, r.Error
	}
	var org []string
	if err := s.tx.Model(&models.Group{}).Where("id = ?", groupID).Pluck("organization_id", &org).Error; err != nil || len(org) == 0 {
		return false, err
	}
	r := s.tx.Exec(repairGroupSQL, map[string]any{"id": groupID, "org": org[0], "now": s.now})
	return r.RowsAffected == 1, r.Error
}
