package engine

import (
	"time"

	"lifeline/models"
	"lifeline/models/apperr"
	"lifeline/services/fingerprint"
)

// Transitions of failure groups (issue 22): see transitions.go. A group's state is open,
// resolved or muted (models.Group); its counts are its items', computed when read.

// GroupJoin is what JoinGroup did.
type GroupJoin struct {
	GroupID string
	// New: the group was made for this item. Reopened: it was resolved and this item
	// reopened it. Muted: it is muted (the item joins it silently).
	New, Reopened, Muted bool
	// Arrivals counts the items that ever joined the group, this one included; Title is
	// the group's title (the reason with its variable parts as placeholders).
	Arrivals int
	Title    string
}

// joinGroupSQL is JoinGroup's one statement, the same on both databases: the group of the
// fingerprint is made, or it counts one more arrival; a resolved group reopens (remembering
// when it was resolved), a muted one whose time has passed opens.
const joinGroupSQL = `INSERT INTO dlq_groups (id, organization_id, fingerprint, version, workflow_id, step_id, error_type, error_code,
  title, search_text, state, arrivals, first_seen_at, last_seen_at, created_at, updated_at)
VALUES (@id, @org, @fp, @version, @wf, @step, @type, @code, @title, @search, 'open', 1, @now, @now, @now, @now)
ON CONFLICT (organization_id, fingerprint) DO UPDATE SET
  arrivals = dlq_groups.arrivals + 1,
  last_seen_at = CASE WHEN excluded.last_seen_at > dlq_groups.last_seen_at THEN excluded.last_seen_at ELSE dlq_groups.last_seen_at END,
  state = CASE WHEN dlq_groups.state = 'resolved' OR (dlq_groups.state = 'muted' AND dlq_groups.muted_until <= excluded.updated_at)
    THEN 'open' ELSE dlq_groups.state END,
  muted_until = CASE WHEN dlq_groups.state = 'muted' AND dlq_groups.muted_until <= excluded.updated_at THEN NULL ELSE dlq_groups.muted_until END,
  resolved_before = CASE WHEN dlq_groups.state = 'resolved' THEN dlq_groups.resolved_at ELSE dlq_groups.resolved_before END,
  reopened_at = CASE WHEN dlq_groups.state = 'resolved' THEN excluded.updated_at ELSE dlq_groups.reopened_at END,
  resolved_at = NULL,
  updated_at = excluded.updated_at
RETURNING id, state, arrivals, (reopened_at IS NOT NULL AND reopened_at = updated_at) AS reopened`

// JoinGroup puts a new failure (dl: organization, workflow, failed step, error type, reason)
// with error code code into its group: one upsert by fingerprint. It sets dl.GroupID and
// says whether the group is new, reopened (it was resolved) or muted. It cannot lose: the
// upsert is atomic on both databases, and two failures of one new problem make one group.
func (s groupTx) JoinGroup(dl *models.DeadLetter, code string) (GroupJoin, error) {
	p := fingerprint.Of(fingerprint.Failure{WorkflowID: dl.WorkflowID, StepID: dl.FailedStepID, ErrorType: dl.ErrorType,
		ErrorCode: code, Reason: dl.Reason})
	var row struct {
		ID       string
		State    string
		Arrivals int
		Reopened bool
	}
	err := s.tx.Raw(joinGroupSQL, map[string]any{
		"id": models.NewID(), "org": dl.OrganizationID, "fp": p.Hash, "version": p.Version, "wf": dl.WorkflowID,
		"step": dl.FailedStepID, "type": dl.ErrorType, "code": code, "title": p.Template, "search": models.SearchText(p.Template), "now": s.now,
	}).Scan(&row).Error
	if err != nil {
		return GroupJoin{}, err
	}
	dl.GroupID = &row.ID
	return GroupJoin{GroupID: row.ID, New: row.Arrivals == 1, Reopened: row.Reopened, Muted: row.State == models.GroupMuted,
		Arrivals: row.Arrivals, Title: p.Template}, nil
}

// ResolveGroupOf resolves the group of the dead letter dlID when none of its items is pending
// or processing any more (call it after the item closed, in the same transaction): open or
// muted → resolved, resolved_at now. Lost (false) when the item has no group, the group
// still has items to handle, or it is already resolved. The group's row is locked first (an
// update of updated_at), so that of two transactions closing its last two items at once the
// second waits for the first and then sees that nothing is pending: one of them resolves it.
func (s groupTx) ResolveGroupOf(dlID string) (bool, error) {
	var ids []string
	if err := s.tx.Model(&models.DeadLetter{}).Where("id = ? AND group_id IS NOT NULL", dlID).Pluck("group_id", &ids).Error; err != nil || len(ids) == 0 {
		return false, err
	}
	return s.ResolveGroupIfDone(ids[0])
}

