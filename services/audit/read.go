package audit

import (
	"context"

	"lifeline/models"
)

// Reader reads the audit log back, for the admins' page, its export and a dead letter's
// history. Every read takes the organization id and never returns another's entries.
type Reader struct {
	db *models.DB
}

// NewReader returns a Reader on db.
func NewReader(db *models.DB) *Reader { return &Reader{db: db} }

// List returns the organization's entries matching f, newest first, and the next page's
// cursor ("" at the end). Errors: EINVALID for a cursor this server did not make.
func (r *Reader) List(ctx context.Context, orgID string, f models.AuditFilter) ([]models.AuditRow, string, error) {
	return r.db.ListAudit(ctx, orgID, f)
}

// Members are the organization's users by email, whom the log names.
func (r *Reader) Members(ctx context.Context, orgID string) ([]models.Member, error) {
	return r.db.Members(ctx, orgID)
}

// EntityTypes are the entity types the organization's log mentions.
func (r *Reader) EntityTypes(ctx context.Context, orgID string) ([]string, error) {
	return r.db.AuditEntityTypes(ctx, orgID)
}
