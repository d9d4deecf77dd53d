package models

import (
	"context"

	"gorm.io/gorm"
)

// Bulk actions at the speed the target allows (issue 22).

// Bulk rate bounds: how many dead letters a second an organization's bulk actions act on.
const (
	BulkRateDefault = 20
	BulkRateMin     = 1
	BulkRateMax     = 500
)

// BulkRate returns the organization's bulk rate (items a second). An organization that
// does not exist reads as the default.
func (db *DB) BulkRate(ctx context.Context, orgID string) (int, error) {
	return BulkRateTx(db.Conn(ctx), orgID)
}

// BulkRateTx is BulkRate with tx.
func BulkRateTx(tx *gorm.DB, orgID string) (int, error) {
	var v []int
	if err := tx.Model(&Organization{}).Where("id = ?", orgID).Pluck("bulk_rate", &v).Error; err != nil {
		return 0, err
	}
	if len(v) == 0 || v[0] < BulkRateMin {
		return BulkRateDefault, nil
	}
	return min(v[0], BulkRateMax), nil
}

// SetBulkRate stores the organization's bulk rate with tx (the caller checked its range).
func SetBulkRate(tx *gorm.DB, orgID string, v int) error {
	return tx.Model(&Organization{}).Where("id = ?", orgID).Update("bulk_rate", v).Error
}
