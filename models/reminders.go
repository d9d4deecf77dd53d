package models

import (
	"context"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// DeadlineReminder records that the reminder of an obligation and due date at a number of
// working days left was sent (issue 23; migration 00034): one per organization, obligation,
// due date and threshold.
type DeadlineReminder struct {
	ID             string
	OrganizationID string
	Obligation     string
	DueOn          string
	DaysLeft       int
	Clients        int
	SentAt         time.Time
}

func (DeadlineReminder) TableName() string { return "deadline_reminders" }

// RecordDeadlineReminder marks r sent, in tx: true when this call did, false when it lost
// (the reminder of the same organization, obligation, due date and threshold was recorded
// before, by this process or another): the caller then tells no one.
func RecordDeadlineReminder(tx *gorm.DB, r DeadlineReminder) (bool, error) {
	if r.ID == "" {
		r.ID = NewID()
	}
	res := tx.Clauses(clause.OnConflict{Columns: []clause.Column{{Name: "organization_id"}, {Name: "obligation"}, {Name: "due_on"}, {Name: "days_left"}},
		DoNothing: true}).Create(&r)
	return res.RowsAffected == 1, res.Error
}

// DueSoonRow is the open work of one organization, obligation and due date.
type DueSoonRow struct {
	OrganizationID, Obligation, DueOn string
	Open, Clients                     int
}

// DueSoon returns every organization's open work (executions not done) due from from to to
// (YYYY-MM-DD, inclusive), per organization, obligation and due date: what the reminders'
// pass looks at.
func (db *DB) DueSoon(ctx context.Context, from, to string) ([]DueSoonRow, error) {
	var out []DueSoonRow
	err := db.Conn(ctx).Table("workflow_executions").
		Select("organization_id, COALESCE(obligation, '') AS obligation, due_on, COUNT(*) AS open, COUNT(DISTINCT client) AS clients").
		Where("due_on IS NOT NULL AND "+execNotDone+" AND due_on >= ? AND due_on <= ?", from, to).
		Group("organization_id, obligation, due_on").Order("organization_id, due_on, obligation").Scan(&out).Error
	return out, err
}

// DueAudience returns, for the organization's open work of an obligation and due date, the
// periods it is for and the users to tell besides the admins: the members who started it,
// or, when no member did (a webhook, a schedule), the organization's accountants.
func DueAudience(tx *gorm.DB, orgID, obligation, dueOn string) (periods, users []string, err error) {
	open := tx.Table("workflow_executions").
		Where("organization_id = ? AND COALESCE(obligation, '') = ? AND due_on = ? AND "+execNotDone, orgID, obligation, dueOn)
	if err := open.Session(&gorm.Session{}).Distinct("period").Where("period IS NOT NULL").Order("period").Pluck("period", &periods).Error; err != nil {
		return nil, nil, err
	}
	if err := tx.Table("memberships").Distinct("memberships.user_id").
		Where("memberships.organization_id = ? AND memberships.user_id IN (?)", orgID,
			tx.Table("workflow_executions").Select("created_by").
				Where("organization_id = ? AND COALESCE(obligation, '') = ? AND due_on = ? AND "+execNotDone+" AND created_by IS NOT NULL", orgID, obligation, dueOn)).
		Pluck("memberships.user_id", &users).Error; err != nil {
		return nil, nil, err
	}
	if len(users) == 0 {
		if err := tx.Table("memberships").Where("organization_id = ? AND role = ?", orgID, RoleAccountant).Pluck("user_id", &users).Error; err != nil {
			return nil, nil, err
		}
	}
	return periods, users, nil
}