// ResolveGroupIfDone is ResolveGroupOf for the group groupID. Resolving ends the group's
// escalation (its level back to 0, so that a reopened group starts again from the first
// level) and its items' error records still escalated go back to dead_letter.
func (s groupTx) ResolveGroupIfDone(groupID string) (bool, error) {
	if err := s.tx.Model(&models.Group{}).Where("id = ?", groupID).Update("updated_at", s.now).Error; err != nil {
		return false, err
	}
	r := s.tx.Exec(`UPDATE dlq_groups SET state = ?, resolved_at = ?, muted_until = NULL, updated_at = ?,
  escalation_level = 0, escalated_at = NULL, escalated_to = NULL
WHERE id = ? AND state IN (?, ?) AND NOT EXISTS (SELECT 1 FROM dead_letter_queue WHERE group_id = ? AND status IN (?, ?))`,
		models.GroupResolved, s.now, s.now, groupID, models.GroupOpen, models.GroupMuted, groupID, models.DLQPending, models.DLQProcessing)
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

// ResolveGroupsOf is ResolveGroupOf for many dead letters (one pass per group).
func (s groupTx) ResolveGroupsOf(dlIDs []string) error {
	var groups []string
	for start := 0; start < len(dlIDs); start += 500 {
		var ids []string
		if err := s.tx.Model(&models.DeadLetter{}).Where("id IN ? AND group_id IS NOT NULL", dlIDs[start:min(start+500, len(dlIDs))]).
			Distinct("group_id").Pluck("group_id", &ids).Error; err != nil {
			return err
		}
		groups = append(groups, ids...)
	}
	seen := map[string]bool{}
	for _, g := range groups {
		if seen[g] {
			continue
		}
		seen[g] = true
		if _, err := s.ResolveGroupIfDone(g); err != nil {
			return err
		}
	}
	return nil
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
// closed); the old group is resolved if it has nothing left to handle. It returns the new
// group's id. Later failures with the old fingerprint still join the old group. ECONFLICT:
// group.split.alone when the item is its group's only item, group.split.moved when it left its
// group since dl was read (another split won).
func (s groupTx) SplitOut(dl *models.DeadLetter) (string, error) {
	if dl.GroupID == nil {
		return "", &apperr.Error{Code: apperr.ECONFLICT, Message: "group.split.ungrouped"}
	}
	from := *dl.GroupID
	var n int64
	if err := s.tx.Model(&models.DeadLetter{}).Where("group_id = ?", from).Count(&n).Error; err != nil {
		return "", err
	}
	if n <= 1 {
		return "", &apperr.Error{Code: apperr.ECONFLICT, Message: "group.split.alone"}
	}
	var old models.Group
	if err := s.tx.Where("id = ? AND organization_id = ?", from, dl.OrganizationID).First(&old).Error; err != nil {
		return "", err
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
	if _, err := s.ResolveGroupIfDone(from); err != nil {
		return "", err
	}
	return g.ID, nil
}

// closedInGroup resolves the group of the dead letter dlID that has just become status, when
// that closes it (resolved, skipped, expired) and its group has nothing left to handle.
func (s groupTx) closedInGroup(dlID, status string) error {
	if status == models.DLQPending || status == models.DLQProcessing {
		return nil
	}
	_, err := s.ResolveGroupOf(dlID)
	return err
}

// ReturnToGroup is ReturnDeadLetter for an item whose new failure joined the group dl.GroupID
// (JoinGroup): when that is another group than the item's, the one it left is resolved if
// it has nothing left to handle.
func (s groupTx) ReturnToGroup(id string, dl *models.DeadLetter) (bool, error) {
	var prev []string
	if err := s.tx.Model(&models.DeadLetter{}).Where("id = ? AND group_id IS NOT NULL", id).Pluck("group_id", &prev).Error; err != nil {
		return false, err
	}
	returned, err := stateTx(s).deadLetters().ReturnDeadLetter(id, dl)
	if err != nil || !returned {
		return returned, err
	}
	if len(prev) == 1 && (dl.GroupID == nil || prev[0] != *dl.GroupID) {
		_, err = s.ResolveGroupIfDone(prev[0])
	}
	return true, err
}

// BackfillGroup puts a dead letter made before failure groups (no group_id) into its group,
// as JoinGroup puts a new failure (at s.now: the caller passes the time the item failed).
// Lost (false, nothing written) when the item has a group already (another backfill, on
// another process, was first): the item's row is claimed (locked, on PostgreSQL) before its
// group counts it.
func (s groupTx) BackfillGroup(dl *models.DeadLetter, code string) (bool, error) {
	r := s.tx.Exec("UPDATE dead_letter_queue SET group_id = NULL WHERE id = ? AND group_id IS NULL", dl.ID)
	if r.Error != nil || r.RowsAffected == 0 {
		return false, r.Error
	}
	if _, err := s.JoinGroup(dl, code); err != nil {
		return false, err
	}
	r = s.tx.Model(&models.DeadLetter{}).Where("id = ? AND group_id IS NULL", dl.ID).Update("group_id", *dl.GroupID)
	return r.RowsAffected == 1, r.Error
}
