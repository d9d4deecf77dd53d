package models

import (
	"context"
	"encoding/json"

	"gorm.io/gorm"
)

// EscalationPolicy returns the organization's escalation policy as stored
// (organizations.escalation_policy, a JSON array of levels; services/escalation reads it):
// "[]" when it has none, or no such organization exists.
func (db *DB) EscalationPolicy(ctx context.Context, orgID string) (json.RawMessage, error) {
	return EscalationPolicyTx(db.Conn(ctx), orgID)
}

// EscalationPolicyTx is EscalationPolicy with tx.
func EscalationPolicyTx(tx *gorm.DB, orgID string) (json.RawMessage, error) {
	var v []string
	if err := tx.Model(&Organization{}).Where("id = ?", orgID).Pluck("escalation_policy", &v).Error; err != nil {
		return nil, err
	}
	if len(v) == 0 || v[0] == "" {
		return json.RawMessage("[]"), nil
	}
	return json.RawMessage(v[0]), nil
}

// SetEscalationPolicy stores the organization's escalation policy (a JSON array of levels,
// already validated) in tx.
func SetEscalationPolicy(tx *gorm.DB, orgID string, policy json.RawMessage) error {
	return tx.Model(&Organization{}).Where("id = ?", orgID).Update("escalation_policy", string(policy)).Error
}

// EscalationPolicies returns the escalation policies of every organization that has one
// (not "[]"), by organization id: what the escalation pass works through.
func (db *DB) EscalationPolicies(ctx context.Context) (map[string]json.RawMessage, error) {
	var rows []struct {
		ID               string
		EscalationPolicy string
	}
	if err := db.Conn(ctx).Model(&Organization{}).Select("id, escalation_policy").
		Where("escalation_policy <> ? AND escalation_policy <> ''", "[]").Scan(&rows).Error; err != nil {
		return nil, err
	}
	out := make(map[string]json.RawMessage, len(rows))
	for _, r := range rows {
		out[r.ID] = json.RawMessage(r.EscalationPolicy)
	}
	return out, nil
}

// RoleMember is a user of an organization with their name and role.
type RoleMember struct {
	UserID, Email, Name, Role string
}

// RoleMembersTx lists the organization's members (role included), by email.
func RoleMembersTx(tx *gorm.DB, orgID string) ([]RoleMember, error) {
	var ms []RoleMember
	err := tx.Table("memberships").Select("memberships.user_id AS user_id, users.email AS email, users.name AS name, memberships.role AS role").
		Joins("JOIN users ON users.id = memberships.user_id").
		Where("memberships.organization_id = ?", orgID).Order("users.email").Scan(&ms).Error
	return ms, err
}
