package models

import (
	"context"
	"lifeline/models/apperr"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// QuarantinedRow is a row the reconciler could not settle: it is kept as it is and left out
// of later passes until an admin releases it (ReleaseQuarantined), so one bad row never stops
// the reconciler for every organization.
type QuarantinedRow struct {
	ID             string
	OrganizationID string
	// Table and RowID name the row (step_executions or compensation_actions).
	Table       string `gorm:"column:table_name"`
	RowID       string
	ExecutionID *string
	Reason      string
	CreatedAt   time.Time
}

func (QuarantinedRow) TableName() string { return "quarantined_rows" }

// NotQuarantined is a condition for a query over table aliased alias: its rows not
// quarantined.
func NotQuarantined(table, alias string) string {
	return "NOT EXISTS (SELECT 1 FROM quarantined_rows q WHERE q.table_name = '" + table + "' AND q.row_id = CAST(" + alias + ".id AS TEXT))"
}

// Quarantine records q with tx (ID set when empty). It reports whether it inserted it: false
// when the row was quarantined already.
func (db *DB) Quarantine(tx *gorm.DB, q *QuarantinedRow) (bool, error) {
	if q.ID == "" {
		q.ID = NewID()
	}
	r := tx.Clauses(clause.OnConflict{Columns: []clause.Column{{Name: "table_name"}, {Name: "row_id"}}, DoNothing: true}).Create(q)
	return r.RowsAffected == 1, r.Error
}

// QuarantinedRows lists the organization's quarantined rows, newest first (at most limit).
func (db *DB) QuarantinedRows(ctx context.Context, orgID string, limit int) ([]QuarantinedRow, error) {
	var out []QuarantinedRow
	err := db.Conn(ctx).Where("organization_id = ?", orgID).Order("created_at DESC, id").Limit(limit).Find(&out).Error
	return out, err
}

// ReleaseQuarantined removes the organization's quarantined row id with tx, so the next
// reconciler pass tries it again: apperr.ENOTFOUND for another organization's or an unknown id.
func (db *DB) ReleaseQuarantined(tx *gorm.DB, orgID, id string) (*QuarantinedRow, error) {
	var q QuarantinedRow
	if err := tx.Where("organization_id = ? AND id = ?", orgID, id).First(&q).Error; err != nil {
		if IsNotFound(err) {
			return nil, apperr.NotFound("quarantined row")
		}
		return nil, err
	}
	r := tx.Where("organization_id = ? AND id = ?", orgID, id).Delete(&QuarantinedRow{})
	if r.Error != nil {
		return nil, r.Error
	}
	if r.RowsAffected == 0 {
		return nil, apperr.NotFound("quarantined row")
	}
	return &q, nil
}
