package models

import "context"

// ClientInputs returns the inputs of up to limit of the organization's newest executions
// about client (their settings.client), other than exceptID and other than those that
// failed or wait in the DLQ (their values are no example: another NIP typed wrong), newest
// first; the index on (organization_id, client, id) answers it.
func (db *DB) ClientInputs(ctx context.Context, orgID, client, exceptID string, limit int) ([]JSON, error) {
	var out []JSON
	err := db.Conn(ctx).Model(&Execution{}).Where("organization_id = ? AND client = ? AND id <> ? AND status NOT IN ?", orgID, client, exceptID, []string{ExecFailed, ExecDLQPending}).
		Order("id DESC").Limit(limit).Pluck("input", &out).Error
	return out, err
}
