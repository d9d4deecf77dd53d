package models

import (
	"context"

	"gorm.io/gorm"
)

// Deadline rules of an organization (issue 23).
const (
	// ZUSDayDefault is the day of the month ZUS contributions are due unless the
	// organization says 15.
	ZUSDayDefault = 20
	// RiskDaysDefault is how many working days before its due date work is at risk.
	RiskDaysDefault = 3
	RiskDaysMax     = 30
)

// DeadlineRules are an organization's deadline settings.
type DeadlineRules struct {
	ZUSDay          int
	RiskWorkingDays int
}

// DeadlineRulesTx returns the organization's deadline settings (the defaults for an
// organization that does not exist).
func DeadlineRulesTx(tx *gorm.DB, orgID string) (DeadlineRules, error) {
	var rows []DeadlineRules
	if err := tx.Model(&Organization{}).Select("zus_day, risk_working_days").Where("id = ?", orgID).Scan(&rows).Error; err != nil {
		return DeadlineRules{}, err
	}
	r := DeadlineRules{ZUSDay: ZUSDayDefault, RiskWorkingDays: RiskDaysDefault}
	if len(rows) == 1 {
		if rows[0].ZUSDay == 15 {
			r.ZUSDay = 15
		}
		if rows[0].RiskWorkingDays >= 0 && rows[0].RiskWorkingDays <= RiskDaysMax {
			r.RiskWorkingDays = rows[0].RiskWorkingDays
		}
	}
	return r, nil
}

// DeadlineRules is DeadlineRulesTx outside a transaction.
func (db *DB) DeadlineRules(ctx context.Context, orgID string) (DeadlineRules, error) {
	return DeadlineRulesTx(db.Conn(ctx), orgID)
}

// SetDeadlineRules stores the organization's deadline settings (the caller checked them).
func SetDeadlineRules(tx *gorm.DB, orgID string, r DeadlineRules) error {
	return tx.Model(&Organization{}).Where("id = ?", orgID).
		Updates(map[string]any{"zus_day": r.ZUSDay, "risk_working_days": r.RiskWorkingDays}).Error
}
