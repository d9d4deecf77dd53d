package models

import (
	"context"
	"time"
)

// HeldValue is a poison input value an admin quarantined (issue 22): while it is held
// (ReleasedAt nil) an execution whose input carries it goes to the DLQ without running a
// step. Kind and Value are as services/poison keys them (Value: digits only for the
// numeric identifiers, upper case otherwise). HeldBy and ReleasedBy name who did it, for
// the reason of a held execution's dead letter and the list (an e-mail address or a token).
type HeldValue struct {
	ID             string
	OrganizationID string
	Kind           string
	Value          string
	Note           string
	HeldBy         string
	HeldAt         time.Time
	ReleasedAt     *time.Time
	ReleasedBy     *string
}

func (HeldValue) TableName() string { return "held_values" }

// HeldValues returns the organization's values held now, newest first (at most limit).
// The partial unique index of held values answers it.
func (db *DB) HeldValues(ctx context.Context, orgID string, limit int) ([]HeldValue, error) {
	var out []HeldValue
	err := db.Conn(ctx).Where("organization_id = ? AND released_at IS NULL", orgID).Order("held_at DESC, id").Limit(limit).Find(&out).Error
	return out, err
}
