package models

import "context"

// DLQIDs returns the ids of the organization's dead letters that match f (its cursor and
// limit aside), newest first, at most max.
func (db *DB) DLQIDs(ctx context.Context, orgID string, f DLQFilter, max int) ([]string, error) {
	q := db.Conn(ctx).Table("dead_letter_queue").Where("dead_letter_queue.organization_id = ?", orgID)
	var ids []string
	err := db.dlqWhere(q, f).Order("dead_letter_queue.created_at DESC, dead_letter_queue.id DESC").Limit(max).
		Pluck("dead_letter_queue.id", &ids).Error
	return ids, err
}

// DLQOwned reports which of ids are dead letters of the organization.
func (db *DB) DLQOwned(ctx context.Context, orgID string, ids []string) (map[string]bool, error) {
	out := make(map[string]bool, len(ids))
	for start := 0; start < len(ids); start += 500 {
		chunk := ids[start:min(start+500, len(ids))]
		var found []string
		if err := db.Conn(ctx).Model(&DeadLetter{}).Where("organization_id = ? AND id IN ?", orgID, chunk).Pluck("id", &found).Error; err != nil {
			return nil, err
		}
		for _, id := range found {
			out[id] = true
		}
	}
	return out, nil
}

// DLQBrief is what a list of dead letters shows of one: its subject ("" without one) and
// its status now.
type DLQBrief struct {
	Subject string
	Status  string
	// RolledBack: its execution's completed steps were undone (or are being): only a retry of
	// the whole workflow takes it.
	RolledBack bool
}

// DLQBriefs returns the subject and status of the organization's dead letters among ids, and
// whether their executions were rolled back.
func (db *DB) DLQBriefs(ctx context.Context, orgID string, ids []string) (map[string]DLQBrief, error) {
	out := make(map[string]DLQBrief, len(ids))
	for start := 0; start < len(ids); start += 500 {
		var rows []struct {
			ID             string
			Subject        *string
			Status         string
			RollbackStatus *string
		}
		if err := db.Conn(ctx).Table("dead_letter_queue").
			Select("dead_letter_queue.id, dead_letter_queue.subject, dead_letter_queue.status, workflow_executions.rollback_status").
			Joins("LEFT JOIN workflow_executions ON workflow_executions.id = dead_letter_queue.execution_id AND workflow_executions.organization_id = dead_letter_queue.organization_id").
			Where("dead_letter_queue.organization_id = ? AND dead_letter_queue.id IN ?", orgID, ids[start:min(start+500, len(ids))]).
			Scan(&rows).Error; err != nil {
			return nil, err
		}
		for _, r := range rows {
			b := DLQBrief{Status: r.Status, RolledBack: r.RollbackStatus != nil}
			if r.Subject != nil {
				b.Subject = *r.Subject
			}
			out[r.ID] = b
		}
	}
	return out, nil
}

// RetriedAs returns the id of the newest execution that retries executionID in full, or "".
func (db *DB) RetriedAs(ctx context.Context, orgID, executionID string) (string, error) {
	var ids []string
	err := db.Conn(ctx).Model(&Execution{}).Where("organization_id = ? AND retry_of = ?", orgID, executionID).
		Order("created_at DESC").Limit(1).Pluck("id", &ids).Error
	if err != nil || len(ids) == 0 {
		return "", err
	}
	return ids[0], nil
}
