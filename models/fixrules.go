package models

import (
	"context"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// Input-change request statuses (input_change_requests.status). A request is pending until
// an admin approves it (its replay then runs) or rejects it, or it is cancelled because the
// item was replayed or closed otherwise; only the engine's guarded transitions change it.
const (
	ChangePending   = "pending"
	ChangeApproved  = "approved"
	ChangeRejected  = "rejected"
	ChangeCancelled = "cancelled"
)

// InputChangeRequest is an accountant's edited input for a dead letter of a workflow that
// moves money, waiting for an admin's approval before the replay runs.
type InputChangeRequest struct {
	ID             string
	OrganizationID string
	DeadLetterID   string
	ExecutionID    string
	// Mode is the replay the approval runs (engine.ReplayFromFailed, or ReplayFull for a
	// rolled-back execution).
	Mode string
	// Input is the edited input, sealed like an execution's (bound to this row).
	Input JSON
	// InputBefore and InputAfter are the input before and after the edit, masked: what the
	// diff shows.
	InputBefore   JSON
	InputAfter    JSON
	Notes         *string
	Status        string
	RequestedBy   *string
	RequestedName string
	DecidedBy     *string
	DecidedName   string
	DecisionNotes *string
	DecidedAt     *time.Time
	CreatedAt     time.Time
	UpdatedAt     time.Time
}

func (InputChangeRequest) TableName() string { return "input_change_requests" }

// AccountantsMayFix reports the organization's rule: whether its accountants may edit an
// item's input, skip its failed step and close it (the default). ENOTFOUND-free: an
// organization that does not exist reads as the default.
func (db *DB) AccountantsMayFix(ctx context.Context, orgID string) (bool, error) {
	var v []bool
	if err := db.Conn(ctx).Model(&Organization{}).Where("id = ?", orgID).Pluck("accountants_may_fix", &v).Error; err != nil {
		return false, err
	}
	return len(v) == 0 || v[0], nil
}

// SetAccountantsMayFix stores the organization's rule with tx.
func SetAccountantsMayFix(tx *gorm.DB, orgID string, v bool) error {
	return tx.Model(&Organization{}).Where("id = ?", orgID).Update("accountants_may_fix", v).Error
}

// AdminMessage is an in-app message to every admin (and owner) of an organization: a request
// of an accountant, with a link to what it is about.
type AdminMessage struct {
	OrganizationID string
	// Kind is the notification's kind (the inbox labels it).
	Kind  string
	Title string
	Body  string
	Link  string
	// DedupKey: a second message with the same key adds nothing.
	DedupKey string
	At       time.Time
}

// InboxAdmins puts m in the inbox of every admin and owner of its organization with tx (an
// app delivery recorded sent, and its notification), and returns how many it added: none
// for a key seen before.
func InboxAdmins(tx *gorm.DB, m AdminMessage) (int, error) {
	var admins []string
	if err := tx.Model(&Membership{}).Where("organization_id = ? AND role IN ?", m.OrganizationID, []string{RoleOwner, RoleAdmin}).
		Order("user_id").Pluck("user_id", &admins).Error; err != nil {
		return 0, err
	}
	added := 0
	for _, uid := range admins {
		at := m.At.UTC()
		d := NotificationDelivery{ID: NewID(), OrganizationID: m.OrganizationID, Channel: "app", Recipient: uid, EventKind: m.Kind,
			Status: DeliverySent, NextAttemptAt: at, SentAt: &at, WindowStart: at.Truncate(time.Minute),
			DedupKey: m.OrganizationID + ":" + m.DedupKey + ":app:" + uid, CreatedAt: at, UpdatedAt: at}
		r := tx.Clauses(clause.OnConflict{Columns: []clause.Column{{Name: "dedup_key"}}, DoNothing: true}).Create(&d)
		if r.Error != nil {
			return added, r.Error
		}
		if r.RowsAffected == 0 {
			continue
		}
		n := Notification{ID: NewID(), OrganizationID: m.OrganizationID, UserID: uid, DeliveryID: d.ID, Kind: m.Kind,
			Title: m.Title, Body: m.Body, Link: m.Link, CreatedAt: at}
		if err := tx.Create(&n).Error; err != nil {
			return added, err
		}
		added++
	}
	return added, nil
}
