package models

import "context"

// ClientInputs returns the inputs of up to limit of the organization's newest executions
// about client (their settings.client), other than exceptID, newest first; the index on
// (organization_id, client, id) answers it.
func (db *DB) ClientInputs(ctx context.Context, orgID, client, exceptID string, limit int) ([]JSON, error) {
	var out []JSON
	err := db.Conn(ctx).Model(&Execution{}).Where("organization_id = ? AND client = ? AND id <> ?", orgID, client, exceptID).
		Order("id DESC").Limit(limit).Pluck("input", &out).Error
	return out, err
}
