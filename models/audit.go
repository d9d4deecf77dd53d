package models

import (
	"context"
	"time"
)

// AuditFilter narrows the audit log. Zero fields do not filter.
type AuditFilter struct {
	Action     string
	Actor      string // a user's id, or "system"
	EntityType string
	EntityID   string
	From, To   time.Time // created_at in [From, To)
	Cursor     string
	Limit      int
}

// AuditRow is an audit entry with who did it, by name.
type AuditRow struct {
	AuditEntry
	ActorEmail string // the user's, for actor_type user
	ActorToken string // the token's name, for actor_type api_token
}

// ListAudit returns the organization's audit entries newest first, and the next page's
// cursor ("" at the end).
func (db *DB) ListAudit(ctx context.Context, orgID string, f AuditFilter) ([]AuditRow, string, error) {
	limit := f.Limit
	if limit <= 0 || limit > 1000 {
		limit = clampLimit(f.Limit)
	}
	q := db.Conn(ctx).Table("audit_log a").
		Select("a.*, u.email AS actor_email, t.name AS actor_token").
		Joins("LEFT JOIN users u ON a.actor_type = 'user' AND u.id = a.actor_id").
		Joins("LEFT JOIN api_tokens t ON a.actor_type = 'api_token' AND t.id = a.actor_id").
		Where("a.organization_id = ?", orgID)
	if f.Action != "" {
		q = q.Where("a.action = ?", f.Action)
	}
	switch f.Actor {
	case "":
	case "system":
		q = q.Where("a.actor_type = 'system'")
	default:
		q = q.Where("a.actor_id = ?", f.Actor)
	}
	if f.EntityType != "" {
		q = q.Where("a.entity_type = ?", f.EntityType)
	}
	if f.EntityID != "" {
		q = q.Where("a.entity_id = ?", f.EntityID)
	}
	if !f.From.IsZero() {
		q = q.Where("a.created_at >= ?", f.From.UTC())
	}
	if !f.To.IsZero() {
		q = q.Where("a.created_at < ?", f.To.UTC())
	}
	at, id, err := decodeCursor(f.Cursor)
	if err != nil {
		return nil, "", err
	}
	if id != "" {
		q = q.Where("(a.created_at < ? OR (a.created_at = ? AND a.id < ?))", at, at, id)
	}
	var rows []AuditRow
	if err := q.Order("a.created_at DESC, a.id DESC").Limit(limit + 1).Scan(&rows).Error; err != nil {
		return nil, "", err
	}
	next := ""
	if len(rows) > limit {
		rows = rows[:limit]
		next = encodeCursor(rows[limit-1].CreatedAt, rows[limit-1].ID)
	}
	return rows, next, nil
}

// Member is a user of an organization, for filters.
type Member struct {
	UserID string
	Email  string
}

// Members returns the organization's users by email.
func (db *DB) Members(ctx context.Context, orgID string) ([]Member, error) {
	var out []Member
	err := db.Conn(ctx).Table("memberships m").Select("m.user_id, u.email").
		Joins("JOIN users u ON u.id = m.user_id").Where("m.organization_id = ?", orgID).Order("u.email").Scan(&out).Error
	return out, err
}

// AuditEntityTypes returns the entity types the organization's audit log mentions.
func (db *DB) AuditEntityTypes(ctx context.Context, orgID string) ([]string, error) {
	var out []string
	err := db.Conn(ctx).Table("audit_log").Where("organization_id = ?", orgID).Distinct().Order("entity_type").Pluck("entity_type", &out).Error
	return out, err
}
